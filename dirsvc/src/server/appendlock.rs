//! Append locks, the serving loop's side: takes, give-backs and sizes
//! published under the lock, answered from [`crate::appendlock`]'s
//! leases at the clock of the last poll.

use fabric::proto::{Errno, Request, Response};
use flatfs::BlockDevice;

use super::Directory;

impl<D: BlockDevice> Directory<D> {
    /// Serve `node`'s take (`hold`) or give-back of `ino`'s append lock:
    /// the file's attributes, or [`Errno::Busy`] while another node's
    /// lease runs (or its failed holder is not dropped yet). A `renew`
    /// take succeeds only if `node`'s lease still runs. Giving back a
    /// lock one does not hold changes nothing.
    pub(super) fn append_lock(
        &mut self,
        node: u32,
        ino: u64,
        hold: bool,
        renew: bool,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let a = fs.getattr(ino)?;
        let me = u8::try_from(node).map_err(|_| Errno::Invalid)?;
        let now = self.members.now_ns();
        if hold && renew {
            self.append_locks.renew(ino, me, now)?;
        } else if hold {
            let members = &self.members;
            let live = |n: u8| members.is_member(u32::from(n));
            self.append_locks.take(ino, me, now, live)?;
        } else {
            self.append_locks.give(ino, me);
        }
        Ok(Response::Attr(a))
    }

    /// A size published under the append lock (`Setattr` with `locked`)
    /// by `node`: refused with [`Errno::Busy`] unless its lease still
    /// runs (it lapsed and another node may have appended since).
    pub(super) fn check_locked_publication(
        &mut self,
        node: u32,
        req: &Request,
    ) -> Result<(), Errno> {
        let Request::Setattr {
            ino, locked: true, ..
        } = *req
        else {
            return Ok(());
        };
        let me = u8::try_from(node).map_err(|_| Errno::Invalid)?;
        if self.append_locks.holds(ino, me, self.members.now_ns()) {
            Ok(())
        } else {
            log::warn!("node {node}: size of {ino} published under an append lock it does not hold, refused");
            Err(Errno::Busy)
        }
    }

    /// `node` is gone: its append locks go.
    pub(super) fn drop_append_locks(&mut self, node: u32) {
        let Ok(me) = u8::try_from(node) else { return };
        let gone = self.append_locks.drop_node(me);
        if gone > 0 {
            log::info!("node {node}: {gone} append locks released");
        }
    }

    /// The append locks' counters.
    pub fn append_lock_stats(&self) -> crate::appendlock::AppendLockStats {
        self.append_locks.stats()
    }
}
