//! fio's mmap engine on a node: one I/O through the window mappings, and
//! a batch of them whose page misses go out together first.

use alloc::string::ToString;
use alloc::vec::Vec;

use fabric::proto::{Errno, PageKey};
use osapi::io::{MapSpan, MmapIo};

use super::{Node, WindowAccess};
use crate::env::Env;

/// Files whose (inode, size) `mmap_io` remembers between opens.
const MMAP_FILES: usize = 64;

impl<E: Env + 'static> Node<E> {
    /// (inode, size) of a file mapped by `mmap_io`: looked up once (until
    /// the next open), not per I/O.
    fn mmap_lookup(&mut self, path: &str) -> Result<(u64, u64), Errno> {
        if let Some((_, ino, size)) = self.mmap_files.iter().find(|f| f.0 == path) {
            return Ok((*ino, *size));
        }
        let a = self.stat(path)?;
        if self.mmap_files.len() >= MMAP_FILES {
            self.mmap_files.remove(0);
        }
        self.mmap_files.push((path.to_string(), a.ino, a.size));
        Ok((a.ino, a.size))
    }

    /// fio's mmap engine: `len` bytes at `offset` of `path` through the
    /// window mappings, page by page: `access(va, bytes, write)` does the
    /// loads or stores (kernel: volatile accesses of the window).
    pub fn mmap_io(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
        write: bool,
        buf: &mut [u8],
        access: &mut WindowAccess<'_>,
    ) -> Result<(), Errno> {
        if !self.has_windows() {
            return Err(Errno::NotSupported);
        }
        if len == 0 {
            return Ok(()); // probe: supported in this mode
        }
        self.guard()?;
        let (ino, size) = self.mmap_lookup(path)?;
        let end = offset.checked_add(len as u64).ok_or(Errno::Invalid)?;
        if end > size || buf.len() < len {
            return Err(Errno::Invalid);
        }
        let mut done = 0usize;
        let mut revoked = 0usize;
        while done < len {
            let at = offset + done as u64;
            let key = PageKey {
                ino,
                idx: at / 4096,
            };
            let in_page = (at % 4096) as usize;
            let n = (4096 - in_page).min(len - done);
            let st = self
                .vfs
                .data_path()
                .single_copy()
                .ok_or(Errno::NotSupported)?;
            let (va, _) = st.map_page(&mut self.link, key)?;
            let bytes = buf.get_mut(done..done + n).ok_or(Errno::Invalid)?;
            if write {
                // A store into a replicated frame waits for the replicas
                // to be revoked, then maps the page again.
                let gfn = st.frame_of(&key).ok_or(Errno::Io)?;
                if !st.store_allowed(&mut self.link, key, gfn)? {
                    revoked += 1;
                    if revoked > 8 {
                        return Err(Errno::Io);
                    }
                    continue;
                }
                let r = access(va + in_page as u64, bytes, true);
                st.store_done(&self.link);
                r?;
                st.mapped_write(&key);
            } else {
                access(va + in_page as u64, bytes, false)?;
            }
            done += n;
        }
        Ok(())
    }

    /// Tasks' mapped I/Os, first step (`userland::os::Os::mmap_start`,
    /// as [`Node::io_start`]): start the misses of each load without
    /// waiting; per I/O, `None` if it can run now or a ticket for
    /// [`Node::io_poll`]. `NotSupported` without windows (`private`,
    /// `net`) and with `task_reads=batch`.
    pub fn mmap_start(&mut self, ios: &[MapSpan<'_>]) -> Result<Vec<Option<u64>>, Errno> {
        if !self.task_reads_each || !self.has_windows() {
            return Err(Errno::NotSupported);
        }
        self.guard()?;
        // A file that cannot be looked up fails in its own I/O.
        self.start_reads(ios, |n, io| {
            if io.write || io.len == 0 {
                return None;
            }
            let (ino, size) = n.mmap_lookup(io.path).ok()?;
            let end = io.offset.saturating_add(io.len as u64).min(size);
            Some((ino, io.offset / 4096..end.div_ceil(4096)))
        })
    }

    /// A batch of mapped I/Os (the tasks' flush): the pages every load
    /// touches are resolved first, the misses in flight together (up to
    /// 32 page requests per directory round trip), then each I/O runs
    /// through the window (hits) and gets its own result. `Err` only if
    /// the mode has no windows.
    pub fn mmap_batch(
        &mut self,
        ios: &mut [MmapIo<'_>],
        access: &mut WindowAccess<'_>,
    ) -> Result<(), Errno> {
        if !self.has_windows() {
            return Err(Errno::NotSupported);
        }
        if let Err(e) = self.guard() {
            for io in ios.iter_mut() {
                io.done = Err(e);
            }
            return Ok(());
        }
        let mut pages: Vec<(u64, u64)> = Vec::new();
        for io in ios.iter() {
            if io.write || io.buf.is_empty() {
                continue;
            }
            // A file that cannot be looked up fails in its own I/O below.
            let Ok((ino, size)) = self.mmap_lookup(io.path) else {
                continue;
            };
            let end = io.offset.saturating_add(io.buf.len() as u64).min(size);
            let mut idx = io.offset / 4096;
            while idx * 4096 < end {
                pages.push((ino, idx));
                idx += 1;
            }
        }
        pages.sort_unstable();
        pages.dedup();
        let dp = self.vfs.data_path_ref();
        // All held (the tasks' loads whose pages came in): nothing to ask.
        if !pages.iter().all(|&(ino, idx)| dp.holds(ino, idx)) {
            let (dp, meta) = self.vfs.parts();
            // A failed prefetch is not fatal: each I/O resolves its pages
            // again and reports its own error.
            if let Err(e) = dp.prefetch(&mut self.link, meta, &pages) {
                log::debug!("mmap batch: prefetch of {} pages: {e}", pages.len());
            }
        }
        for io in ios.iter_mut() {
            let len = io.buf.len();
            io.done = self
                .mmap_io(io.path, io.offset, len, io.write, io.buf, access)
                .map(|()| len);
        }
        Ok(())
    }
}
