//! The node's tiny VFS: a descriptor table, metadata calls to the
//! directory's file server, and the sizes this node knows. File data goes
//! through the [`DataPath`] chosen once at join from the mode: the
//! single-copy path ([`crate::singlecopy::SingleCopy`], `strong` and
//! `relaxed`) or the private-cache path ([`crate::private::Private`],
//! `private` and `net`, which differ only in the file-server transport).
//! Adding a mode means adding one [`DataPath`].

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::Range;

use fabric::config::Mode;
use fabric::proto::{
    gen_of_version, Attr, DirEntry, Errno, FileKind, Op, Request, Response, APPEND_BUDGET_NS,
    DIRENT_SIZE,
};
use osapi::io::{Fd, OpenFlags};

use crate::env::Env;
use crate::link::{Link, Session};

/// A strong-mode append goes in chunks of this many bytes, its append
/// lock renewed between them once half its budget is spent.
const APPEND_CHUNK: usize = 64 << 10;

mod append;
mod datapath;
mod dir;
mod meta;
mod ra;
mod read;
mod writeback;

pub use datapath::{DataPath, WbStart, WbWhy};
pub use meta::{FileMeta, Meta};
pub use ra::RaStats;

/// Most copies of one read while other nodes keep changing the file.
pub const MAX_READ_TRIES: u32 = 16;

/// Most open descriptors.
pub const MAX_FILES: usize = 64;

/// The attributes in an answer.
pub fn attr_of(r: Response) -> Result<Attr, Errno> {
    match r {
        Response::Attr(a) => Ok(a),
        Response::Data { attr, .. } => Ok(attr),
        _ => Err(Errno::Io),
    }
}

/// The directory's attributes of `ino`.
pub fn getattr<E: Env>(
    link: &mut Link<E>,
    svc: &mut dyn Session<E>,
    ino: u64,
) -> Result<Attr, Errno> {
    attr_of(link.fs_call(&Request::Getattr { ino }, svc)?)
}

/// What an open does after its lookup ([`Vfs::open_looked_up`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenNext {
    /// Give it a descriptor ([`Vfs::install`]).
    Ready(Attr),
    /// Truncate inode `.0` to 0 first ([`Vfs::open_truncated`]).
    Truncate(u64),
}

struct OpenFile {
    ino: u64,
    /// The inode's generation at the open ([`Attr::gen`]): a later file
    /// that got the same inode number has another, and this descriptor
    /// never reaches it.
    gen: u64,
    pos: u64,
    append: bool,
    /// Readahead state, made at the first read (none with readahead off).
    ra: Option<Box<ra::RaFile>>,
}

/// The VFS of one node.
pub struct Vfs<E: Env> {
    files: Vec<Option<OpenFile>>,
    meta: Meta,
    dp: Box<dyn DataPath<E>>,
    /// Largest readahead window, pages (0: off).
    ra_max: u32,
    ra_stats: RaStats,
}

impl<E: Env> Vfs<E> {
    /// An empty VFS over `dp`.
    pub fn new(dp: Box<dyn DataPath<E>>) -> Vfs<E> {
        let mut files = Vec::new();
        files.resize_with(MAX_FILES, || None);
        let mut meta = Meta::default();
        meta.watch_losses(dp.losses());
        Vfs {
            files,
            meta,
            dp,
            ra_max: 0,
            ra_stats: RaStats::default(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.dp.mode()
    }

    /// The data path.
    pub fn data_path(&mut self) -> &mut dyn DataPath<E> {
        &mut *self.dp
    }

    /// The data path (shared).
    pub fn data_path_ref(&self) -> &dyn DataPath<E> {
        &*self.dp
    }

    /// The data path's session (for waits outside file operations).
    pub fn session(&mut self) -> &mut dyn Session<E> {
        &mut *self.dp
    }

    /// The data path and the sizes together.
    pub fn parts(&mut self) -> (&mut dyn DataPath<E>, &mut Meta) {
        (&mut *self.dp, &mut self.meta)
    }

    fn learn(&mut self, a: &Attr) {
        self.newer_gen(a);
        if self.meta.learn(a) {
            self.dp.forget_pages(a.ino);
        }
    }

    /// If `a` is of a newer file than the one this node knew under its
    /// number, drop what it buffered of the older and its local size:
    /// write-backs go with the generation this node knows, so data of a
    /// removed file would otherwise go out under the newer one's.
    fn newer_gen(&mut self, a: &Attr) {
        let known = self.meta.gen(a.ino);
        // 0: no generation (not checked).
        if known != 0 && a.gen() != 0 && known != a.gen() {
            log::info!(
                "inode {}: a newer file, buffered data of the older dropped",
                a.ino
            );
            self.dp.stale_gen(a.ino);
            self.meta.remove(a.ino);
        }
    }

    fn call(&mut self, link: &mut Link<E>, req: &Request) -> Result<Response, Errno> {
        link.fs_call(req, &mut *self.dp)
    }

    /// Refresh the size of `ino` from the directory.
    /// Learn the directory's current attributes of `ino` (a batch that
    /// saw the metadata epoch move, see `Node::prepare_batch`).
    pub fn revalidate(&mut self, link: &mut Link<E>, ino: u64) -> Result<(), Errno> {
        self.refresh(link, ino).map(|_| ())
    }

    /// Learn the directory's attributes of `ino`; the size this node
    /// sees: the directory's, or this node's local extension past it
    /// (writes not written back yet), so an append lands after them.
    fn refresh(&mut self, link: &mut Link<E>, ino: u64) -> Result<u64, Errno> {
        let a = getattr(link, &mut *self.dp, ino)?;
        self.learn(&a);
        Ok(self.meta.size_of(ino))
    }

    /// The request for path operation `op` on `path`, the path written
    /// at byte `at` of bulk slot 0 (synchronous calls use 0; each of a
    /// node's calls in flight together has its own sub-slot).
    pub fn path_request(
        link: &mut Link<E>,
        op: Op,
        path: &str,
        exclusive: bool,
        at: usize,
    ) -> Result<Request, Errno> {
        let cap = link.bulk_cap(0)?;
        if path.len() > fabric::proto::MAX_PATH || at.saturating_add(path.len()) > cap {
            return Err(Errno::NameTooLong);
        }
        link.bulk_write(0, at, path.as_bytes())?;
        Ok(Request::Path {
            op,
            slot: 0,
            at: u32::try_from(at).map_err(|_| Errno::Invalid)?,
            len: path.len() as u32,
            exclusive,
        })
    }

    fn path_op(
        &mut self,
        link: &mut Link<E>,
        op: Op,
        path: &str,
        exclusive: bool,
    ) -> Result<Response, Errno> {
        let req = Self::path_request(link, op, path, exclusive, 0)?;
        self.call(link, &req)
    }

    /// Attributes of a path.
    /// The size is this node's local one if its buffered writes extended
    /// the file.
    pub fn stat(&mut self, link: &mut Link<E>, path: &str) -> Result<Attr, Errno> {
        let a = attr_of(self.path_op(link, Op::Lookup, path, false)?)?;
        Ok(self.stat_attr(a))
    }

    /// The attributes a lookup answered, as `stat` gives them.
    pub fn stat_attr(&self, mut a: Attr) -> Attr {
        if let Some(local) = self.meta.local_size(a.ino) {
            a.size = a.size.max(local);
        }
        a
    }

    /// Is a descriptor free?
    pub fn has_free_fd(&self) -> bool {
        self.free_fds() > 0
    }

    /// Descriptors free.
    pub fn free_fds(&self) -> usize {
        self.files.iter().filter(|f| f.is_none()).count()
    }

    /// Open a file.
    pub fn open(&mut self, link: &mut Link<E>, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        if !self.has_free_fd() {
            return Err(Errno::TooManyFiles);
        }
        let op = if flags.create { Op::Create } else { Op::Lookup };
        // The lookup confirms the version it answers (single copy: a
        // write then needs no call to confirm the size, see
        // `Meta::validated_at`).
        let epoch = link.meta_epoch();
        let a = attr_of(self.path_op(link, op, path, flags.exclusive)?)?;
        let a = match self.open_looked_up(a, flags)? {
            OpenNext::Ready(a) => a,
            OpenNext::Truncate(ino) => {
                let req = Request::Setattr {
                    gen: a.gen(),
                    ino,
                    size: 0,
                    expect: None,
                    locked: false,
                };
                let a = attr_of(self.call(link, &req)?)?;
                self.open_truncated(&link.env, &a);
                a
            }
        };
        let fd = self.install(&a, flags)?;
        if let Some(e) = epoch {
            self.meta.set_validated(a.ino, e);
        }
        Ok(fd)
    }

    /// An open's lookup (or create) answered `a`: a directory is refused;
    /// a file to truncate that holds data (buffered writes past the
    /// directory's end count too) needs a `Setattr` to size 0 first.
    pub fn open_looked_up(&self, a: Attr, flags: OpenFlags) -> Result<OpenNext, Errno> {
        if a.kind == FileKind::Dir {
            return Err(Errno::IsDir);
        }
        if flags.truncate && (a.size != 0 || self.meta.local_size(a.ino).is_some()) {
            return Ok(OpenNext::Truncate(a.ino));
        }
        Ok(OpenNext::Ready(a))
    }

    /// An open's `Setattr` to size 0 answered `a`: drop the old pages.
    pub fn open_truncated(&mut self, env: &E, a: &Attr) {
        self.dp.evict(env, a.ino, 0);
        self.meta.clear_local_size(a.ino);
    }

    /// Give the opened file `a` a descriptor.
    pub fn install(&mut self, a: &Attr, flags: OpenFlags) -> Result<Fd, Errno> {
        let slot = self
            .files
            .iter()
            .position(Option::is_none)
            .ok_or(Errno::TooManyFiles)?;
        self.learn(a);
        self.dp.opened(a.ino);
        self.files[slot] = Some(OpenFile {
            ino: a.ino,
            gen: a.gen(),
            pos: 0,
            append: flags.append,
            ra: None,
        });
        Ok(Fd(slot as u32))
    }

    /// Is `gen` still the generation this node knows of `ino`? A
    /// descriptor of a removed file whose inode number now names another
    /// file is stale ([`Errno::StaleHandle`]).
    fn same_gen(&self, ino: u64, gen: u64) -> Result<(), Errno> {
        match self.meta.get(ino) {
            Some(m) if gen_of_version(m.version) != gen => Err(Errno::StaleHandle),
            _ => Ok(()),
        }
    }

    /// Before a read or write of pages `pages` of `ino` through a
    /// descriptor of generation `gen`: single copy asks the directory for
    /// pages this node does not hold, and those would be the pages of
    /// whatever file has the number now. So unless every page is held
    /// here, or no file changed anywhere since this node confirmed its
    /// version of `ino` (the region's metadata epoch did not move), learn
    /// the directory's attributes first: a new generation drops this
    /// node's pages of the number and fails the call, a removed inode
    /// fails it too. Private caches (`private`, `net`) fetch through
    /// `Data` requests, which carry no generation: only what this node
    /// already knows is checked.
    fn confirm_gen(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        gen: u64,
        pages: Range<u64>,
    ) -> Result<(), Errno> {
        self.same_gen(ino, gen)?;
        if !self.dp.sizes_move() {
            return Ok(());
        }
        let epoch = link.meta_epoch();
        if epoch.is_some() && epoch == self.meta.validated_at(ino) {
            return Ok(());
        }
        let dp = &*self.dp;
        if pages.clone().all(|idx| dp.holds(ino, idx)) && !pages.is_empty() {
            return Ok(());
        }
        let a = match getattr(link, &mut *self.dp, ino) {
            Err(Errno::NotFound) => return Err(Errno::StaleHandle),
            r => r?,
        };
        self.learn(&a);
        if let Some(e) = epoch {
            self.meta.set_validated(ino, e);
        }
        self.same_gen(ino, gen)
    }

    fn file(&mut self, fd: Fd) -> Result<&mut OpenFile, Errno> {
        self.files
            .get_mut(fd.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(Errno::BadFd)
    }

    /// Close a descriptor (relaxed mode writes back our private copies:
    /// close-to-open consistency).
    pub fn close(&mut self, link: &mut Link<E>, fd: Fd) -> Result<(), Errno> {
        let ino = self.drop_fd(fd).ok_or(Errno::BadFd)?;
        self.dp.close(link, &mut self.meta, ino)
    }

    /// Free descriptor `fd` (its readahead's unread pages are accounted);
    /// its inode, if it was open.
    fn drop_fd(&mut self, fd: Fd) -> Option<u64> {
        let f = self.files.get_mut(fd.0 as usize)?.take()?;
        if let Some(st) = f.ra.as_ref() {
            st.closed(&*self.dp, &mut self.ra_stats, f.ino);
        }
        Some(f.ino)
    }

    /// Write at the descriptor's position (end of file with append).
    pub fn write(&mut self, link: &mut Link<E>, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        let (ino, gen, append, mut pos) = {
            let f = self.file(fd)?;
            (f.ino, f.gen, f.append, f.pos)
        };
        if data.is_empty() {
            self.same_gen(ino, gen)?;
        } else {
            // An append's pages are not known yet: confirm at all.
            let page = fabric::PAGE_SIZE as u64;
            let pages = if append {
                0..0
            } else {
                pos / page..pos.saturating_add(data.len() as u64).div_ceil(page)
            };
            self.confirm_gen(link, ino, gen, pages)?;
        }
        if append && self.dp.mode() == Mode::Strong {
            return self.append_locked(link, fd, ino, data);
        }
        if append {
            // Every append learns the directory's end of file (as an NFS
            // client's O_APPEND write does), in close-to-open modes too:
            // another node's append closed since our open is there.
            pos = self.refresh(link, ino)?;
        }
        let n = self.dp.write(link, &mut self.meta, ino, pos, data)?;
        self.file(fd)?.pos = pos + n as u64;
        Ok(n)
    }

    /// Set the size of an open file.
    pub fn truncate(&mut self, link: &mut Link<E>, fd: Fd, size: u64) -> Result<(), Errno> {
        let (ino, gen) = self.truncate_prepare(link, fd, size)?;
        let old = if self.dp.truncate_needs_old() {
            let a = getattr(link, &mut *self.dp, ino)?;
            self.meta.learn(&a);
            Some(a.size)
        } else {
            None
        };
        let req = Request::Setattr {
            gen,
            ino,
            size,
            expect: None,
            locked: false,
        };
        // A growth over pages another node's shrink is still tearing down
        // is refused until they are gone (`Busy`): wait, servicing our
        // notices (this node may hold some of them).
        let deadline = link.deadline();
        let a = loop {
            match self.call(link, &req) {
                Err(Errno::Busy) if link.env.now_ns() < deadline => {
                    // Our own tasks' READs of those pages hold their acks
                    // until their answers are applied.
                    self.dp.task_reads_progress(link, &mut self.meta);
                    link.service(&mut *self.dp);
                    link.env.wait_step(false);
                }
                r => break attr_of(r?)?,
            }
        };
        self.truncated(&link.env, ino, size, old, &a);
        Ok(())
    }

    /// A truncate's first half: the local work before the directory is
    /// asked; the file's inode and the generation its `Setattr` carries.
    pub fn truncate_prepare(
        &mut self,
        link: &mut Link<E>,
        fd: Fd,
        size: u64,
    ) -> Result<(u64, u64), Errno> {
        let (ino, gen) = {
            let f = self.file(fd)?;
            (f.ino, f.gen)
        };
        // A size set on a file that got this number since would cut it.
        self.confirm_gen(link, ino, gen, 0..0)?;
        self.dp.truncate_prepare(link, &mut self.meta, ino, size)?;
        Ok((ino, gen))
    }

    /// Learn `a` (a truncate's size before, asked in flight).
    pub fn learn_meta(&mut self, a: &Attr) {
        self.newer_gen(a);
        self.meta.learn(a);
    }

    /// Does a truncate ask the size before (see [`DataPath::truncate_needs_old`])?
    pub fn truncate_needs_old(&self) -> bool {
        self.dp.truncate_needs_old()
    }

    /// A truncate's last half: the directory set `ino`'s size to `size`
    /// (`a`, its new attributes; `old`, the size before if asked).
    pub fn truncated(&mut self, env: &E, ino: u64, size: u64, old: Option<u64>, a: &Attr) {
        self.dp.truncate_done(env, &mut self.meta, ino, size, old);
        self.dp.forget_pages(ino);
        self.learn(a);
        self.ra_truncate(ino, size);
    }

    /// Flush an open file: its dirty data, then the directory's flush.
    pub fn fsync(&mut self, link: &mut Link<E>, fd: Fd) -> Result<(), Errno> {
        let ino = self.fsync_prepare(link, fd)?;
        self.call(link, &Request::Fsync { ino }).map(|_| ())
    }

    /// Flush everything.
    pub fn sync(&mut self, link: &mut Link<E>) -> Result<(), Errno> {
        self.dp.write_back_all(link, &mut self.meta)?;
        self.call(link, &Request::Fsync { ino: 0 }).map(|_| ())
    }

    /// Set the position of an open file (positioned I/O for fio).
    pub fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        self.file(fd)?.pos = pos;
        Ok(())
    }

    /// The inode and size of an open file.
    pub fn fd_info(&self, fd: Fd) -> Result<(u64, u64), Errno> {
        let f = self
            .files
            .get(fd.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(Errno::BadFd)?;
        self.same_gen(f.ino, f.gen)?;
        Ok((f.ino, self.meta.size_of(f.ino)))
    }

    /// Create a directory.
    pub fn mkdir(&mut self, link: &mut Link<E>, path: &str) -> Result<(), Errno> {
        self.path_op(link, Op::Mkdir, path, false).map(|_| ())
    }

    /// Remove an empty directory.
    pub fn rmdir(&mut self, link: &mut Link<E>, path: &str) -> Result<(), Errno> {
        self.path_op(link, Op::Rmdir, path, false).map(|_| ())
    }

    /// Remove a file (and forget its cached pages).
    pub fn unlink(&mut self, link: &mut Link<E>, path: &str) -> Result<(), Errno> {
        let a = self.stat(link, path)?;
        if let Some(st) = self.dp.single_copy() {
            st.return_file(link, a.ino)?;
        }
        self.path_op(link, Op::Unlink, path, false)?;
        self.unlinked(&link.env, a.ino);
        Ok(())
    }

    /// The directory removed `ino`: forget its pages and sizes.
    pub fn unlinked(&mut self, env: &E, ino: u64) {
        self.dp.evict(env, ino, 0);
        self.dp.forget_pages(ino);
        self.meta.remove(ino);
    }
}
