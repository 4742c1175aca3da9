//! Write-back for fsync and close: done now, or started for a task
//! without waiting where the data path can, and polled.

use super::*;

impl<E: Env> Vfs<E> {
    /// Settle the files whose write was given up unanswered
    /// ([`Link::in_doubt`]) before anything of theirs is written back
    /// again: such a write may have landed late, and sent again it would
    /// go over what other nodes wrote after it. The directory's version
    /// of the file tells. Unchanged since this node last heard it,
    /// nothing landed (neither that write nor anyone's), and what this
    /// node holds goes out with its next write-back. Moved, the write may
    /// have landed and others may have written since: what this node
    /// buffered of the file goes unwritten (the close, fsync or sync that
    /// gave up reported it) and the next read fetches the directory's
    /// bytes. `Err`: no answer, the doubt stays.
    pub fn settle_doubts(&mut self, link: &mut Link<E>) -> Result<(), Errno> {
        for ino in link.in_doubt() {
            let known = self.meta.get(ino).map(|m| m.version);
            match getattr(link, &mut *self.dp, ino) {
                Ok(a) if Some(a.version) == known => {
                    log::info!(
                        "inode {ino}: unanswered write-back did not land; its data goes out again"
                    );
                }
                Ok(a) => {
                    self.drop_in_doubt(ino);
                    self.learn(&a);
                }
                Err(Errno::Unavailable) => return Err(Errno::Unavailable),
                Err(_) => self.drop_in_doubt(ino),
            }
            link.settled(ino);
        }
        Ok(())
    }

    /// What this node buffered of `ino`, in doubt, goes unwritten.
    fn drop_in_doubt(&mut self, ino: u64) {
        log::warn!(
            "inode {ino}: changed since an unanswered write-back (which may have landed): the data buffered here is dropped, not sent over newer writes"
        );
        self.dp.stale_gen(ino);
        self.meta.forget_local_size(ino);
    }

    /// Write back `ino`'s dirty data before its flush request (fsync's
    /// first half; the `Fsync` request is the second).
    pub fn fsync_prepare(&mut self, link: &mut Link<E>, fd: Fd) -> Result<u64, Errno> {
        let ino = self.file(fd)?.ino;
        self.dp.fsync_prepare(link, &mut self.meta, ino)?;
        Ok(ino)
    }

    /// Start writing back the file of `fd` without waiting, where the
    /// data path can ([`DataPath::write_back_start`]; `None`: it cannot).
    pub fn write_back_start(
        &mut self,
        link: &mut Link<E>,
        fd: Fd,
        why: WbWhy,
    ) -> Result<Option<WbStart>, Errno> {
        let ino = self.file(fd)?.ino;
        self.dp.write_back_start(link, &mut self.meta, ino, why)
    }

    /// fsync's write-back for a task: started without waiting where the
    /// data path can ([`DataPath::write_back_start`]), else done now.
    /// Returns the inode and what to wait for.
    pub fn fsync_start(&mut self, link: &mut Link<E>, fd: Fd) -> Result<(u64, WbStart), Errno> {
        let ino = self.file(fd)?.ino;
        match self.write_back_start(link, fd, WbWhy::Fsync)? {
            Some(w) => Ok((ino, w)),
            None => {
                self.dp.fsync_prepare(link, &mut self.meta, ino)?;
                Ok((ino, WbStart::Done))
            }
        }
    }

    /// close for a task: the descriptor goes now; its write-back is
    /// started without waiting where the data path can, else done now.
    pub fn close_start(&mut self, link: &mut Link<E>, fd: Fd) -> Result<WbStart, Errno> {
        let f = self.files.get_mut(fd.0 as usize).ok_or(Errno::BadFd)?;
        let ino = f.as_ref().ok_or(Errno::BadFd)?.ino;
        match self
            .dp
            .write_back_start(link, &mut self.meta, ino, WbWhy::Close)
        {
            Ok(Some(w)) => {
                self.drop_fd(fd);
                Ok(w)
            }
            // As a synchronous close: the descriptor goes whatever the
            // write-back says.
            Ok(None) => self.close(link, fd).map(|()| WbStart::Done),
            Err(e) => {
                self.drop_fd(fd);
                Err(e)
            }
        }
    }

    /// Is the write-back job `id` of [`Vfs::fsync_start`] or
    /// [`Vfs::close_start`] done?
    pub fn write_back_poll(&mut self, link: &mut Link<E>, id: u64) -> Option<Result<(), Errno>> {
        self.dp.write_back_poll(link, &mut self.meta, id)
    }
}
