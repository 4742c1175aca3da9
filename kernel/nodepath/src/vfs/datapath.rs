//! [`DataPath`]: how file data moves, one implementation per mode family.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::AtomicU64;

use fabric::config::Mode;
use fabric::proto::Errno;

use super::Meta;
use crate::env::Env;
use crate::link::{Link, Session};
use crate::singlecopy::ScState;
use crate::tickets::TicketDone;

/// What [`DataPath::write_back_start`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WbStart {
    /// Nothing left to wait for: nothing was dirty, or it was written
    /// back synchronously.
    Done,
    /// Writes in flight: poll job `.0` with [`DataPath::write_back_poll`].
    Started(u64),
}

/// Why a write-back is started ([`DataPath::write_back_start`]): the
/// single-copy modes write back different things for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WbWhy {
    /// Before an fsync's flush ([`DataPath::fsync_prepare`]'s work).
    Fsync,
    /// At close ([`DataPath::close`]'s work).
    Close,
    /// Before a truncate to this size ([`DataPath::truncate_prepare`]'s
    /// work).
    Truncate(u64),
}

/// How file data moves: one implementation per mode family.
pub trait DataPath<E: Env>: Session<E> + Send {
    /// The mode.
    fn mode(&self) -> Mode;
    /// Can a file's size move without this node seeing a new version
    /// (single copy: another node extends it)? Then the size is asked
    /// again at end of file and for appends.
    fn sizes_move(&self) -> bool;
    /// Page requests this path has made so far (misses and retries; any
    /// count that moves will do). A single-copy read during which it did
    /// not move copied only pages this node already held: another node's
    /// truncate cannot have replaced them by zeros without first
    /// invalidating them here (the directory completes a shrinking
    /// `Setattr` only after every sharer acked), so that read needs no
    /// validation round trip.
    fn page_requests(&self) -> u64 {
        0
    }
    /// A count this path moves whenever it loses buffered writes without
    /// writing them back (a rejoin drops relaxed mode's private copies):
    /// the sizes they had extended files to go with them
    /// ([`Meta::watch_losses`]). `None`: it never does.
    fn losses(&self) -> Option<Arc<AtomicU64>> {
        None
    }
    /// A strong-mode append holds its file's append lock until
    /// `deadline` (this node's clock; `None`: no more): no store and no
    /// size publication at or past it, a size published meanwhile marked
    /// as under the lock. Paths without single-copy frames take no lock.
    fn set_append_deadline(&mut self, _deadline: Option<u64>) {}
    /// The version of `ino` moved, or its data changed wholesale: drop any
    /// cached copy of its pages (buffered writes not written back stay).
    fn forget_pages(&mut self, _ino: u64) {}
    /// The number `ino` names a newer file than the one this node knew
    /// (removed elsewhere, the number reused): what this node buffered of
    /// the older one (dirty pages, private copies) goes unwritten, since
    /// it was written to a removed file and must never reach the newer.
    fn stale_gen(&mut self, _ino: u64) {}
    /// `ino` was opened (close-to-open: drop what an open must not
    /// trust).
    fn opened(&mut self, _ino: u64) {}
    /// `ino` shrank to `size` (0: removed): retire pages from the one
    /// holding the new end on (dirty ones too: their data is gone).
    fn evict(&mut self, _env: &E, _ino: u64, _size: u64) {}
    /// Read at `pos` of `ino` (the caller clipped `buf` to EOF).
    fn read(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        buf: &mut [u8],
    ) -> Result<usize, Errno>;
    /// Write `data` at `pos` of `ino`.
    fn write(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        pos: u64,
        data: &[u8],
    ) -> Result<usize, Errno>;
    /// A truncate of `ino` is about to ask the directory (`Setattr`):
    /// what must happen here first (write back buffered data, drop the
    /// local size). A truncate is this, then (if
    /// [`DataPath::truncate_needs_old`]) a `Getattr` for the size before,
    /// then the `Setattr`, then [`DataPath::truncate_done`]; each request
    /// may be a task's call in flight (`node/meta.rs`).
    fn truncate_prepare(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        ino: u64,
        size: u64,
    ) -> Result<(), Errno>;
    /// Does [`DataPath::truncate_done`] need the file's size before the
    /// truncate (asked with a `Getattr`)?
    fn truncate_needs_old(&self) -> bool {
        false
    }
    /// The directory set `ino`'s size to `size` (it was `old`, if asked).
    fn truncate_done(
        &mut self,
        _env: &E,
        _meta: &mut Meta,
        _ino: u64,
        _size: u64,
        _old: Option<u64>,
    ) {
    }
    /// A descriptor of `ino` was closed.
    fn close(&mut self, _link: &mut Link<E>, _meta: &mut Meta, _ino: u64) -> Result<(), Errno> {
        Ok(())
    }
    /// Start what the call `why` names would write back for `ino` first,
    /// without waiting for the answers (a task's call then yields).
    /// `None`: this path does not; the caller makes the synchronous call.
    fn write_back_start(
        &mut self,
        _link: &mut Link<E>,
        _meta: &mut Meta,
        _ino: u64,
        _why: WbWhy,
    ) -> Result<Option<WbStart>, Errno> {
        Ok(None)
    }
    /// Is the write-back job `id` done (`None`: not yet)? Its result once.
    fn write_back_poll(
        &mut self,
        _link: &mut Link<E>,
        _meta: &mut Meta,
        _id: u64,
    ) -> Option<Result<(), Errno>> {
        Some(Err(Errno::Invalid))
    }
    /// Write back `ino`'s dirty data (fsync, before the `Fsync`
    /// request that flushes the disk).
    fn fsync_prepare(&mut self, link: &mut Link<E>, meta: &mut Meta, ino: u64)
        -> Result<(), Errno>;
    /// Write back everything this node dirtied (before the global flush).
    fn write_back_all(&mut self, _link: &mut Link<E>, _meta: &mut Meta) -> Result<(), Errno> {
        Ok(())
    }
    /// Is page `idx` of `ino` here and usable for a read without asking
    /// anyone (so a batch whose pages are all held needs no prefetch)?
    /// `false` when unsure.
    fn holds(&self, _ino: u64, _idx: u64) -> bool {
        false
    }
    /// Bring the pages (inode, index) in, misses in flight together.
    fn prefetch(
        &mut self,
        link: &mut Link<E>,
        meta: &mut Meta,
        pages: &[(u64, u64)],
    ) -> Result<(), Errno>;
    /// Has this path tasks' reads in flight one by one
    /// ([`DataPath::task_reads_start`])?
    fn has_task_reads(&self) -> bool {
        false
    }
    /// Tasks' reads (`Os::io_start`): start what the pages `[first, end)`
    /// of `ino` miss without waiting; a ticket for
    /// [`DataPath::task_reads_ticket`], or `None` when every page is
    /// usable here. `epoch`: the link's metadata epoch now, handed back
    /// with the ticket. `NotSupported`: this path has no such reads (a
    /// flush is one batch).
    fn task_reads_start(
        &mut self,
        _link: &mut Link<E>,
        _meta: &mut Meta,
        _ino: u64,
        _first: u64,
        _end: u64,
        _epoch: Option<u64>,
    ) -> Result<Option<u64>, Errno> {
        Err(Errno::NotSupported)
    }
    /// Could a task's write of up to `pages` pages not cached here have to
    /// wait for room ([`DataPath::task_room_start`])? A cheap check made
    /// before the pages are counted; `false` where the path makes no room
    /// in flight.
    fn task_room_may_wait(&self, _pages: usize) -> bool {
        false
    }
    /// A task's write of `need` pages of `ino` not cached here is about
    /// to run (`Os::io_start`): a ticket (as [`DataPath::task_reads_start`]'s)
    /// if it should first wait for room being made in flight, `None` to
    /// run it now.
    fn task_room_start(
        &mut self,
        _link: &mut Link<E>,
        _meta: &mut Meta,
        _ino: u64,
        _need: usize,
    ) -> Option<u64> {
        None
    }
    /// Take in the answers to tasks' reads that came (and start what
    /// waits); true if a ticket may be done since the last call (a page
    /// settled, by this or any other path).
    fn task_reads_progress(&mut self, _link: &mut Link<E>, _meta: &mut Meta) -> bool {
        true
    }
    /// Ticket `id`'s result once its pages are settled (`None`: not yet);
    /// an unknown ticket is `Invalid`.
    fn task_reads_ticket(&mut self, _id: u64) -> Option<TicketDone> {
        Some(TicketDone {
            result: Err(Errno::Invalid),
            ino: 0,
            epoch: None,
        })
    }
    /// Forget ticket `id` (its task is gone); with none left, wait for the
    /// reads still in flight.
    fn task_reads_cancel(&mut self, _link: &mut Link<E>, _meta: &mut Meta, _id: u64) {}
    /// A ticket was taken: with none left, wait for the reads still in
    /// flight (pages no ticket wants any more), so an idle node leaves
    /// none out.
    fn task_reads_idle(&mut self, _link: &mut Link<E>, _meta: &mut Meta) {}
    /// The free-frame marks of reclaim ahead of need (`crate::watermark`).
    fn set_watermarks(&mut self, _marks: crate::watermark::Watermarks) {}
    /// Between operations and at idle: if free frames are under the low
    /// mark, reclaim up to the high mark (`settle`: idle, wait for what
    /// was started). Never called inside another operation. Returns the
    /// pages whose reclaim started.
    fn reclaim_ahead(
        &mut self,
        _link: &mut Link<E>,
        _meta: &mut Meta,
        _settle: bool,
    ) -> Result<usize, Errno> {
        Ok(0)
    }
    /// `cache hold`: take a claim (`pin` false: PENDING, no fill asked)
    /// or a pin of page `idx` of `ino` in `daxfs` mode's shared slot
    /// cache and keep it until this node fails (failure tests); what was
    /// taken. Other modes: `NotSupported`.
    fn dax_hold(
        &mut self,
        _link: &mut Link<E>,
        _ino: u64,
        _idx: u64,
        _pin: bool,
    ) -> Result<String, Errno> {
        Err(Errno::NotSupported)
    }
    /// `cache drop`: give back every cached page; what was done.
    fn drop_cache(&mut self, link: &mut Link<E>, meta: &mut Meta) -> Result<String, Errno>;
    /// `bench inv`: invalidate page `idx` of `ino` if this node holds it
    /// (true); the caller times it.
    fn invalidate_page(&mut self, link: &mut Link<E>, ino: u64, idx: u64) -> Result<bool, Errno>;
    /// `cache stats` lines after the mode, storage and latency lines.
    fn stats(&self) -> Result<Vec<(String, String)>, Errno>;
    /// The single-copy session, for the mmap windows and `bench dir`
    /// (`None`: the mode has neither).
    fn single_copy(&mut self) -> Option<&mut ScState> {
        None
    }
}
