//! Directory listings: one call per chunk of entries, sorted by name.

use super::*;

impl<E: Env> Vfs<E> {
    /// List a directory, sorted by name.
    pub fn readdir(&mut self, link: &mut Link<E>, path: &str) -> Result<Vec<DirEntry>, Errno> {
        let a = self.stat(link, path)?;
        let ino = Self::readdir_ino(&a)?;
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let r = self.call(link, &Self::readdir_request(ino, cookie))?;
            match Self::readdir_take(link, r, &mut out)? {
                Some(next) => cookie = next,
                None => break,
            }
        }
        Ok(Self::readdir_done(out))
    }

    /// The directory a readdir lists, from its lookup's attributes.
    pub fn readdir_ino(a: &Attr) -> Result<u64, Errno> {
        if a.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        Ok(a.ino)
    }

    /// The request for the entries of directory `ino` from `cookie` on
    /// (0: the first); they come in bulk slot 3, which one readdir at a
    /// time uses.
    pub fn readdir_request(ino: u64, cookie: u64) -> Request {
        Request::Readdir {
            slot: 3,
            ino,
            cookie,
        }
    }

    /// Take the entries answer `r` put in slot 3 into `out`; the cookie
    /// to ask from next, or `None` when the listing is complete.
    pub fn readdir_take(
        link: &mut Link<E>,
        r: Response,
        out: &mut Vec<DirEntry>,
    ) -> Result<Option<u64>, Errno> {
        let Response::Entries { count, next_cookie } = r else {
            return Err(Errno::Io);
        };
        let cap = link.bulk_cap(3)?;
        let count = (count as usize).min(cap / DIRENT_SIZE);
        let mut recs = alloc::vec![0u8; count * DIRENT_SIZE];
        link.bulk_read(3, &mut recs)?;
        for rec in recs.chunks_exact(DIRENT_SIZE) {
            let rec: &[u8; DIRENT_SIZE] = rec.try_into().map_err(|_| Errno::Io)?;
            out.push(DirEntry::decode(rec).ok_or(Errno::Io)?);
        }
        if next_cookie == 0 || count == 0 || out.len() > 1_000_000 {
            return Ok(None);
        }
        Ok(Some(next_cookie))
    }

    /// A complete listing, sorted by name.
    pub fn readdir_done(mut out: Vec<DirEntry>) -> Vec<DirEntry> {
        out.sort_by(|x, y| x.name.cmp(&y.name));
        out
    }
}
