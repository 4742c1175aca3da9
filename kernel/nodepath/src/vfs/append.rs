//! Appends under the directory's append lock (strong mode): take the
//! lease, store and publish within its budget, renew it between chunks.

use super::*;

impl<E: Env> Vfs<E> {
    /// A strong-mode append: under the file's append lock at the
    /// directory (`Op::AppendLock`), learn the end of file, write there
    /// and publish the new size, then give the lock back. Strong writes
    /// store straight into the file's frames, so two appends that learned
    /// the same end would store over each other before either published
    /// its size; under the lock they follow one another, each whole.
    ///
    /// The lock is a lease: this node stores and publishes under it only
    /// within [`APPEND_BUDGET_NS`] of sending its take (renewed between
    /// chunks once half of that is spent); past it the append stops with
    /// what it published ([`Errno::Busy`] if nothing), since the lease may
    /// be another node's by then. A lost give-back costs other nodes one
    /// lease at most.
    pub(super) fn append_locked(
        &mut self,
        link: &mut Link<E>,
        fd: Fd,
        ino: u64,
        data: &[u8],
    ) -> Result<usize, Errno> {
        let (a, mut taken) = self.take_append_lock(link, ino)?;
        self.learn(&a);
        let pos = self.meta.size_of(ino);
        let mut done = 0usize;
        let mut r = Ok(());
        for chunk in data.chunks(APPEND_CHUNK) {
            if link.env.now_ns().saturating_sub(taken) >= APPEND_BUDGET_NS / 2 {
                let sent = link.env.now_ns();
                if let Err(e) = self.renew_append_lock(link, ino) {
                    r = Err(e);
                    break;
                }
                taken = sent;
            }
            self.dp
                .set_append_deadline(Some(taken.saturating_add(APPEND_BUDGET_NS)));
            let at = pos + done as u64;
            let w = self.dp.write(link, &mut self.meta, ino, at, chunk);
            self.dp.set_append_deadline(None);
            match w {
                Ok(n) => done += n,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        let give = Request::AppendLock {
            ino,
            hold: false,
            renew: false,
        };
        if let Err(e) = self.call(link, &give) {
            // Still ours at the directory until its lease lapses (taken
            // again by our next append); other nodes' appends wait that
            // long at most.
            log::warn!("append lock of {ino}: give-back failed ({e:?})");
        }
        if done == 0 {
            r?;
        } else if let Err(e) = r {
            log::warn!("append to {ino}: stopped after {done} bytes ({e:?})");
        }
        self.file(fd)?.pos = pos + done as u64;
        Ok(done)
    }

    /// Renew `ino`'s append lock, which this node holds: refused
    /// ([`Errno::Busy`]) if its lease lapsed and another node took it.
    pub(super) fn renew_append_lock(&mut self, link: &mut Link<E>, ino: u64) -> Result<(), Errno> {
        let take = Request::AppendLock {
            ino,
            hold: true,
            renew: true,
        };
        attr_of(self.call(link, &take)?).map(|_| ())
    }

    /// Take `ino`'s append lock, waiting while another node holds it (up
    /// to the call timeout): the file's attributes, and when the take
    /// that got it was sent (its lease starts no earlier).
    pub(super) fn take_append_lock(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
    ) -> Result<(Attr, u64), Errno> {
        let take = Request::AppendLock {
            ino,
            hold: true,
            renew: false,
        };
        let deadline = link.deadline();
        loop {
            let sent = link.env.now_ns();
            match self.call(link, &take) {
                Err(Errno::Busy) if link.env.now_ns() < deadline => {
                    // Held by another node's append, a few calls long.
                    link.service(&mut *self.dp);
                    link.env.wait_step(false);
                }
                r => return Ok((attr_of(r?)?, sent)),
            }
        }
    }
}
