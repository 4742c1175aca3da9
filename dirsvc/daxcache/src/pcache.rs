//! DaxFS's shared slot page cache and its MH-clock eviction.
//!
//! # Layout (in words, from the area's base)
//!
//! * header, [`HEADER_WORDS`]: magic, slot count, `evict_hand`, the
//!   filler's count of pages filled ([`PageCache::count_fill`]);
//! * per slot two words (DaxFS's 16-byte `daxfs_pcache_slot`):
//!   * the **slot word** (DaxFS's `state_tag`): bits 0-1 the state
//!     ([`FREE`], [`PENDING`], [`VALID`], [`CLAIMED`]), bits 2-5 the
//!     refcount (VALID only, 0-15 pins), bits 6-57 the tag, bits 58-63 the
//!     owner (the participant that claimed a CLAIMED or PENDING slot);
//!   * the **aux word**: bit 0 the reference bit, bits 32-63 the claim
//!     sequence of the windows whose home is this slot;
//! * per participant [`PINS_PER_OWNER`] pin records (what it has pinned,
//!   so that the pins of a failed participant can be given back).
//!
//! The data of slot `i` is the page at `i * PAGE_SIZE` of a separate data
//! area (DaxFS's `slot_data`); this crate only coordinates who owns it.
//!
//! # Protocol (DaxFS's, with the changes said below)
//!
//! A lookup probes [`PROBE_LEN`] slots from the tag's home slot. A VALID
//! slot with the tag is pinned by a CAS that adds one to its refcount; a
//! CLAIMED or PENDING slot with the tag is waited for (the caller pauses,
//! with a timeout, and fails with [`Error::Timeout`] naming the slot and
//! its owner). On a miss the lookup claims the first FREE slot of the
//! window by CAS, and the claimer (DaxFS's own claimer, or its fill
//! thread; here the caller decides) fills the page and publishes it by a
//! CAS from PENDING to VALID. With no FREE slot, MH-clock evicts: a cold
//! victim (VALID, refcount 0, reference bit 0) in the window, else clear
//! the window's reference bits, yield and rescan, else force the first
//! unpinned VALID slot. A background sweep ([`PageCache::sweep`]) advances
//! the shared `evict_hand` by [`SWEEP_BATCH`] slots by CAS, the winner
//! clearing that window's reference bits.
//!
//! # Where this differs from DaxFS, and why
//!
//! * **The tag is hashed** ([`crate::hash64`]); DaxFS's home slot is
//!   `tag & mask`, so page N of every file starts at the same slot.
//! * **Exactly one fill per page.** In DaxFS two participants that scan
//!   the window while a slot in it turns FREE (an eviction) can pick two
//!   different FREE slots and both claim the same tag: two fills, two
//!   copies. Here a claim is first CLAIMED (a state DaxFS leaves unused),
//!   then validated by a CAS on the claim sequence of the tag's home slot
//!   (it must still hold the value read before the scan), and only then
//!   made PENDING; a claimer whose validation fails gives its slot back.
//!   Any two claims of one tag share the home slot, so of two concurrent
//!   claimers at most one validates, and one that starts after a
//!   validation sees the validated claim in its scan. Fillers only fill
//!   PENDING slots. The interleaving tests check this exhaustively.
//! * **No global pending counter.** DaxFS counts PENDING slots in one
//!   shared word so that its fill thread knows when to scan; the paper
//!   measures its claim path falling from 0.23 to 0.005 Mops/s at 1,024
//!   threads on it. Here the filler is woken by a doorbell and finds the
//!   PENDING slots with [`PageCache::next_pending`].
//! * **A publish sets the reference bit** before the slot turns VALID, so
//!   a freshly filled page is not the next cold victim before its claimer
//!   has pinned it.
//! * **Failed participants are reclaimable** ([`PageCache::reclaim_owner`]):
//!   the slot word of a CLAIMED or PENDING slot names its owner, so the
//!   owner's claims go back to FREE; a pin is recorded in the owner's pin
//!   records (INTENT before the refcount CAS, HELD after it, RELEASING
//!   before the unpin CAS), so the owner's HELD pins are given back
//!   exactly. A participant that fails between writing INTENT or RELEASING
//!   and the next record may or may not have changed the refcount: that
//!   pin is left in place (never given back twice, which could free a
//!   slot another reader holds) and counted as uncertain. So at most one
//!   pin per failed in-flight operation stays, keeping one slot of its
//!   window unevictable; it never wedges the cache. DaxFS defines no
//!   failure behaviour (its docs/COHERENCE.md leaves the crash step of its
//!   validation gate open).
//! * **The pin limit waits**: a slot with 15 pins makes the lookup wait
//!   (with the timeout) instead of restarting from the probe.
//! * **A stale pinned copy is retired, not waited for.** DaxFS has no
//!   invalidation (its backing store is read-only; writes go to the
//!   overlay). Here a write through the file server drops the cached
//!   copies of the pages it changed ([`PageCache::invalidate`]): an
//!   unpinned one goes FREE; a pinned one has its tag replaced by
//!   [`RETIRED_TAG`] by one CAS (refcount kept), so no lookup finds it
//!   from then on, its readers finish copying the old bytes (their reads
//!   began before the write was answered), and the last unpin frees it.
//!   The writer never waits for a reader, and a reader that failed while
//!   pinning a stale page cannot keep serving it to others.
//!
//! The reclaim rule assumes the failed participant is fenced (it never
//! writes the region again under that owner id), which the directory's
//! failure detector provides.

use crate::{hash64, Error, Step, Waiter, Words};

/// Probe window length (DaxFS's `PCACHE_PROBE_LEN`).
pub const PROBE_LEN: usize = 8;
/// Slots per background sweep (DaxFS's `PCACHE_SWEEP_BATCH`).
pub const SWEEP_BATCH: usize = 64;
/// Words of the header.
pub const HEADER_WORDS: usize = 8;
/// Words of metadata per slot (16 bytes, as DaxFS).
pub const SLOT_WORDS: usize = 2;
/// Participants (owner ids 0..MAX_OWNERS).
pub const MAX_OWNERS: usize = 64;
/// Pin records per participant: how many pins it may hold at once.
pub const PINS_PER_OWNER: usize = 16;
/// Restarts of one lookup before [`Error::Busy`] (DaxFS: 100).
pub const MAX_RESTARTS: u32 = 100;

/// Header word of MH-clock's `evict_hand`.
const HAND_WORD: usize = 2;
/// Header word of the filler's count of pages filled.
const FILLS_WORD: usize = 3;

/// "daxpcach".
pub const MAGIC: u64 = u64::from_le_bytes(*b"daxpcach");

/// Slot states (bits 0-1 of the slot word).
pub const FREE: u64 = 0;
pub const PENDING: u64 = 1;
pub const VALID: u64 = 2;
/// Claimed but not yet validated (see the module doc).
pub const CLAIMED: u64 = 3;

const STATE_MASK: u64 = 3;
const REF_SHIFT: u32 = 2;
const REF_INC: u64 = 1 << REF_SHIFT;
/// Most pins one slot holds (4 bits, as DaxFS).
pub const REF_MAX: u64 = 15;
const TAG_SHIFT: u32 = 6;
/// Bits of a tag: 32 of inode, 20 of page offset.
pub const TAG_BITS: u32 = 52;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// The tag of a retired slot (a stale copy still pinned): no page has it.
pub const RETIRED_TAG: u64 = TAG_MASK;
const OWNER_SHIFT: u32 = 58;

const AUX_REF: u64 = 1;
const AUX_SEQ_SHIFT: u32 = 32;
const AUX_SEQ_INC: u64 = 1 << AUX_SEQ_SHIFT;

const REC_KIND_SHIFT: u32 = 62;
const REC_INTENT: u64 = 1;
const REC_HELD: u64 = 2;
const REC_RELEASING: u64 = 3;
const REC_SLOT_MASK: u64 = (1 << REC_KIND_SHIFT) - 1;

/// Which file page a slot caches: `(ino << 20) | pgoff`, as DaxFS's
/// `PCACHE_TAG_MAKE`, with the inode limited to 32 bits so that the owner
/// fits in the slot word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(u64);

impl Tag {
    pub fn new(ino: u64, pgoff: u64) -> Result<Tag, Error> {
        if ino > u64::from(u32::MAX) || pgoff >= 1 << 20 {
            return Err(Error::TooBig);
        }
        let raw = (ino << 20) | pgoff;
        // The last page of the last inode is the retired slots' tag.
        if raw == RETIRED_TAG {
            return Err(Error::TooBig);
        }
        Ok(Tag(raw))
    }
    /// Whether this is [`RETIRED_TAG`] (a slot word's, never a page's).
    pub fn is_retired(self) -> bool {
        self.0 == RETIRED_TAG
    }
    pub fn ino(self) -> u64 {
        self.0 >> 20
    }
    pub fn pgoff(self) -> u64 {
        self.0 & 0xF_FFFF
    }
    pub fn raw(self) -> u64 {
        self.0
    }
}

/// A decoded slot word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub state: u64,
    pub refs: u64,
    pub tag: Tag,
    pub owner: u8,
}

/// Decodes a slot word read from the region; values no participant writes
/// are [`Error::Corrupt`].
pub fn decode(w: u64) -> Result<Slot, Error> {
    let state = w & STATE_MASK;
    let refs = (w >> REF_SHIFT) & 0xF;
    let tag = Tag((w >> TAG_SHIFT) & TAG_MASK);
    // The owner field is 6 bits: it always fits a u8.
    let owner = (w >> OWNER_SHIFT) as u8;
    let ok = match state {
        FREE => w == 0,
        VALID => owner == 0,
        _ => refs == 0,
    };
    if !ok {
        return Err(Error::Corrupt);
    }
    Ok(Slot {
        state,
        refs,
        tag,
        owner,
    })
}

/// A VALID slot word `w` (decoded `s`, pinned) after one unpin: a
/// retired slot's last unpin frees it.
fn unpinned(w: u64, s: Slot) -> u64 {
    if s.tag.is_retired() && s.refs == 1 {
        FREE
    } else {
        w - REF_INC
    }
}

fn make(state: u64, tag: Tag, owner: u8) -> u64 {
    (u64::from(owner) << OWNER_SHIFT) | (tag.0 << TAG_SHIFT) | state
}

/// A view of the page cache's metadata area inside shared words.
pub struct PageCache<'a, W: Words + ?Sized> {
    words: &'a W,
    base: usize,
    slots: usize,
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// The page is cached in this slot, pinned under the lookup's pin
    /// record: read it, then [`PageCache::unpin`].
    Hit(usize),
    /// The page was not cached: this slot is now PENDING with the tag,
    /// claimed by the caller. Fill it and [`PageCache::publish`] (or have
    /// the filler do so), then look up again to pin it.
    Miss(usize),
}

/// A PENDING slot for the filler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FillJob {
    pub slot: usize,
    pub tag: Tag,
    pub owner: u8,
    word: u64,
}

/// What [`PageCache::invalidate`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Invalidated {
    /// VALID slots of the tag returned to FREE.
    pub freed: usize,
    /// VALID slots of the tag still pinned: retired (see the module doc).
    pub retired: usize,
}

/// What [`PageCache::drop_copy`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dropped {
    /// The slot held the tag, unpinned: it is FREE now.
    Freed,
    /// The slot holds the tag but a reader has it pinned: left as is.
    Pinned,
    /// The slot no longer holds the tag VALID (evicted, invalidated, or
    /// reused for another page): left as is.
    Gone,
}

/// What [`PageCache::reclaim_owner`] gave back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reclaimed {
    /// CLAIMED or PENDING slots returned to FREE.
    pub claims: usize,
    /// HELD pins given back.
    pub pins: usize,
    /// Pin records caught mid-operation: left in place (see the module doc).
    pub uncertain: usize,
}

impl<'a, W: Words + ?Sized> PageCache<'a, W> {
    /// Words the area needs for `slots` slots.
    pub fn words_needed(slots: usize) -> Option<usize> {
        slots
            .checked_mul(SLOT_WORDS)?
            .checked_add(HEADER_WORDS)?
            .checked_add(MAX_OWNERS * PINS_PER_OWNER)
    }

    fn check_geometry(words: &W, base: usize, slots: usize) -> Result<(), Error> {
        if !slots.is_power_of_two() || !(PROBE_LEN..=1 << 40).contains(&slots) {
            return Err(Error::BadHeader);
        }
        let end = base
            .checked_add(Self::words_needed(slots).ok_or(Error::OutOfBounds)?)
            .ok_or(Error::OutOfBounds)?;
        if end > words.len() {
            return Err(Error::OutOfBounds);
        }
        Ok(())
    }

    /// Lays out an empty cache (every slot FREE) at `base`; done once, by
    /// the instance that formats the region, before any participant attaches.
    pub fn format(words: &'a W, base: usize, slots: usize) -> Result<Self, Error> {
        Self::check_geometry(words, base, slots)?;
        let n = Self::words_needed(slots).ok_or(Error::OutOfBounds)?;
        for i in 0..n {
            words.store(base + i, 0)?;
        }
        words.store(base + 1, slots as u64)?;
        words.store(base, MAGIC)?;
        Ok(PageCache { words, base, slots })
    }

    /// Attaches to a formatted cache; the header must match the geometry
    /// this participant was configured with (the header is untrusted).
    pub fn attach(words: &'a W, base: usize, slots: usize) -> Result<Self, Error> {
        Self::check_geometry(words, base, slots)?;
        if words.load(base)? != MAGIC || words.load(base + 1)? != slots as u64 {
            return Err(Error::BadHeader);
        }
        Ok(PageCache { words, base, slots })
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    fn mask(&self) -> usize {
        self.slots - 1
    }

    fn slot_word(&self, slot: usize) -> Result<usize, Error> {
        if slot >= self.slots {
            return Err(Error::OutOfBounds);
        }
        Ok(self.base + HEADER_WORDS + slot * SLOT_WORDS)
    }

    fn aux_word(&self, slot: usize) -> Result<usize, Error> {
        Ok(self.slot_word(slot)? + 1)
    }

    fn rec_word(&self, owner: u8, rec: u8) -> Result<usize, Error> {
        if usize::from(owner) >= MAX_OWNERS || usize::from(rec) >= PINS_PER_OWNER {
            return Err(Error::OutOfBounds);
        }
        Ok(self.base
            + HEADER_WORDS
            + self.slots * SLOT_WORDS
            + usize::from(owner) * PINS_PER_OWNER
            + usize::from(rec))
    }

    /// The home slot of a tag: where its probe window starts.
    pub fn home(&self, tag: Tag) -> usize {
        (hash64(tag.0) as usize) & self.mask()
    }

    /// The slot word of `slot`, decoded.
    pub fn slot(&self, slot: usize) -> Result<Slot, Error> {
        decode(self.words.load(self.slot_word(slot)?)?)
    }

    /// Whether the slot's reference bit is set.
    pub fn referenced(&self, slot: usize) -> Result<bool, Error> {
        Ok(self.words.load(self.aux_word(slot)?)? & AUX_REF != 0)
    }

    /// Byte offset of a slot's page in the data area.
    pub fn data_offset(&self, slot: usize, page_size: usize) -> Result<usize, Error> {
        if slot >= self.slots {
            return Err(Error::OutOfBounds);
        }
        slot.checked_mul(page_size).ok_or(Error::OutOfBounds)
    }

    /// Runs one lookup step machine to the end, pausing on `waiter` while
    /// it is blocked on another participant's claim.
    pub fn lookup(
        &self,
        tag: Tag,
        owner: u8,
        rec: u8,
        waiter: &mut dyn Waiter,
    ) -> Result<Lookup, Error> {
        let mut op = LookupOp::new(self, tag, owner, rec)?;
        loop {
            match op.step(self)? {
                Step::Again => {}
                Step::Blocked => {
                    if !waiter.pause() {
                        return Err(op.timeout(self));
                    }
                }
                Step::Done(l) => return Ok(l),
            }
        }
    }

    /// Gives back the pin taken under pin record `rec` of `owner` on `slot`.
    pub fn unpin(&self, owner: u8, rec: u8, slot: usize) -> Result<(), Error> {
        let r = self.rec_word(owner, rec)?;
        let sw = self.slot_word(slot)?;
        if self.words.load(r)? != (REC_HELD << REC_KIND_SHIFT) | slot as u64 {
            return Err(Error::NotPinned);
        }
        self.words
            .store(r, (REC_RELEASING << REC_KIND_SHIFT) | slot as u64)?;
        loop {
            let w = self.words.load(sw)?;
            let s = decode(w)?;
            if s.state != VALID || s.refs == 0 {
                return Err(Error::NotPinned);
            }
            if self.words.cas(sw, w, unpinned(w, s))?.is_ok() {
                break;
            }
        }
        self.words.store(r, 0)
    }

    /// The first PENDING slot at or after `from`, for the filler.
    pub fn next_pending(&self, from: usize) -> Result<Option<FillJob>, Error> {
        for slot in from..self.slots {
            let word = self.words.load(self.slot_word(slot)?)?;
            let s = decode(word)?;
            if s.state == PENDING {
                return Ok(Some(FillJob {
                    slot,
                    tag: s.tag,
                    owner: s.owner,
                    word,
                }));
            }
        }
        Ok(None)
    }

    /// The PENDING job of one slot, if it is PENDING.
    pub fn pending_at(&self, slot: usize) -> Result<Option<FillJob>, Error> {
        let word = self.words.load(self.slot_word(slot)?)?;
        let s = decode(word)?;
        Ok((s.state == PENDING).then_some(FillJob {
            slot,
            tag: s.tag,
            owner: s.owner,
            word,
        }))
    }

    /// The page of `job` is in its slot's data: make it VALID. Returns
    /// false if the slot was reclaimed meanwhile (the fill is dropped).
    /// The data's stores must be ordered before this call (the CAS is a
    /// full barrier on x86).
    pub fn publish(&self, job: &FillJob) -> Result<bool, Error> {
        self.words.fetch_or(self.aux_word(job.slot)?, AUX_REF)?;
        let valid = make(VALID, job.tag, 0);
        Ok(self
            .words
            .cas(self.slot_word(job.slot)?, job.word, valid)?
            .is_ok())
    }

    /// The page of `job` could not be read: give the slot back (its
    /// waiters restart and claim again).
    pub fn abort_fill(&self, job: &FillJob) -> Result<bool, Error> {
        Ok(self
            .words
            .cas(self.slot_word(job.slot)?, job.word, FREE)?
            .is_ok())
    }

    /// Drops the cached copies of `tag` (a write made them stale): a VALID
    /// slot with the tag and no pin goes FREE; a pinned one is retired
    /// (its tag becomes [`RETIRED_TAG`]: no lookup finds it, its last
    /// unpin frees it). A CLAIMED or PENDING slot stays: its fill is
    /// ordered after the write by the filler. Only the tag's probe window
    /// is looked at: a tag is never cached outside it.
    pub fn invalidate(&self, tag: Tag) -> Result<Invalidated, Error> {
        let home = self.home(tag);
        let mut out = Invalidated::default();
        for i in 0..PROBE_LEN {
            let slot = (home + i) & self.mask();
            self.invalidate_slot(slot, |t| t == tag, &mut out)?;
        }
        Ok(out)
    }

    /// Frees `slot` if it still caches `tag` and no reader has it pinned
    /// (a participant giving back the pages it brought in: `cache drop`).
    /// A pinned copy stays, valid: unlike [`PageCache::invalidate`] it is
    /// not stale, only no longer wanted by this participant.
    pub fn drop_copy(&self, slot: usize, tag: Tag) -> Result<Dropped, Error> {
        let sw = self.slot_word(slot)?;
        loop {
            let w = self.words.load(sw)?;
            let s = decode(w)?;
            if s.state != VALID || s.tag != tag {
                return Ok(Dropped::Gone);
            }
            if s.refs > 0 {
                return Ok(Dropped::Pinned);
            }
            if self.words.cas(sw, w, FREE)?.is_ok() {
                return Ok(Dropped::Freed);
            }
        }
    }

    /// [`PageCache::invalidate`] of every cached tag `stale` accepts, by a
    /// scan of every slot (a truncation or an unlink).
    pub fn invalidate_where(&self, stale: impl Fn(Tag) -> bool) -> Result<Invalidated, Error> {
        let mut out = Invalidated::default();
        for slot in 0..self.slots {
            self.invalidate_slot(slot, &stale, &mut out)?;
        }
        Ok(out)
    }

    fn invalidate_slot(
        &self,
        slot: usize,
        stale: impl Fn(Tag) -> bool,
        out: &mut Invalidated,
    ) -> Result<(), Error> {
        let sw = self.slot_word(slot)?;
        loop {
            let w = self.words.load(sw)?;
            let s = decode(w)?;
            if s.state != VALID || !stale(s.tag) {
                return Ok(());
            }
            if s.refs > 0 {
                let retired = (w & !(TAG_MASK << TAG_SHIFT)) | (RETIRED_TAG << TAG_SHIFT);
                if self.words.cas(sw, w, retired)?.is_ok() {
                    out.retired += 1;
                    return Ok(());
                }
                continue;
            }
            if self.words.cas(sw, w, FREE)?.is_ok() {
                out.freed += 1;
                return Ok(());
            }
        }
    }

    /// The filler filled one more page (a counter in the header that
    /// every participant can read, for statistics; one filler writes it).
    pub fn count_fill(&self) -> Result<u64, Error> {
        let w = self.base + FILLS_WORD;
        loop {
            let old = self.words.load(w)?;
            if self.words.cas(w, old, old.wrapping_add(1))?.is_ok() {
                return Ok(old.wrapping_add(1));
            }
        }
    }

    /// Pages filled so far ([`PageCache::count_fill`]).
    pub fn fills(&self) -> Result<u64, Error> {
        self.words.load(self.base + FILLS_WORD)
    }

    /// The shared `evict_hand` (untrusted: reduced to a slot).
    pub fn evict_hand(&self) -> Result<usize, Error> {
        Ok((self.words.load(self.base + HAND_WORD)? as usize) & self.mask())
    }

    /// MH-clock's background sweep: advance `evict_hand` by
    /// [`SWEEP_BATCH`] slots by CAS; the winner clears the reference bits
    /// of the VALID slots in the window it advanced over. Returns whether
    /// this caller won.
    pub fn sweep(&self) -> Result<bool, Error> {
        let hand_word = self.base + HAND_WORD;
        let old = self.words.load(hand_word)?;
        let batch = SWEEP_BATCH.min(self.slots);
        // The hand is untrusted: reduce it to a slot before using it.
        let start = (old as usize) & self.mask();
        let new = ((start + batch) & self.mask()) as u64;
        if self.words.cas(hand_word, old, new)?.is_err() {
            return Ok(false);
        }
        for i in 0..batch {
            let slot = (start + i) & self.mask();
            if self.slot(slot)?.state == VALID {
                self.words.fetch_and(self.aux_word(slot)?, !AUX_REF)?;
            }
        }
        Ok(true)
    }

    /// Gives back what a failed participant held: its CLAIMED and PENDING
    /// slots go FREE, its HELD pins are released, its records are cleared.
    /// The participant must be fenced first (see the module doc).
    pub fn reclaim_owner(&self, owner: u8) -> Result<Reclaimed, Error> {
        if usize::from(owner) >= MAX_OWNERS {
            return Err(Error::OutOfBounds);
        }
        let mut out = Reclaimed::default();
        for slot in 0..self.slots {
            let sw = self.slot_word(slot)?;
            let w = self.words.load(sw)?;
            let s = decode(w)?;
            if (s.state == CLAIMED || s.state == PENDING)
                && s.owner == owner
                && self.words.cas(sw, w, FREE)?.is_ok()
            {
                out.claims += 1;
            }
        }
        for rec in 0..PINS_PER_OWNER as u8 {
            let r = self.rec_word(owner, rec)?;
            let v = self.words.load(r)?;
            if v == 0 {
                continue;
            }
            let kind = v >> REC_KIND_SHIFT;
            let slot = (v & REC_SLOT_MASK) as usize;
            if slot >= self.slots {
                return Err(Error::Corrupt);
            }
            if kind == REC_HELD {
                let sw = self.slot_word(slot)?;
                loop {
                    let w = self.words.load(sw)?;
                    let s = decode(w)?;
                    if s.state != VALID || s.refs == 0 {
                        return Err(Error::Corrupt);
                    }
                    if self.words.cas(sw, w, unpinned(w, s))?.is_ok() {
                        break;
                    }
                }
                out.pins += 1;
            } else {
                out.uncertain += 1;
            }
            self.words.store(r, 0)?;
        }
        Ok(out)
    }
}

mod lookup;
pub use lookup::LookupOp;

#[cfg(test)]
mod tests;
