//! Append locks: a strong-mode append learns the end of file, writes its
//! bytes into the file's frames there and then publishes the new size.
//! Two nodes doing so at once would both write at the same end, the later
//! store over the earlier one's bytes before either size is published.
//! The lock makes the three steps one: a node holds a file's append lock
//! from learning the end to publishing past it, and another node's append
//! waits for it. Only appends take it; other writes pay nothing.
//!
//! A lock belongs to one node: it gives it back, or loses it when the
//! directory drops the node (failed, left, restarted: see
//! `Directory::lose`), so a dead holder never blocks appenders for good.

use fabric::proto::{Errno, Response};
use flatfs::BlockDevice;

use super::Directory;

impl<D: BlockDevice> Directory<D> {
    /// Serve `node`'s take (`hold`) or give-back of `ino`'s append lock:
    /// the file's attributes, or [`Errno::Busy`] while another node holds
    /// it. Taking a lock one already holds keeps it (a node whose give-back
    /// was lost takes it again at its next append); giving back a lock one
    /// does not hold changes nothing.
    pub(super) fn append_lock(
        &mut self,
        node: u32,
        ino: u64,
        hold: bool,
    ) -> Result<Response, Errno> {
        let fs = self.fs.as_mut().ok_or(Errno::Unavailable)?;
        let a = fs.getattr(ino)?;
        let me = u8::try_from(node).map_err(|_| Errno::Invalid)?;
        if hold {
            match self.append_locks.get(&ino) {
                Some(&holder) if holder != me => return Err(Errno::Busy),
                _ => {
                    self.append_locks.insert(ino, me);
                }
            }
        } else if self.append_locks.get(&ino) == Some(&me) {
            self.append_locks.remove(&ino);
        }
        Ok(Response::Attr(a))
    }

    /// `node` is gone: its append locks go.
    pub(super) fn drop_append_locks(&mut self, node: u32) {
        let before = self.append_locks.len();
        self.append_locks
            .retain(|_, holder| u32::from(*holder) != node);
        let gone = before - self.append_locks.len();
        if gone > 0 {
            log::info!("node {node}: {gone} append locks released");
        }
    }
}
