//! What a node knows of its files' versions and sizes ([`Meta`]): the
//! directory's last answer, this node's local extension past it, and the
//! metadata epoch a version was last confirmed at.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

use fabric::proto::Attr;

/// What this node knows of a file: the directory's last version and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMeta {
    /// The inode's version (changes with every data, size or entry change).
    pub version: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Sizes and versions of the files this node has seen, by inode, and
/// the local sizes of files this node extended with writes it has not
/// written back yet (private-cache write-back): a known size is never
/// below the local one, as long as the writes behind it are held. When
/// the data path loses them unwritten (relaxed mode's private copies go
/// with a rejoin), the local sizes go too and each such file's size is
/// the directory's again: a size past the bytes anyone holds would read
/// as zeros, and the next append would write those zeros to the disk.
#[derive(Debug, Default)]
pub struct Meta {
    files: BTreeMap<u64, FileMeta>,
    local: BTreeMap<u64, u64>,
    /// The directory's last size of each file with a local size.
    heard: BTreeMap<u64, u64>,
    /// Counts the data path's losses of buffered writes (see
    /// [`Meta::watch_losses`]); `seen`: the count the local sizes were
    /// set under.
    losses: Option<Arc<AtomicU64>>,
    seen: u64,
    /// Single copy: the region's metadata epoch read just before the
    /// directory last confirmed the version we hold (see
    /// [`Meta::validated_at`]).
    validated: BTreeMap<u64, u64>,
}

impl Meta {
    /// Record the directory's view of `a.ino`; true if the version moved
    /// (or the file was not known).
    pub fn learn(&mut self, a: &Attr) -> bool {
        self.reconcile();
        if self.local.contains_key(&a.ino) {
            self.heard.insert(a.ino, a.size);
        }
        let local = self.local.get(&a.ino).copied().unwrap_or(0);
        let mut changed = false;
        let e = self.files.entry(a.ino).or_insert_with(|| {
            changed = true;
            FileMeta {
                version: a.version,
                size: a.size,
            }
        });
        changed |= e.version != a.version;
        e.version = a.version;
        e.size = a.size.max(local);
        if changed {
            self.validated.remove(&a.ino);
        }
        changed
    }

    /// The metadata epoch `e` read before the directory last confirmed
    /// our version of `ino`. While the region's epoch still reads `e`, the
    /// directory has served no request that could change any file since,
    /// so that version is still current (single-copy reads skip their
    /// validation round trip).
    pub fn validated_at(&self, ino: u64) -> Option<u64> {
        self.validated.get(&ino).copied()
    }

    /// The directory confirmed our version of `ino`; `epoch` was read
    /// before asking.
    pub fn set_validated(&mut self, ino: u64, epoch: u64) {
        self.reconcile();
        if self.files.contains_key(&ino) {
            self.validated.insert(ino, epoch);
        }
    }

    /// What we know of `ino`.
    pub fn get(&self, ino: u64) -> Option<FileMeta> {
        let m = self.files.get(&ino).copied()?;
        Some(FileMeta {
            size: self.size_of(ino),
            ..m
        })
    }

    /// The generation of `ino` this node knows ([`Attr::gen`]; 0, not
    /// checked, if none). Dirty data of `ino` is of this generation: a
    /// newer one learned drops the older's (`DataPath::stale_gen`).
    pub fn gen(&self, ino: u64) -> u64 {
        self.files
            .get(&ino)
            .map_or(0, |m| fabric::proto::gen_of_version(m.version))
    }

    /// Set what we know of `ino` (if known).
    pub fn set(&mut self, ino: u64, m: FileMeta) {
        self.reconcile();
        if self.local.contains_key(&ino) {
            self.heard.insert(ino, m.size);
        }
        let local = self.local.get(&ino).copied().unwrap_or(0);
        if let Some(e) = self.files.get_mut(&ino) {
            if e.version != m.version {
                self.validated.remove(&ino);
            }
            *e = FileMeta {
                version: m.version,
                size: m.size.max(local),
            };
        }
    }

    /// Known size of `ino` (0 if unknown).
    pub fn size_of(&self, ino: u64) -> u64 {
        let size = self.files.get(&ino).map(|c| c.size).unwrap_or(0);
        match self.heard.get(&ino) {
            // Not reconciled yet (a read-only look): the writes behind
            // the local size are gone.
            Some(&dir) if self.lost() => dir,
            _ => size,
        }
    }

    /// Buffered writes extended `ino` to `size` (the directory learns it
    /// at write-back).
    pub fn set_local_size(&mut self, ino: u64, size: u64) {
        self.reconcile();
        if let Some(e) = self.files.get_mut(&ino) {
            if !self.local.contains_key(&ino) {
                self.heard.insert(ino, e.size);
            }
            e.size = e.size.max(size);
        }
        self.local.insert(ino, size);
    }

    /// The local size of `ino`, if buffered writes extended it.
    pub fn local_size(&self, ino: u64) -> Option<u64> {
        if self.lost() {
            return None;
        }
        self.local.get(&ino).copied()
    }

    /// `ino` has no buffered extension any more (written back, truncated).
    pub fn clear_local_size(&mut self, ino: u64) {
        self.reconcile();
        self.local.remove(&ino);
        self.heard.remove(&ino);
    }

    /// The buffered writes that extended `ino` were lost unwritten (a
    /// write-back that failed, reported to its close or fsync): its size
    /// is the directory's last again, and the next read asks. Kept, a
    /// size past the bytes anyone holds would read as zeros here once
    /// another node's writes grew the file past it.
    pub fn forget_local_size(&mut self, ino: u64) {
        self.reconcile();
        if self.local.remove(&ino).is_some() {
            if let (Some(e), Some(&dir)) = (self.files.get_mut(&ino), self.heard.get(&ino)) {
                e.size = dir;
            }
        }
        self.heard.remove(&ino);
        self.validated.remove(&ino);
    }

    /// Forget `ino`.
    pub fn remove(&mut self, ino: u64) {
        self.reconcile();
        self.files.remove(&ino);
        self.local.remove(&ino);
        self.heard.remove(&ino);
        self.validated.remove(&ino);
    }

    /// Follow the data path's count of losses of buffered writes: each
    /// time it moves, every local size is dropped and its file's size is
    /// the directory's last again.
    pub fn watch_losses(&mut self, losses: Option<Arc<AtomicU64>>) {
        self.seen = losses.as_ref().map_or(0, |c| c.load(Ordering::Acquire));
        self.losses = losses;
    }

    /// Did the data path lose buffered writes since the local sizes were
    /// set?
    fn lost(&self) -> bool {
        self.losses
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Acquire) != self.seen)
    }

    /// After a loss: back to the directory's sizes.
    fn reconcile(&mut self) {
        let Some(now) = self.losses.as_ref().map(|c| c.load(Ordering::Acquire)) else {
            return;
        };
        if now == self.seen {
            return;
        }
        self.seen = now;
        for (ino, _) in core::mem::take(&mut self.local) {
            if let (Some(e), Some(&dir)) = (self.files.get_mut(&ino), self.heard.get(&ino)) {
                log::info!("inode {ino}: buffered writes lost, size back to {dir}");
                e.size = dir;
            }
            self.validated.remove(&ino);
        }
        self.heard.clear();
    }
}
