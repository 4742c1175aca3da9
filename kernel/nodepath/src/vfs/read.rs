//! Reads: a copy at the descriptor's position, validated against other
//! nodes' size changes where sizes move (single copy), and the readahead
//! windows fetched with it.

use super::*;

impl<E: Env> Vfs<E> {
    /// Read at the descriptor's position.
    pub fn read(&mut self, link: &mut Link<E>, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        let (ino, gen, pos) = {
            let f = self.file(fd)?;
            (f.ino, f.gen, f.pos)
        };
        if buf.is_empty() {
            return Ok(0);
        }
        {
            let page = fabric::PAGE_SIZE as u64;
            let end = pos
                .saturating_add(buf.len() as u64)
                .min(self.meta.size_of(ino));
            self.confirm_gen(link, ino, gen, pos / page..end.div_ceil(page))?;
        }
        let size = self.meta.size_of(ino);
        // The window asked for once per read; a single-copy read fetches
        // it inside its first copy, so the validation below covers it.
        let page = fabric::PAGE_SIZE as u64;
        let end = pos.saturating_add(buf.len() as u64).min(size);
        let ahead = if pos < end {
            self.readahead(fd, pos / page, end.div_ceil(page))
        } else {
            None
        };
        if !self.dp.sizes_move() {
            return self.read_at_size(link, fd, (ino, pos, size), ahead, buf);
        }
        self.read_validated(link, fd, (ino, gen, pos), ahead, buf)
    }

    /// A read where sizes move only at this node's own calls (the
    /// private-cache path): copy up to the size known.
    fn read_at_size(
        &mut self,
        link: &mut Link<E>,
        fd: Fd,
        (ino, pos, size): (u64, u64, u64),
        ahead: Option<(u64, Range<u64>)>,
        buf: &mut [u8],
    ) -> Result<usize, Errno> {
        if pos >= size {
            return Ok(0);
        }
        if let Some((ino, r)) = ahead {
            self.read_ahead(link, ino, r);
        }
        let want = (buf.len() as u64).min(size - pos) as usize;
        let n = self
            .dp
            .read(link, &mut self.meta, ino, pos, &mut buf[..want])?;
        self.file(fd)?.pos = pos + n as u64;
        Ok(n)
    }

    /// Single copy: another node may truncate or grow the file while we
    /// copy. A read that had to ask the directory for pages is
    /// validated after copying: if the version moved, the copy may mix
    /// sizes and data (zeros of an evicted page under a new size), so
    /// copy again at the new size. A read served from pages this node
    /// already held needs no check after copying (see
    /// `DataPath::page_requests`), nor does one during which the
    /// region's metadata epoch did not move since this version was
    /// confirmed (`Meta::validated_at`).
    fn read_validated(
        &mut self,
        link: &mut Link<E>,
        fd: Fd,
        (ino, gen, pos): (u64, u64, u64),
        mut ahead: Option<(u64, Range<u64>)>,
        buf: &mut [u8],
    ) -> Result<usize, Errno> {
        for _ in 0..MAX_READ_TRIES {
            self.confirm_latest(link, ino, gen)?;
            let Some(before) = self.meta.get(ino) else {
                return Err(Errno::Io);
            };
            let asked = self.dp.page_requests();
            if let Some((ino, r)) = ahead.take() {
                self.read_ahead(link, ino, r);
            }
            let n = if pos >= before.size {
                0
            } else {
                let want = (buf.len() as u64).min(before.size - pos) as usize;
                self.dp
                    .read(link, &mut self.meta, ino, pos, &mut buf[..want])?
            };
            if self.copy_whole(link, (ino, gen), before, asked)? {
                self.file(fd)?.pos = pos + n as u64;
                return Ok(n);
            }
        }
        Err(Errno::Io)
    }

    /// Strong: a read returns the latest completed write, and a truncate
    /// another node completed is one, though this node may still hold the
    /// pages it cut (their teardown reaches us later): if any file changed
    /// since this version of `ino` was confirmed, learn the size first (a
    /// new version drops our pages of the file).
    fn confirm_latest(&mut self, link: &mut Link<E>, ino: u64, gen: u64) -> Result<(), Errno> {
        let epoch = link.meta_epoch();
        if self.dp.mode() == Mode::Strong
            && (epoch.is_none() || epoch != self.meta.validated_at(ino))
        {
            let a = getattr(link, &mut *self.dp, ino)?;
            self.learn(&a);
            if let Some(e) = epoch {
                self.meta.set_validated(ino, e);
            }
            self.same_gen(ino, gen)?;
        }
        Ok(())
    }

    /// After a copy of `ino` begun at version `before` (with `asked` page
    /// requests so far): is it whole, or must it be copied again?
    fn copy_whole(
        &mut self,
        link: &mut Link<E>,
        (ino, gen): (u64, u64),
        before: FileMeta,
        asked: u64,
    ) -> Result<bool, Errno> {
        // No page asked for, or no file changed anywhere since the
        // directory last confirmed this version: the copy is whole.
        let epoch = link.meta_epoch();
        if self.dp.page_requests() == asked
            || (epoch.is_some() && epoch == self.meta.validated_at(ino))
        {
            return Ok(true);
        }
        let a = getattr(link, &mut *self.dp, ino)?;
        self.learn(&a);
        // Copied from the pages of a file that got this number since:
        // none of it is this descriptor's.
        self.same_gen(ino, gen)?;
        // The size this node sees (learned: the directory's, or its
        // own local extension past it, relaxed writes not written
        // back yet).
        if a.version == before.version && self.meta.size_of(ino) == before.size {
            if let Some(e) = epoch {
                self.meta.set_validated(ino, e);
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Readahead windows of at most `max_pages` pages (0: off); open
    /// files start over at their next read.
    pub fn set_readahead(&mut self, max_pages: u32) {
        self.ra_max = max_pages;
        for f in self.files.iter_mut().flatten() {
            f.ra = None;
        }
    }

    /// Readahead counters.
    pub fn ra_stats(&self) -> RaStats {
        self.ra_stats
    }

    /// A read of pages `[first, end)` through `fd` is about to run: the
    /// pages to fetch together with it (its own included: the window
    /// starts at its first miss), as (inode, range); `None` if the read
    /// needs nothing beyond its own pages (readahead off, all hits off a
    /// marker, a random read). Every read is reported once it is known;
    /// reporting one again when it runs (its pages held by then) is
    /// harmless.
    pub fn readahead(&mut self, fd: Fd, first: u64, end: u64) -> Option<(u64, Range<u64>)> {
        if self.ra_max == 0 {
            return None;
        }
        let max = self.ra_max;
        let f = self.files.get_mut(fd.0 as usize)?.as_mut()?;
        let ino = f.ino;
        let eof_pages = self.meta.size_of(ino).div_ceil(fabric::PAGE_SIZE as u64);
        let st = f.ra.get_or_insert_with(|| Box::new(ra::RaFile::new(max)));
        let r = st.on_read(&*self.dp, &mut self.ra_stats, ino, first, end, eof_pages)?;
        Some((ino, r))
    }

    /// Fetch what [`Vfs::readahead`] asked for a read: the pages of `r`
    /// not held here, in one prefetch (the data path batches them). A
    /// failure is only logged: the read's own pages are fetched again by
    /// the read, which reports its own error.
    fn read_ahead(&mut self, link: &mut Link<E>, ino: u64, r: Range<u64>) {
        let dp = &*self.dp;
        let pages: Vec<(u64, u64)> = r
            .filter(|&idx| !dp.holds(ino, idx))
            .map(|idx| (ino, idx))
            .collect();
        if pages.is_empty() {
            return;
        }
        if let Err(e) = self.dp.prefetch(link, &mut self.meta, &pages) {
            log::debug!("readahead of {} pages of {ino}: {e}", pages.len());
        }
    }

    /// Windows of open files of `ino` stop at its new end.
    pub(super) fn ra_truncate(&mut self, ino: u64, size: u64) {
        let eof_pages = size.div_ceil(fabric::PAGE_SIZE as u64);
        for f in self.files.iter_mut().flatten().filter(|f| f.ino == ino) {
            if let Some(st) = f.ra.as_mut() {
                st.truncate(eof_pages);
            }
        }
    }
}
