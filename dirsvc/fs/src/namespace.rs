//! Paths and directories: resolving a path, attributes, and the metadata
//! operations (lookup, create, mkdir, unlink, rmdir, readdir).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use super::disk::Inode;
use super::mount::DirIndex;
use super::{BlockDevice, Fs, ROOT_INO, SEQ_BATCH};
use fabric::proto::{Attr, DirEntry, Errno, FileKind, MAX_NAME, MAX_PATH};

/// Split an absolute path into checked components.
fn parse_path(path: &str) -> Result<Vec<&str>, Errno> {
    if path.len() > MAX_PATH {
        return Err(Errno::NameTooLong);
    }
    if !path.starts_with('/') {
        return Err(Errno::Invalid);
    }
    let mut out = Vec::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        if c == "." || c == ".." || c.contains('\0') {
            return Err(Errno::Invalid);
        }
        if c.len() > MAX_NAME {
            return Err(Errno::NameTooLong);
        }
        out.push(c);
    }
    Ok(out)
}

/// The version after one change: the low half counts changes (wrapping
/// within it), the high half is the inode's generation and never moves
/// (see `fabric::proto::Attr::gen`).
pub(crate) fn next_version(v: u64) -> u64 {
    (v & !0xFFFF_FFFF) | u64::from((v as u32).wrapping_add(1))
}

impl<D: BlockDevice> Fs<D> {
    pub(crate) fn attr_of(&self, ino: u64, n: &Inode) -> Attr {
        let size = match n.kind {
            FileKind::File => n.size,
            FileKind::Dir => self.dirs.get(&ino).map_or(0, |d| d.by_ino.len() as u64),
        };
        Attr {
            ino,
            kind: n.kind,
            size,
            version: n.version,
        }
    }

    pub(crate) fn attr(&self, ino: u64) -> Result<Attr, Errno> {
        let n = self.node(ino)?;
        Ok(self.attr_of(ino, n))
    }

    fn child(&self, dir: u64, name: &str) -> Result<u64, Errno> {
        let n = self.node(dir)?;
        if n.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        self.dirs
            .get(&dir)
            .and_then(|d| d.by_name.get(name).copied())
            .ok_or(Errno::NotFound)
    }

    /// Resolve all but the last component: `(parent, Some(last))`, or
    /// `(ROOT_INO, None)` for the root itself.
    fn resolve_parent<'p>(&self, path: &'p str) -> Result<(u64, Option<&'p str>), Errno> {
        let comps = parse_path(path)?;
        let Some((last, dirs)) = comps.split_last() else {
            return Ok((ROOT_INO, None));
        };
        let mut cur = ROOT_INO;
        for c in dirs {
            cur = self.child(cur, c)?;
        }
        if self.node(cur)?.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        Ok((cur, Some(last)))
    }

    fn resolve(&self, path: &str) -> Result<u64, Errno> {
        match self.resolve_parent(path)? {
            (_, None) => Ok(ROOT_INO),
            (dir, Some(name)) => self.child(dir, name),
        }
    }

    // ----- metadata operations -------------------------------------------

    /// Attributes of the inode at `path`.
    pub fn lookup(&mut self, path: &str) -> Result<Attr, Errno> {
        let ino = self.resolve(path)?;
        self.attr(ino)
    }

    /// Attributes of inode `ino` (`NotFound` if the slot is free).
    pub fn getattr(&mut self, ino: u64) -> Result<Attr, Errno> {
        self.attr(ino)
    }

    /// Create a regular file. If the name exists: `Exists` when
    /// `exclusive`, otherwise its attributes (or `IsDir` for a directory).
    pub fn create(&mut self, path: &str, exclusive: bool) -> Result<Attr, Errno> {
        self.make(path, FileKind::File, exclusive)
    }

    /// Create a directory (`Exists` if the name is taken).
    pub fn mkdir(&mut self, path: &str) -> Result<Attr, Errno> {
        self.make(path, FileKind::Dir, true)
    }

    fn make(&mut self, path: &str, kind: FileKind, exclusive: bool) -> Result<Attr, Errno> {
        let (parent, name) = self.resolve_parent(path)?;
        let existing = match name {
            None => Some(ROOT_INO),
            Some(name) => match self.child(parent, name) {
                Ok(ino) => Some(ino),
                Err(Errno::NotFound) => None,
                Err(e) => return Err(e),
            },
        };
        if let Some(ino) = existing {
            let a = self.attr(ino)?;
            return match (exclusive, a.kind) {
                (true, _) => Err(Errno::Exists),
                (false, FileKind::Dir) => Err(Errno::IsDir),
                (false, FileKind::File) => Ok(a),
            };
        }
        let name = name.unwrap_or_default();
        let idx = self.free_slot().ok_or(Errno::NoSpace)?;
        let seq = self.max_seq.checked_add(1).ok_or(Errno::NoSpace)?;
        if seq >= self.sb.seq_floor {
            self.raise_seq_floor(seq)?;
        }
        let ino = idx as u64 + 1;
        let child = Inode {
            kind,
            parent,
            seq,
            size: 0,
            // Versions are unique across inode reuse: the creation sequence
            // number sits in the high half, so (ino, version) never repeats
            // after a delete and re-create and node caches cannot confuse
            // the new file with the old one.
            version: (seq << 32) | 1,
            name: String::from(name),
            extents: Vec::new(),
        };
        let mut p = self.node(parent)?.clone();
        p.version = next_version(p.version);
        self.commit(vec![
            (ino, Some(Box::new(child))),
            (parent, Some(Box::new(p))),
        ])?;
        self.max_seq = seq;
        self.used += 1;
        if kind == FileKind::Dir {
            self.dirs.insert(ino, DirIndex::default());
        }
        let d = self.dirs.entry(parent).or_default();
        d.by_name.insert(String::from(name), ino);
        d.by_ino.insert(ino);
        self.attr(ino)
    }

    /// Would the next creation first raise the on-disk sequence floor?
    /// That write is flushed before the creation's own writes, so a caller
    /// staging writes ([`Fs::begin_deferred`]) must create synchronously
    /// then (once in [`SEQ_BATCH`] creations): a staged superblock could
    /// land after the record that relies on it.
    pub fn next_create_raises_floor(&self) -> bool {
        self.max_seq.saturating_add(1) >= self.sb.seq_floor
    }

    /// Make the on-disk sequence floor exceed `seq` before any record uses
    /// it: write the superblock with the floor `SEQ_BATCH` above `seq` and
    /// flush it. The cached superblock changes only once that is durable;
    /// after a failure the next creation tries again (a floor that reached
    /// the disk anyway is only higher, which is harmless).
    fn raise_seq_floor(&mut self, seq: u64) -> Result<(), Errno> {
        let floor = seq.saturating_add(SEQ_BATCH);
        if floor <= seq {
            return Err(Errno::NoSpace);
        }
        let mut sb = self.sb;
        sb.seq_floor = floor;
        self.write_blk(0, &sb.encode())?;
        self.sync()?;
        self.sb = sb;
        Ok(())
    }

    /// Remove a regular file (`IsDir` for a directory).
    pub fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        let ino = self.resolve(path)?;
        if self.node(ino)?.kind == FileKind::Dir {
            return Err(Errno::IsDir);
        }
        self.remove(ino)
    }

    /// Remove an empty directory (`NotDir` for a file, `NotEmpty`, and
    /// `Invalid` for the root).
    pub fn rmdir(&mut self, path: &str) -> Result<(), Errno> {
        let ino = self.resolve(path)?;
        if ino == ROOT_INO {
            return Err(Errno::Invalid);
        }
        if self.node(ino)?.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        if self.dirs.get(&ino).is_some_and(|d| !d.by_ino.is_empty()) {
            return Err(Errno::NotEmpty);
        }
        self.remove(ino)
    }

    fn remove(&mut self, ino: u64) -> Result<(), Errno> {
        let n = self.node(ino)?.clone();
        let mut p = self.node(n.parent)?.clone();
        p.version = next_version(p.version);
        let parent = n.parent;
        self.commit(vec![(ino, None), (parent, Some(Box::new(p)))])?;
        self.release(ino);
        self.held.remove(&ino);
        for e in &n.extents {
            self.free.set(e.start, u64::from(e.len), false);
        }
        self.used -= 1;
        self.dirs.remove(&ino);
        if let Some(d) = self.dirs.get_mut(&parent) {
            d.by_name.remove(n.name.as_str());
            d.by_ino.remove(&ino);
        }
        Ok(())
    }

    /// List directory `ino` from `cookie` (0: the start), at most `max`
    /// entries, in ascending inode order. Returns the entries and the cookie
    /// to continue from, 0 at the end. Entries added or removed between
    /// calls never make others repeat or vanish.
    pub fn readdir(
        &mut self,
        ino: u64,
        cookie: u64,
        max: usize,
    ) -> Result<(Vec<DirEntry>, u64), Errno> {
        if self.node(ino)?.kind != FileKind::Dir {
            return Err(Errno::NotDir);
        }
        if max == 0 {
            return Err(Errno::Invalid);
        }
        let Some(d) = self.dirs.get(&ino) else {
            return Ok((Vec::new(), 0));
        };
        let mut out = Vec::new();
        let mut next = 0;
        for &child in d.by_ino.range(cookie.max(1)..) {
            if out.len() == max {
                next = child;
                break;
            }
            let n = self.node(child)?;
            out.push(DirEntry {
                name: n.name.clone(),
                attr: self.attr_of(child, n),
            });
        }
        Ok((out, next))
    }
}
