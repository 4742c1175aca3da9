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
//! Writes are not here: `daxfs` mode writes through the file server
//! ([`fabric::config::BaselineWrites::Through`]), which frees the stale
//! slots before it answers (the hash overlay of DaxFS is not built yet).

use daxcache::pcache::{Lookup, PageCache, Tag};
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

/// This node's view of the slot cache and its counters.
#[derive(Debug, Clone, Copy)]
pub(super) struct Dax {
    layout: DaxLayout,
    /// Owner id in the slot words: the node id minus one.
    owner: u8,
    pub hits: u64,
    pub claims: u64,
    pub waits: u64,
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
        })
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
    Copied,
    Claimed(usize),
}

impl Private {
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
        let mut d = self.dax.ok_or(Errno::Unavailable)?;
        let tag = Tag::new(ino, idx).map_err(|_| Errno::NotSupported)?;
        if in_page.checked_add(buf.len()).is_none_or(|e| e > PAGE) {
            return Err(Errno::Invalid);
        }
        let mut result = Err(Errno::Unavailable);
        for _ in 0..MAX_FILLS {
            let got = {
                let mem = link.env.mem();
                let w = d.layout.words(mem).ok_or(Errno::Io)?;
                let pc = PageCache::attach(&w, 0, d.layout.slots).map_err(|e| {
                    log::error!("daxfs: cannot attach to the slot cache: {e}");
                    Errno::Io
                })?;
                let mut wait = Deadline {
                    clock: &link.env,
                    until: link.env.now_ns().saturating_add(PENDING_WAIT_NS),
                    waited: false,
                };
                let l = pc.lookup(tag, d.owner, 0, &mut wait);
                d.waits += u64::from(wait.waited);
                match l {
                    Ok(Lookup::Hit(slot)) => {
                        let off = d.layout.frame_off(slot).ok_or(Errno::Io)?;
                        mem.read(off + in_page, buf);
                        pc.unpin(d.owner, 0, slot).map_err(|_| Errno::Io)?;
                        d.hits += 1;
                        Got::Copied
                    }
                    Ok(Lookup::Miss(slot)) => {
                        d.claims += 1;
                        Got::Claimed(slot)
                    }
                    Err(e) => {
                        log::error!("daxfs: read of inode {ino} page {idx}: {e}");
                        result = Err(Errno::Unavailable);
                        break;
                    }
                }
            };
            match got {
                Got::Copied => {
                    result = Ok(());
                    break;
                }
                Got::Claimed(slot) => {
                    let r = link.fs_call(&Request::DaxFill { slot: slot as u64 }, self);
                    match r {
                        Ok(Response::Data { .. }) => {}
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
}
