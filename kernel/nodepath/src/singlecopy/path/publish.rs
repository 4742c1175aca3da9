//! Writes on the single-copy path and their size publication: data
//! first, then the new size over the version the data was written at,
//! redone if another node changed the file in between.

use fabric::proto::{Errno, Request};

use super::{known_end, SingleCopy, MAX_PUBLISH_TRIES};
use crate::env::Env;
use crate::link::Link;
use crate::pagecache::{Mode, PAGE};
use crate::vfs::{attr_of, getattr, FileMeta, Meta};

impl SingleCopy {
    /// Write `data` at `pos` of `ino`, then publish the new size if it
    /// grew the file (see [`DataPath::write`]).
    pub(super) fn write_chunk<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<usize, Errno> {
        // Data first, size second (as Linux publishes i_size only once the
        // data is in the page cache): a reader never sees the new size over
        // pages that do not hold the new data yet. The size is published
        // only over the version the data was written at; if another node
        // changed the file in between (a truncate evicts our pages), the
        // directory answers Stale and the write is redone.
        let end = pos + data.len() as u64;
        // Relaxed: a write that lands in private copies only is invisible
        // to other nodes until it is written back, so it needs no size
        // publication either: its extension stays local (as `private`
        // mode's buffered writes) and goes to the directory with the
        // copies' write-back (see `written_back`).
        let zeros_from = known_end(meta, ino);
        if self.st.private_only(ino, pos, data.len(), zeros_from) {
            return self.write_local(link, meta, (ino, pos), data, zeros_from);
        }
        let mut tries = 0u32;
        let busy_until = link.deadline();
        loop {
            tries += 1;
            if tries > MAX_PUBLISH_TRIES {
                return Err(Errno::Io);
            }
            let grow = self.size_to_publish(link, meta, ino, end)?;
            let n = self.write_pinned(link, meta, (ino, pos), data, grow)?;
            let Some(version) = grow else { return Ok(n) };
            if self.st.mode == Mode::Relaxed && self.all_private(ino, pos, n) {
                // The write made private copies of pages it mapped (as
                // `private_only` writes do of pages past the end): no
                // other node sees its bytes before they are written back,
                // so its size stays local too. Published now, the file
                // would read as zeros elsewhere until then, and for good
                // if the copies are lost.
                self.st.pin(&link.env, None);
                meta.set_local_size(ino, pos + n as u64);
                return Ok(n);
            }
            // Under an append lock the size goes only within its budget,
            // and the directory takes it only from the lease's holder.
            let locked = self.st.appending();
            if let Err(e) = self.st.in_append_budget(link.env.now_ns()) {
                self.st.pin(&link.env, None);
                return Err(e);
            }
            match self.publish_size(link, meta, (ino, end), version, locked) {
                Ok(()) => return Ok(n),
                Err(Errno::Stale) => log::debug!("write of {ino}: size publication stale, again"),
                // A page the size would cover is still being torn down (a
                // truncate by another node): this write may sit in its old
                // frame. Wait for the teardown (servicing our notices: we
                // may be the owner to tell), then redo the write into a
                // fresh copy. Under an append lock, `Busy` may also mean
                // the lease lapsed: the budget check above ends that.
                Err(Errno::Busy) if link.env.now_ns() < busy_until => {
                    log::debug!("write of {ino}: pages under the new size torn down, waiting");
                    tries -= 1;
                    // Our own tasks' READs of those pages hold their acks
                    // until their answers are applied.
                    self.st.reads_poll(link);
                    link.service(self);
                    link.env.wait_step(false);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A write into private copies only: its extension of the file stays
    /// local.
    fn write_local<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        (ino, pos): (u64, u64),
        data: &[u8],
        zeros_from: u64,
    ) -> Result<usize, Errno> {
        let n = self.st.write(link, ino, pos, data, zeros_from)?;
        let end = pos + n as u64;
        if end > meta.size_of(ino) {
            meta.set_local_size(ino, end);
        }
        Ok(n)
    }

    /// The version of `ino` a write ending at `end` grows (its size to
    /// publish over it), or `None` if the file is long enough already.
    fn size_to_publish<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        end: u64,
    ) -> Result<Option<u64>, Errno> {
        // With a local extension (relaxed private copies past the
        // published end) the known size is not the directory's: ask,
        // since a frame past the published end is not written back.
        // Strong: so is a size another node may have cut since it was
        // confirmed (the metadata epoch moved): a write that starts
        // after a truncate returned and lands past its end extends the
        // file again, or its bytes would lie past the end, unseen. The
        // call also services the DIR_INVs the cut sent this node.
        let extended = meta.local_size(ino).is_some();
        let epoch = link.meta_epoch();
        let unconfirmed =
            self.st.mode == Mode::Strong && (epoch.is_none() || epoch != meta.validated_at(ino));
        if end > meta.size_of(ino) || extended || unconfirmed {
            let a = getattr(link, &mut self.st, ino)?;
            meta.learn(&a);
            if let Some(e) = epoch {
                meta.set_validated(ino, e);
            }
            Ok((end > a.size).then_some(a.version))
        } else {
            Ok(None)
        }
    }

    /// Write `data` at `pos` of `ino`; if it grows the file (`grow`), its
    /// pages stay pinned until the size is published (see `pin`:
    /// reclaim must not take pages not written back past the end of
    /// file), or the write failed.
    fn write_pinned<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        (ino, pos): (u64, u64),
        data: &[u8],
        grow: Option<u64>,
    ) -> Result<usize, Errno> {
        let end = pos + data.len() as u64;
        let first = pos / PAGE as u64;
        let last = end.div_ceil(PAGE as u64);
        self.st.pin(&link.env, grow.map(|_| (ino, first, last)));
        let n = self.st.write(link, ino, pos, data, known_end(meta, ino));
        if n.is_err() {
            self.st.pin(&link.env, None);
        }
        n
    }

    /// Publish `end` as the size of `ino` over `version` (SETATTR with
    /// `expect`; `locked`: under this node's append lock), unpin the
    /// write's pages, and learn the answer.
    fn publish_size<E: Env>(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        (ino, end): (u64, u64),
        version: u64,
        locked: bool,
    ) -> Result<(), Errno> {
        let req = Request::Setattr {
            gen: fabric::proto::gen_of_version(version),
            ino,
            size: end,
            expect: Some(version),
            locked,
        };
        let published = link.fs_call(&req, self);
        self.st.pin(&link.env, None);
        let a = attr_of(published?)?;
        meta.set(
            ino,
            FileMeta {
                version: a.version,
                size: a.size,
            },
        );
        Ok(())
    }
}
