//! `daxfs` mode's reads: DaxFS's shared slot cache ([`daxcache::pcache`])
//! in the region, in place of this node's private page cache.
//!
//! A read of a file page looks the page up in the slot cache. A hit pins
//! the slot (CAS on its refcount), copies the bytes out of its frame and
//! unpins it. A miss claims a FREE slot (PENDING, under this node's owner
//! id) and asks the directory, DaxFS's fill thread, to fill it
//! ([`Request::DaxFill`]); the directory publishes it VALID and answers,
//! and the lookup runs again. A node that finds the page PENDING under
//! another's claim waits for it (spinning on the slot word, at most
//! [`PENDING_WAIT_NS`]) instead of reading the disk twice, and fails the
//! read with `Unavailable` and a log line naming the slot and its owner
//! if the fill never comes.
//!
//! MH-clock's background sweep runs here too (`Private::dax_sweep`):
//! between operations and at idle, every [`SWEEP_EVERY_NS`] of this node's
//! time, the node tries to advance the shared `evict_hand` by one window
//! of [`daxcache::pcache::SWEEP_BATCH`] slots by CAS; the node that wins
//! clears that window's reference bits, a node that loses skips it. So the
//! bits decay at a rate set by the nodes' clocks, not by the misses.
//!
//! `cache hold` takes a claim or a pin here and keeps it until the node
//! fails (`Private::dax_hold_page`), for the failure tests.
//!
//! `cache drop` gives back the slots this node brought in
//! (`Private::dax_drop`): the node remembers each slot it claimed and had
//! filled, with its page, and frees those that still cache that page and
//! that no reader has pinned ([`PageCache::drop_copy`]). A pinned one
//! stays valid (it is not stale) and is tried again by the next drop.
//!
//! Writes are not here: `daxfs` mode writes through the file server
//! ([`fabric::config::BaselineWrites::Through`]), which drops the stale
//! copies before it answers (frees them, or retires the pinned ones; the
//! hash overlay of DaxFS is not built yet).

use alloc::format;
use alloc::string::String;

use daxcache::pcache::{Dropped, Lookup, PageCache, Tag, PINS_PER_OWNER};
use daxcache::Waiter;
use fabric::layout::{DaxLayout, Layout};
use fabric::proto::{Errno, Request, Response};
use fabric::shm::SharedMem;

use crate::env::{Clock, Env};
use crate::link::Link;

use super::{Private, PAGE};

/// Longest wait for another node's claim of a page to be filled (a disk
/// read, or the heartbeat timeout after which the directory gives a
/// failed claimer's slots back).
pub const PENDING_WAIT_NS: u64 = 10_000_000_000;

/// Fills of one page asked for before a read gives up (each lost only to
/// a write or a reclaim of the slot meanwhile).
const MAX_FILLS: usize = 8;

/// A node tries one sweep of MH-clock per this much of its time.
pub const SWEEP_EVERY_NS: u64 = 10_000_000;

/// Most sweeps one call makes up for (an idle node wakes seldom: it
/// catches up on a few windows, not on every one it slept through).
pub const MAX_SWEEPS_AT_ONCE: u64 = 16;

/// The pin record of page reads; `cache hold` takes the others.
const READ_REC: u8 = 0;

/// This node's view of the slot cache and its counters.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dax {
    layout: DaxLayout,
    /// Owner id in the slot words: the node id minus one.
    owner: u8,
    pub hits: u64,
    pub claims: u64,
    pub waits: u64,
    /// Sweeps this node won (cleared a window) and lost (another node
    /// advanced the hand first).
    pub sweeps_won: u64,
    pub sweeps_lost: u64,
    /// When this node last swept (its clock).
    last_sweep_ns: u64,
    /// Pin records taken by `cache hold` (records 1 on).
    holds: u8,
}

impl Dax {
    /// The slot cache of `layout` for node `node`; `None` if the region
    /// has none or the node id does not fit an owner id.
    pub fn new(layout: &Layout, node: u32) -> Option<Dax> {
        let owner = u8::try_from(node.checked_sub(1)?).ok()?;
        if usize::from(owner) >= daxcache::pcache::MAX_OWNERS {
            return None;
        }
        Some(Dax {
            layout: layout.dax()?,
            owner,
            hits: 0,
            claims: 0,
            waits: 0,
            sweeps_won: 0,
            sweeps_lost: 0,
            last_sweep_ns: 0,
            holds: 0,
        })
    }

    /// Sweeps are due from `now_ns` on (a fresh session).
    pub fn start_sweeps(&mut self, now_ns: u64) {
        self.last_sweep_ns = now_ns;
    }

    pub fn slots(&self) -> usize {
        self.layout.slots
    }
}

/// The directory's count of pages filled into the slot cache of `layout`
/// (cluster-wide; `None` if the region has no slot cache).
pub fn dir_fills(mem: &(impl SharedMem + ?Sized), layout: &Layout) -> Option<u64> {
    let d = layout.dax()?;
    let w = d.words(mem)?;
    PageCache::attach(&w, 0, d.slots).ok()?.fills().ok()
}

/// Waits on the clock, up to a deadline; notes whether it waited.
struct Deadline<'a, C: Clock> {
    clock: &'a C,
    until: u64,
    waited: bool,
}

impl<C: Clock> Waiter for Deadline<'_, C> {
    fn pause(&mut self) -> bool {
        self.waited = true;
        if self.clock.now_ns() >= self.until {
            return false;
        }
        // Spinning: the fill's publish is a store to the slot word, which
        // raises no interrupt here.
        self.clock.wait_step(true);
        true
    }
}

/// What one lookup came to.
enum Got {
    Pinned(usize),
    Claimed(usize),
}

/// What `cache hold` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Claim the page (PENDING under this node) and ask no fill.
    Claim,
    /// Pin the page (filled first if no node has).
    Pin,
}

impl Private {
    /// Pins page `idx` of `ino` under pin record `rec`, filling it first
    /// if no node has: the slot, pinned (the caller unpins it).
    fn dax_pin<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        idx: u64,
        rec: u8,
    ) -> Result<usize, Errno> {
        let mut d = self.dax.ok_or(Errno::Unavailable)?;
        let tag = Tag::new(ino, idx).map_err(|_| Errno::NotSupported)?;
        let mut result = Err(Errno::Unavailable);
        for _ in 0..MAX_FILLS {
            let got = match d.lookup(link, tag, rec) {
                Ok(g) => g,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            match got {
                Got::Pinned(slot) => {
                    result = Ok(slot);
                    break;
                }
                Got::Claimed(slot) => {
                    let r = link.fs_call(&Request::DaxFill { slot: slot as u64 }, self);
                    match r {
                        Ok(Response::Data { .. }) => {
                            self.dax_filled.insert(slot, tag);
                        }
                        // The slot was given back or reclaimed meanwhile:
                        // look up again.
                        Err(Errno::Stale) | Err(Errno::Invalid) => {}
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                        Ok(_) => {
                            result = Err(Errno::Io);
                            break;
                        }
                    }
                }
            }
        }
        self.dax = Some(d);
        result
    }

    /// Copies `buf.len()` bytes of page `idx` of `ino` from `in_page` on
    /// out of the slot cache, filling it first if no node has.
    pub(super) fn dax_read_page<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        idx: u64,
        in_page: usize,
        buf: &mut [u8],
    ) -> Result<(), Errno> {
        if in_page.checked_add(buf.len()).is_none_or(|e| e > PAGE) {
            return Err(Errno::Invalid);
        }
        let slot = self.dax_pin(link, ino, idx, READ_REC)?;
        let d = self.dax.ok_or(Errno::Unavailable)?;
        let mem = link.env.mem();
        let copied = match d.layout.frame_off(slot) {
            Some(off) => {
                mem.read(off + in_page, buf);
                Ok(())
            }
            None => Err(Errno::Io),
        };
        let w = d.layout.words(mem).ok_or(Errno::Io)?;
        let pc = attach(&w, &d)?;
        pc.unpin(d.owner, READ_REC, slot).map_err(|e| {
            log::error!("daxfs: unpin of slot {slot}: {e}");
            Errno::Io
        })?;
        copied
    }

    /// `cache hold`: takes a claim or a pin of page `idx` of `ino` and
    /// keeps it (it is given back only when this node fails or leaves and
    /// the directory reclaims what it held): for the failure tests.
    pub(super) fn dax_hold_page<E: Env>(
        &mut self,
        link: &mut Link<E>,
        ino: u64,
        idx: u64,
        what: Hold,
    ) -> Result<String, Errno> {
        let mut d = self.dax.ok_or(Errno::NotSupported)?;
        let tag = Tag::new(ino, idx).map_err(|_| Errno::Invalid)?;
        match what {
            Hold::Claim => match d.lookup(link, tag, READ_REC)? {
                Got::Claimed(slot) => {
                    self.dax = Some(d);
                    Ok(format!(
                        "slot {slot} (inode {ino} page {idx}): claimed, PENDING, no fill asked; held until this node fails"
                    ))
                }
                Got::Pinned(slot) => {
                    self.dax = Some(d);
                    let w = d.layout.words(link.env.mem()).ok_or(Errno::Io)?;
                    attach(&w, &d)?
                        .unpin(d.owner, READ_REC, slot)
                        .map_err(|_| Errno::Io)?;
                    Err(Errno::Exists)
                }
            },
            Hold::Pin => {
                let rec = d.holds + 1;
                if usize::from(rec) >= PINS_PER_OWNER {
                    return Err(Errno::NoSpace);
                }
                let slot = self.dax_pin(link, ino, idx, rec)?;
                let mut d = self.dax.ok_or(Errno::Unavailable)?;
                d.holds = rec;
                self.dax = Some(d);
                let w = d.layout.words(link.env.mem()).ok_or(Errno::Io)?;
                let refs = attach(&w, &d)?
                    .slot(slot)
                    .map(|s| s.refs)
                    .map_err(|_| Errno::Io)?;
                Ok(format!(
                    "slot {slot} (inode {ino} page {idx}): pinned ({refs} pin(s)); held until this node fails"
                ))
            }
        }
    }

    /// `cache drop`: frees the slots this node filled that still cache
    /// the page it filled them with and that no reader has pinned; what
    /// was done.
    pub(super) fn dax_drop<E: Env>(&mut self, link: &Link<E>) -> Result<String, Errno> {
        let d = self.dax.ok_or(Errno::NotSupported)?;
        let w = d.layout.words(link.env.mem()).ok_or(Errno::Io)?;
        let pc = attach(&w, &d)?;
        let (mut freed, mut pinned, mut gone) = (0usize, 0usize, 0usize);
        let filled: alloc::vec::Vec<(usize, Tag)> =
            self.dax_filled.iter().map(|(s, t)| (*s, *t)).collect();
        for (slot, tag) in filled {
            match pc.drop_copy(slot, tag) {
                Ok(Dropped::Freed) => freed += 1,
                Ok(Dropped::Pinned) => {
                    pinned += 1;
                    continue;
                }
                Ok(Dropped::Gone) => gone += 1,
                Err(e) => {
                    log::error!("daxfs: drop of slot {slot}: {e}");
                    return Err(Errno::Io);
                }
            }
            self.dax_filled.remove(&slot);
        }
        Ok(format!(
            "freed {freed} shared slot(s) this node filled; kept {pinned} pinned by a reader; {gone} already gone (evicted, rewritten or reused)"
        ))
    }

    /// MH-clock's background sweep, between operations and at idle: one
    /// try per [`SWEEP_EVERY_NS`] elapsed since the last (at most
    /// [`MAX_SWEEPS_AT_ONCE`]).
    pub(super) fn dax_sweep<E: Env>(&mut self, link: &Link<E>) {
        let Some(mut d) = self.dax else { return };
        let now = link.env.now_ns();
        let due = now.saturating_sub(d.last_sweep_ns) / SWEEP_EVERY_NS;
        if due == 0 {
            return;
        }
        d.last_sweep_ns = now;
        let mem = link.env.mem();
        let Some(w) = d.layout.words(mem) else { return };
        let Ok(pc) = attach(&w, &d) else { return };
        for _ in 0..due.min(MAX_SWEEPS_AT_ONCE) {
            match pc.sweep() {
                Ok(true) => d.sweeps_won += 1,
                Ok(false) => d.sweeps_lost += 1,
                Err(e) => {
                    log::error!("daxfs: sweep: {e}");
                    break;
                }
            }
        }
        self.dax = Some(d);
    }
}

fn attach<'a, W: daxcache::Words + ?Sized>(w: &'a W, d: &Dax) -> Result<PageCache<'a, W>, Errno> {
    PageCache::attach(w, 0, d.layout.slots).map_err(|e| {
        log::error!("daxfs: cannot attach to the slot cache: {e}");
        Errno::Io
    })
}

impl Dax {
    /// One lookup of `tag` under pin record `rec`: pinned, or claimed by
    /// us; waits on another node's claim for at most [`PENDING_WAIT_NS`].
    fn lookup<E: Env>(&mut self, link: &Link<E>, tag: Tag, rec: u8) -> Result<Got, Errno> {
        let mem = link.env.mem();
        let w = self.layout.words(mem).ok_or(Errno::Io)?;
        let pc = attach(&w, self)?;
        let mut wait = Deadline {
            clock: &link.env,
            until: link.env.now_ns().saturating_add(PENDING_WAIT_NS),
            waited: false,
        };
        let l = pc.lookup(tag, self.owner, rec, &mut wait);
        self.waits += u64::from(wait.waited);
        match l {
            Ok(Lookup::Hit(slot)) => {
                self.hits += 1;
                Ok(Got::Pinned(slot))
            }
            Ok(Lookup::Miss(slot)) => {
                self.claims += 1;
                Ok(Got::Claimed(slot))
            }
            Err(e) => {
                log::error!(
                    "daxfs: lookup of inode {} page {}: {e}",
                    tag.ino(),
                    tag.pgoff()
                );
                Err(Errno::Unavailable)
            }
        }
    }
}
