//! The mmap windows: each inode gets a 4 GiB window of virtual addresses
//! whose page-table entries point at our frames or straight at the owners'
//! frames in the shared region (zero copy). The page tables are the
//! [`Mapper`]'s; this file decides what to map and keeps the books.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ops::RangeInclusive;

use fabric::proto::{Errno, PageKey};

use crate::env::{Env, Mapper};
use crate::link::Link;
use crate::pagecache::{Slot, PAGE};
use crate::singlecopy::{Coherence, ScState, MAX_RETRIES};

/// Base of the mmap windows (lower half, canonical, far from RAM; the
/// kernel reserves `MMAP_BASE..MMAP_BASE + 2^44`). Each inode gets a 4 GiB
/// window: `MMAP_BASE + (ino mod 2^12) * 4 GiB`.
pub const MMAP_BASE: u64 = 0x0000_1000_0000_0000;

/// Window slots (inodes share a slot modulo this) and pages per window.
const WINDOW_SLOTS: u64 = 1 << 12;
const WINDOW_PAGES: u64 = 1 << 20;

/// Virtual address of page `key` in its inode's mmap window.
pub fn window_va(key: &PageKey) -> u64 {
    MMAP_BASE + ((key.ino % WINDOW_SLOTS) << 32) + (key.idx % WINDOW_PAGES) * PAGE as u64
}

/// The books of the mmap windows: which page is mapped at which address,
/// which inode holds each window slot, and the window faults served.
#[derive(Debug, Default)]
pub(in crate::singlecopy) struct Windows {
    /// Pages mapped in the mmap window, by page -> virtual address.
    mapped: BTreeMap<PageKey, u64>,
    /// Lazily mapped windows: window slot -> inode (`mmap_lazy`).
    by_slot: BTreeMap<u64, u64>,
    /// Window page faults served with our or the owner's frame.
    faults: u64,
    /// Window page faults on a page no longer resident (served with the
    /// zero page; the reader retries).
    fault_misses: u64,
}

impl Windows {
    /// Give `ino` its window slot. Inodes that share the slot (equal modulo
    /// [`WINDOW_SLOTS`]) take turns: the previous holder's mappings are
    /// removed first, so no address can still reach its frames once the
    /// slot's addresses map another file's.
    fn claim(&mut self, m: &impl Mapper, ino: u64) {
        let slot = ino % WINDOW_SLOTS;
        if let Some(old) = self.by_slot.get(&slot).copied() {
            if old == ino {
                return;
            }
        }
        let aliases: Vec<PageKey> = self
            .mapped
            .keys()
            .filter(|k| k.ino != ino && k.ino % WINDOW_SLOTS == slot)
            .copied()
            .collect();
        for k in &aliases {
            self.unmap(m, k);
        }
        self.by_slot.insert(slot, ino);
    }

    /// Remove `key`'s mapping from its window, if any (with the TLB flush).
    pub(in crate::singlecopy) fn unmap(&mut self, m: &impl Mapper, key: &PageKey) {
        if let Some(va) = self.mapped.remove(key) {
            m.unmap_4k(va);
        }
    }

    /// Remove the mappings of the pages in `keys`.
    pub(in crate::singlecopy) fn unmap_range(
        &mut self,
        m: &impl Mapper,
        keys: RangeInclusive<PageKey>,
    ) {
        let gone: Vec<PageKey> = self.mapped.range(keys).map(|(k, _)| *k).collect();
        for k in gone {
            self.unmap(m, &k);
        }
    }

    /// Remove every window mapping, and every window.
    pub(in crate::singlecopy) fn unmap_all(&mut self, m: &impl Mapper) {
        for va in self.mapped.values() {
            m.unmap_4k(*va);
        }
        self.mapped.clear();
        self.by_slot.clear();
    }
}

impl Coherence {
    /// Fault-around: `key` was just mapped; map the other pages of the
    /// aligned block of `pages` pages around it that are cached here (our
    /// frames or owners' frames) and not mapped yet, as Linux maps the
    /// page-cache pages around a fault. Nothing is fetched, so nothing can
    /// be staler than a fault of that page would map: each mapping is
    /// tracked in [`Windows`] and goes with its page's invalidation. The
    /// pages mapped.
    fn fault_around(&mut self, m: &impl Mapper, key: &PageKey, pages: u32) -> u64 {
        if pages <= 1 {
            return 0;
        }
        let start = key.idx - key.idx % u64::from(pages);
        let end = start.saturating_add(u64::from(pages)).min(WINDOW_PAGES);
        let mut n = 0;
        for idx in start..end {
            let k = PageKey { ino: key.ino, idx };
            if idx == key.idx || self.win.mapped.contains_key(&k) || self.cache.in_flight(&k) {
                continue;
            }
            let gfn = match self.cache.slot(&k) {
                Some(Slot::Local { gfn, .. }) | Some(Slot::Remote { gfn, .. }) => *gfn,
                _ => continue,
            };
            let va = window_va(&k);
            if m.map_4k(va, m.shm_pa() + gfn * PAGE as u64).is_err() {
                break;
            }
            self.win.mapped.insert(k, va);
            n += 1;
        }
        n
    }
}

impl ScState {
    /// Pages mapped around mmap faults (`cache stats`).
    pub fn faultaround_count(&self) -> u64 {
        self.faultaround_mapped
    }

    /// Resolve the pages `[0, pages)` of `ino` through the protocol
    /// (batched) and open its window without mapping anything: the first
    /// access to each page faults, and [`ScState::window_fault`] maps our
    /// frame or the owner's frame. Returns the window's address.
    pub fn mmap_lazy<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        pages: u64,
    ) -> Result<u64, Errno> {
        let keys: Vec<PageKey> = (0..pages).map(|idx| PageKey { ino, idx }).collect();
        if pages > WINDOW_PAGES {
            return Err(Errno::Invalid); // past the window's 4 GiB
        }
        self.resolve(link, &keys, false)?;
        self.c()?.win.claim(&link.env, ino);
        Ok(window_va(&PageKey { ino, idx: 0 }))
    }

    /// (window faults served, faults on pages no longer resident).
    pub fn fault_counts(&self) -> (u64, u64) {
        self.coh
            .as_ref()
            .map(|c| (c.win.faults, c.win.fault_misses))
            .unwrap_or((0, 0))
    }

    /// A page fault at `va` in a window: map our frame or the owner's frame
    /// for that page; a page that is no longer resident (invalidated after
    /// `mmap_lazy` resolved it) gets the zero page and is counted, so the
    /// reader can retry. False: not ours to serve.
    pub fn window_fault(&mut self, m: &impl Mapper, va: u64) -> bool {
        let Some(c) = self.coh.as_mut() else {
            return false;
        };
        let Some(off) = va.checked_sub(MMAP_BASE) else {
            return false;
        };
        let Some(ino) = c.win.by_slot.get(&(off >> 32)).copied() else {
            return false;
        };
        let key = PageKey {
            ino,
            idx: (off & 0xFFFF_FFFF) >> 12,
        };
        let page_va = va & !0xFFF;
        let zero = m.zero_pa();
        let pa = match c.cache.slot(&key) {
            Some(Slot::Local { gfn, .. }) | Some(Slot::Remote { gfn, .. }) => {
                c.win.faults += 1;
                m.shm_pa() + gfn * PAGE as u64
            }
            _ if zero != 0 => {
                c.win.fault_misses += 1;
                zero
            }
            _ => return false,
        };
        if m.map_4k(page_va, pa).is_err() {
            return false;
        }
        c.win.mapped.insert(key, page_va);
        if pa != zero {
            self.faultaround_mapped += c.fault_around(m, &key, self.faultaround);
        }
        true
    }

    /// Make one page mapped in its window (resolving it if needed) and
    /// return its address and whether it is a peer's frame. Private copies
    /// (relaxed writes) cannot be mapped: `NotSupported`. A store through
    /// a mapping of a peer's frame goes into the one copy in relaxed mode
    /// too (a mapping cannot point at a private heap copy): as strong as
    /// strong mode, which relaxed mode allows; the page is written back
    /// like any dirty mapping.
    pub fn map_page<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
    ) -> Result<(u64, bool), Errno> {
        if key.idx >= WINDOW_PAGES {
            return Err(Errno::Invalid); // past the window's 4 GiB
        }
        let around = self.faultaround;
        for _ in 0..MAX_RETRIES {
            let c = self.c()?;
            c.win.claim(&link.env, key.ino);
            if let Some(va) = c.win.mapped.get(&key).copied() {
                // Only while the page is still that frame here: a private
                // copy (a relaxed write) cannot be mapped, and its old
                // mapping may point at a frame its owner reuses.
                match c.cache.slot(&key) {
                    Some(Slot::Local { .. }) => return Ok((va, false)),
                    Some(Slot::Remote { .. }) => return Ok((va, true)),
                    _ => c.unmap(&link.env, &key),
                }
            }
            let target = match c.cache.slot(&key) {
                Some(Slot::Local { gfn, .. }) => Some(Ok((*gfn, false))),
                Some(Slot::Remote { gfn, .. }) => Some(Ok((*gfn, true))),
                Some(Slot::Private(_)) => Some(Err(Errno::NotSupported)),
                _ => None,
            };
            match target {
                Some(Ok((gfn, remote))) => {
                    let va = window_va(&key);
                    let pa = link.env.shm_pa() + gfn * PAGE as u64;
                    link.env.map_4k(va, pa).map_err(|_| Errno::NoSpace)?;
                    c.win.mapped.insert(key, va);
                    let n = c.fault_around(&link.env, &key, around);
                    self.faultaround_mapped += n;
                    return Ok((va, remote));
                }
                Some(Err(e)) => return Err(e),
                None => {
                    self.resolve(link, &[key], false)?;
                }
            }
        }
        Err(Errno::Io)
    }

    /// The frame `key` is in here (ours or the owner's), if resident.
    pub fn frame_of(&self, key: &PageKey) -> Option<u64> {
        match self.coh.as_ref()?.cache.slot(key)? {
            Slot::Local { gfn, .. } | Slot::Remote { gfn, .. } => Some(*gfn),
            _ => None,
        }
    }

    /// Before a store through the window into frame `gfn` of `key` (see
    /// `ScState::begin_store`): true, store now, then
    /// [`ScState::store_done`]; false: replicas were revoked, map the page
    /// again and retry.
    pub fn store_allowed<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
        gfn: u64,
    ) -> Result<bool, Errno> {
        self.begin_store(link, key, gfn)
    }

    /// After a store [`ScState::store_allowed`] let through.
    pub fn store_done<E: Env>(&self, link: &Link<E>) {
        self.end_store(link)
    }

    /// Record a store through the mapping of `key` (into the one frame; the
    /// page is written back like any dirty page).
    pub fn mapped_write(&mut self, key: &PageKey) {
        if let Some(c) = self.cache() {
            c.mark_dirty(key);
        }
    }

    /// The file shrank to `size` (or was removed, `size` 0): retire our
    /// pages wholly past the new end, the ones the directory tears down (a
    /// page holding a new end inside it stays, its tail zeroed by the
    /// directory; see `NodeCache::evict_local`). Should the directory tear
    /// that page down too, its DIR_INV retires it here as any other.
    pub fn evict_local(&mut self, m: &impl Mapper, ino: u64, size: u64) {
        let Some(c) = self.coh.as_mut() else { return };
        let from = size.div_ceil(PAGE as u64);
        c.win.unmap_range(
            m,
            PageKey { ino, idx: from }..=PageKey { ino, idx: u64::MAX },
        );
        c.cache.evict_local(ino, from);
    }

    /// Unmap the whole mmap window.
    pub fn munmap(&mut self, m: &impl Mapper) {
        if let Some(c) = self.coh.as_mut() {
            c.unmap_all(m);
        }
    }
}
