//! The node's control API behind the shell's `cache policy`, `cache
//! config`, `cache groups` and `locality PATH`: eviction controls of the
//! single-copy cache and its task groups, the reclaim they drive when
//! idle, and where a file's pages live as the directory tells it.

use alloc::vec::Vec;

use fabric::proto::{Errno, FileKind, LocalityRange, Request, Response, LOCALITY_RECORD};

use crate::env::Env;
use crate::node::Node;
pub use crate::policy::{GroupConf, GroupInfo};
use crate::singlecopy::group_errno;
pub use crate::singlecopy::Controls;

/// The bulk slot `locality` uses (the one `readdir` uses: never two at
/// once, the shell runs one command at a time).
const SLOT: u32 = 3;
/// Most runs `locality` collects.
const MAX_RUNS: usize = 100_000;

impl<E: Env + 'static> Node<E> {
    /// The eviction controls (`NotSupported` in the private-cache modes,
    /// which have no single copy to evict from).
    pub fn cache_controls(&mut self) -> Result<Controls, Errno> {
        let st = self.vfs.data_path().single_copy();
        st.map(|s| s.controls()).ok_or(Errno::NotSupported)
    }

    /// Set the eviction controls; pages above a lowered limit or idle past
    /// the TTL are reclaimed at once.
    pub fn set_cache_controls(&mut self, k: Controls) -> Result<(), Errno> {
        let st = self
            .vfs
            .data_path()
            .single_copy()
            .ok_or(Errno::NotSupported)?;
        st.set_controls(k);
        st.expire(&mut self.link).map(|_| ())
    }

    /// Every task group with its pages and counters (`NotSupported` in
    /// the private-cache modes).
    pub fn cache_groups(&mut self) -> Result<Vec<GroupInfo>, Errno> {
        let st = self.vfs.data_path().single_copy();
        st.map(|s| s.groups()).ok_or(Errno::NotSupported)
    }

    /// Make a task group or replace its settings; pages over a lowered
    /// limit are reclaimed at once.
    pub fn set_cache_group(&mut self, conf: &GroupConf) -> Result<(), Errno> {
        let st = self
            .vfs
            .data_path()
            .single_copy()
            .ok_or(Errno::NotSupported)?;
        st.configure_group(conf).map_err(group_errno)?;
        st.expire(&mut self.link).map(|_| ())
    }

    /// The tasks doing I/O from now on are in group `name` (made if
    /// missing).
    pub fn set_task_group(&mut self, name: &str) -> Result<(), Errno> {
        let st = self
            .vfs
            .data_path()
            .single_copy()
            .ok_or(Errno::NotSupported)?;
        st.enter_group(name).map_err(group_errno)
    }

    /// Idle-time reclaim (TTL, limit): pages invalidated.
    pub fn expire(&mut self) -> usize {
        let Some(st) = self.vfs.data_path().single_copy() else {
            return 0;
        };
        match st.expire(&mut self.link) {
            Ok(n) => n,
            Err(e) => {
                log::warn!("reclaim of idle pages: {e}");
                0
            }
        }
    }

    /// Runs of pages of `path` with their owner and sharer count (or on
    /// disk only), from the directory.
    pub fn locality(&mut self, path: &str) -> Result<Vec<LocalityRange>, Errno> {
        let a = self.stat(path)?;
        if a.kind != FileKind::File {
            return Err(Errno::IsDir);
        }
        let cap = self.link.bulk_cap(SLOT)?;
        let mut out: Vec<LocalityRange> = Vec::new();
        let mut first = 0;
        loop {
            let r = self.fs_call(&Request::Locality {
                slot: SLOT,
                ino: a.ino,
                first,
            })?;
            let Response::Entries { count, next_cookie } = r else {
                return Err(Errno::Io);
            };
            let count = (count as usize).min(cap / LOCALITY_RECORD);
            let mut recs = alloc::vec![0u8; count * LOCALITY_RECORD];
            self.link.bulk_read(SLOT, &mut recs)?;
            for rec in recs.chunks_exact(LOCALITY_RECORD) {
                let r = LocalityRange::decode(rec).map_err(|_| Errno::Io)?;
                // Runs cut by the directory's per-request bound join up.
                match out.last_mut() {
                    Some(l)
                        if l.owner == r.owner
                            && l.sharers == r.sharers
                            && l.first + u64::from(l.pages) == r.first =>
                    {
                        l.pages = l.pages.saturating_add(r.pages)
                    }
                    _ => out.push(r),
                }
            }
            if next_cookie <= first || count == 0 && next_cookie == 0 || out.len() > MAX_RUNS {
                break;
            }
            first = next_cookie;
        }
        Ok(out)
    }
}
