//! The mock's POSIX-like file calls: opens, reads and writes on the
//! in-memory tree, with fault injection.

use alloc::string::ToString;
use alloc::vec::Vec;

use super::*;

impl Files for MockOs {
    fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        self.check("open")?;
        self.validate(path)?;
        if self.fds.len() >= self.max_fds {
            return Err(Errno::TooManyFiles);
        }
        match self.nodes.get_mut(path) {
            Some(n) if n.kind == FileKind::Dir => return Err(Errno::IsDir),
            Some(_) if flags.create && flags.exclusive => return Err(Errno::Exists),
            Some(n) => {
                if flags.truncate && !n.data.is_empty() {
                    n.data.clear();
                    n.version += 1;
                }
            }
            None if flags.create => {
                self.check_parent(path)?;
                let ino = self.alloc_ino();
                self.nodes.insert(
                    path.to_string(),
                    Node {
                        ino,
                        kind: FileKind::File,
                        data: Vec::new(),
                        version: 1,
                    },
                );
                self.touch_parent(path);
            }
            None => return Err(self.missing(path)),
        }
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(
            fd,
            Open {
                path: path.to_string(),
                pos: 0,
                append: flags.append,
            },
        );
        Ok(Fd(fd))
    }

    fn read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        self.check("read")?;
        self.reads += 1;
        if self.miss_per_read.is_some() {
            self.now_ns += MOCK_READ_NS;
        }
        let max_io = self.max_io;
        let (o, n) = self.open_file(fd)?;
        let pos = usize::try_from(o.pos).unwrap_or(usize::MAX);
        let avail = n.data.len().saturating_sub(pos);
        let len = buf.len().min(avail).min(max_io);
        if len > 0 {
            buf[..len].copy_from_slice(&n.data[pos..pos + len]);
        }
        if let Some(o) = self.fds.get_mut(&fd.0) {
            o.pos += len as u64;
        }
        Ok(len)
    }

    fn write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        self.write_sizes.push(data.len());
        self.check("write")?;
        let free = self.capacity.saturating_sub(self.used());
        let max_io = self.max_io;
        let (o, n) = self.open_file(fd)?;
        let pos = if o.append {
            n.data.len()
        } else {
            usize::try_from(o.pos).map_err(|_| Errno::Invalid)?
        };
        // Overwrite in place freely; grow the file only into `free`.
        let limit = n
            .data
            .len()
            .saturating_add(usize::try_from(free).unwrap_or(usize::MAX));
        let len = data.len().min(max_io).min(limit.saturating_sub(pos));
        if len == 0 && !data.is_empty() {
            return Err(Errno::NoSpace);
        }
        if n.data.len() < pos + len {
            n.data.resize(pos + len, 0);
        }
        n.data[pos..pos + len].copy_from_slice(&data[..len]);
        n.version += 1;
        if let Some(o) = self.fds.get_mut(&fd.0) {
            o.pos = (pos + len) as u64;
        }
        Ok(len)
    }

    fn truncate(&mut self, fd: Fd, size: u64) -> Result<(), Errno> {
        self.check("truncate")?;
        let free = self.capacity.saturating_sub(self.used());
        let (_, n) = self.open_file(fd)?;
        let cur = n.data.len() as u64;
        if size > cur && size - cur > free {
            return Err(Errno::NoSpace);
        }
        let size = usize::try_from(size).map_err(|_| Errno::NoSpace)?;
        n.data.resize(size, 0);
        n.version += 1;
        Ok(())
    }

    fn fsync(&mut self, fd: Fd) -> Result<(), Errno> {
        self.check("fsync")?;
        self.open_file(fd)?;
        self.syncs += 1;
        Ok(())
    }

    fn close(&mut self, fd: Fd) -> Result<(), Errno> {
        // The descriptor is released even when an error is injected, as a
        // real close would.
        let known = self.fds.remove(&fd.0).is_some();
        self.check("close")?;
        if known {
            Ok(())
        } else {
            Err(Errno::BadFd)
        }
    }

    fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        if !self.can_seek {
            return Err(Errno::NotSupported);
        }
        self.check("seek")?;
        let o = self.fds.get_mut(&fd.0).ok_or(Errno::BadFd)?;
        o.pos = pos;
        Ok(())
    }

    fn stat(&mut self, path: &str) -> Result<Attr, Errno> {
        self.check("stat")?;
        self.validate(path)?;
        match self.nodes.get(path) {
            Some(n) => Ok(self.attr(n, path)),
            None => Err(self.missing(path)),
        }
    }

    fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>, Errno> {
        self.check("readdir")?;
        self.validate(path)?;
        match self.nodes.get(path) {
            None => Err(self.missing(path)),
            Some(n) if n.kind == FileKind::File => Err(Errno::NotDir),
            Some(_) => Ok(self
                .children(path)
                .into_iter()
                .map(|(k, n)| DirEntry {
                    name: k.rsplit('/').next().unwrap_or("").to_string(),
                    attr: self.attr(n, k),
                })
                .collect()),
        }
    }

    fn mkdir(&mut self, path: &str) -> Result<(), Errno> {
        self.check("mkdir")?;
        self.validate(path)?;
        if self.nodes.contains_key(path) {
            return Err(Errno::Exists);
        }
        self.check_parent(path)?;
        let ino = self.alloc_ino();
        self.nodes.insert(
            path.to_string(),
            Node {
                ino,
                kind: FileKind::Dir,
                data: Vec::new(),
                version: 1,
            },
        );
        self.touch_parent(path);
        Ok(())
    }

    fn rmdir(&mut self, path: &str) -> Result<(), Errno> {
        self.check("rmdir")?;
        self.validate(path)?;
        if path == "/" {
            return Err(Errno::Invalid);
        }
        match self.nodes.get(path) {
            None => return Err(self.missing(path)),
            Some(n) if n.kind == FileKind::File => return Err(Errno::NotDir),
            Some(_) => {}
        }
        if !self.children(path).is_empty() {
            return Err(Errno::NotEmpty);
        }
        self.nodes.remove(path);
        self.touch_parent(path);
        Ok(())
    }

    fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        self.check("unlink")?;
        self.validate(path)?;
        match self.nodes.get(path) {
            None => return Err(self.missing(path)),
            Some(n) if n.kind == FileKind::Dir => return Err(Errno::IsDir),
            Some(_) => {}
        }
        self.nodes.remove(path);
        self.touch_parent(path);
        Ok(())
    }

    fn sync(&mut self) -> Result<(), Errno> {
        self.check("sync")?;
        self.syncs += 1;
        Ok(())
    }
}
