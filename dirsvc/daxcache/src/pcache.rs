//! DaxFS's shared slot page cache and its MH-clock eviction.
//!
//! # Layout (in words, from the area's base)
//!
//! * header, [`HEADER_WORDS`]: magic, slot count, `evict_hand`;
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
        Ok(Tag((ino << 20) | pgoff))
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
            if self.words.cas(sw, w, w - REF_INC)?.is_ok() {
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

    /// MH-clock's background sweep: advance `evict_hand` by
    /// [`SWEEP_BATCH`] slots by CAS; the winner clears the reference bits
    /// of the VALID slots in the window it advanced over. Returns whether
    /// this caller won.
    pub fn sweep(&self) -> Result<bool, Error> {
        let hand_word = self.base + 2;
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
                    if self.words.cas(sw, w, w - REF_INC)?.is_ok() {
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

/// Where a lookup is (its local state between two shared operations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Read the home slot's claim sequence.
    Start,
    /// Read probe slot `i`.
    Probe { i: u8, seq: u32, free: Option<u8> },
    /// Record the intent to pin `idx` (slot word `word`).
    PinIntent { idx: usize, word: u64 },
    /// CAS the refcount up.
    Pin { idx: usize, word: u64 },
    /// Record the pin as held.
    PinHeld { idx: usize },
    /// Clear the intent after a failed pin CAS, then re-wait on `idx`.
    PinAbort { idx: usize },
    /// Read the reference bit.
    Touch { idx: usize },
    /// Set it.
    TouchSet { idx: usize },
    /// Wait for a CLAIMED or PENDING slot with our tag.
    Wait { idx: usize },
    /// CAS a FREE slot to CLAIMED.
    Claim { idx: usize, seq: u32 },
    /// CAS the home claim sequence forward (it must still be `seq`).
    Validate { idx: usize, seq: u32 },
    /// Validation failed: CAS our CLAIMED slot back to FREE.
    Undo { idx: usize },
    /// CAS our CLAIMED slot to PENDING.
    Confirm { idx: usize },
    /// MH-clock: read window slot `i` (pass 0: cold scan, 1: rescan).
    Cold { i: u8, pass: u8 },
    /// Read its reference bit.
    ColdRef { i: u8, pass: u8, word: u64 },
    /// Evict it.
    ColdEvict { i: u8, pass: u8, word: u64 },
    /// Clear window slot `i`'s reference bit.
    Clear { i: u8 },
    /// Yield once between the clear and the rescan.
    Yield,
    /// Read window slot `i` for a forced eviction.
    Force { i: u8 },
    /// Evict it.
    ForceEvict { i: u8, word: u64 },
    /// Nothing evictable in the window: wait once, then restart.
    Full,
}

/// One lookup as a step machine: each [`LookupOp::step`] does at most one
/// shared-memory operation. `Clone + Eq + Hash` so that the interleaving
/// tests can memoize states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LookupOp {
    tag: Tag,
    owner: u8,
    rec: u8,
    home: usize,
    restarts: u32,
    phase: Phase,
}

impl LookupOp {
    pub fn new<W: Words + ?Sized>(
        pc: &PageCache<'_, W>,
        tag: Tag,
        owner: u8,
        rec: u8,
    ) -> Result<Self, Error> {
        // Checks owner and rec once, so that no step fails on them.
        pc.rec_word(owner, rec)?;
        Ok(LookupOp {
            tag,
            owner,
            rec,
            home: pc.home(tag),
            restarts: 0,
            phase: Phase::Start,
        })
    }

    fn restart(&mut self) -> Result<Step<Lookup>, Error> {
        self.restarts += 1;
        if self.restarts > MAX_RESTARTS {
            return Err(Error::Busy);
        }
        self.phase = Phase::Start;
        Ok(Step::Again)
    }

    fn timeout<W: Words + ?Sized>(&self, pc: &PageCache<'_, W>) -> Error {
        match self.phase {
            Phase::Wait { idx } => Error::Timeout {
                slot: idx,
                owner: pc.slot(idx).map(|s| s.owner).unwrap_or(u8::MAX),
            },
            _ => Error::Busy,
        }
    }

    fn window(&self, mask: usize, i: u8) -> usize {
        (self.home + usize::from(i)) & mask
    }

    fn go(&mut self, p: Phase) -> Result<Step<Lookup>, Error> {
        self.phase = p;
        Ok(Step::Again)
    }

    /// One shared-memory operation of the lookup.
    pub fn step<W: Words + ?Sized>(
        &mut self,
        pc: &PageCache<'_, W>,
    ) -> Result<Step<Lookup>, Error> {
        let w = pc.words;
        let mask = pc.mask();
        let rec = pc.rec_word(self.owner, self.rec)?;
        match self.phase {
            Phase::Start => {
                let seq = (w.load(pc.aux_word(self.home)?)? >> AUX_SEQ_SHIFT) as u32;
                self.go(Phase::Probe {
                    i: 0,
                    seq,
                    free: None,
                })
            }
            Phase::Probe { i, seq, free } => {
                let idx = self.window(mask, i);
                let word = w.load(pc.slot_word(idx)?)?;
                let s = decode(word)?;
                let mut free = free;
                if s.tag == self.tag && s.state == VALID {
                    return self.go(Phase::PinIntent { idx, word });
                }
                if s.tag == self.tag && (s.state == PENDING || s.state == CLAIMED) {
                    return self.go(Phase::Wait { idx });
                }
                if s.state == FREE && free.is_none() {
                    free = Some(i);
                }
                if usize::from(i) + 1 < PROBE_LEN {
                    return self.go(Phase::Probe {
                        i: i + 1,
                        seq,
                        free,
                    });
                }
                match free {
                    Some(f) => self.go(Phase::Claim {
                        idx: self.window(mask, f),
                        seq,
                    }),
                    None => self.go(Phase::Cold { i: 0, pass: 0 }),
                }
            }
            Phase::PinIntent { idx, word } => {
                if decode(word)?.refs >= REF_MAX {
                    self.phase = Phase::Wait { idx };
                    return Ok(Step::Blocked);
                }
                w.store(rec, (REC_INTENT << REC_KIND_SHIFT) | idx as u64)?;
                self.go(Phase::Pin { idx, word })
            }
            Phase::Pin { idx, word } => {
                if w.cas(pc.slot_word(idx)?, word, word + REF_INC)?.is_ok() {
                    self.go(Phase::PinHeld { idx })
                } else {
                    self.go(Phase::PinAbort { idx })
                }
            }
            Phase::PinHeld { idx } => {
                w.store(rec, (REC_HELD << REC_KIND_SHIFT) | idx as u64)?;
                self.go(Phase::Touch { idx })
            }
            Phase::PinAbort { idx } => {
                w.store(rec, 0)?;
                self.go(Phase::Wait { idx })
            }
            Phase::Touch { idx } => {
                if w.load(pc.aux_word(idx)?)? & AUX_REF != 0 {
                    return Ok(Step::Done(Lookup::Hit(idx)));
                }
                self.go(Phase::TouchSet { idx })
            }
            Phase::TouchSet { idx } => {
                w.fetch_or(pc.aux_word(idx)?, AUX_REF)?;
                Ok(Step::Done(Lookup::Hit(idx)))
            }
            Phase::Wait { idx } => {
                let word = w.load(pc.slot_word(idx)?)?;
                let s = decode(word)?;
                if s.tag != self.tag || s.state == FREE {
                    return self.restart();
                }
                if s.state == VALID {
                    return self.go(Phase::PinIntent { idx, word });
                }
                Ok(Step::Blocked)
            }
            Phase::Claim { idx, seq } => {
                let claimed = make(CLAIMED, self.tag, self.owner);
                if w.cas(pc.slot_word(idx)?, FREE, claimed)?.is_ok() {
                    self.go(Phase::Validate { idx, seq })
                } else {
                    self.restart()
                }
            }
            Phase::Validate { idx, seq } => {
                let aux = pc.aux_word(self.home)?;
                let a = w.load(aux)?;
                if (a >> AUX_SEQ_SHIFT) as u32 != seq {
                    return self.go(Phase::Undo { idx });
                }
                if w.cas(aux, a, a.wrapping_add(AUX_SEQ_INC))?.is_ok() {
                    self.go(Phase::Confirm { idx })
                } else {
                    // The reference bit changed under us: read again.
                    self.go(Phase::Validate { idx, seq })
                }
            }
            Phase::Undo { idx } => {
                let claimed = make(CLAIMED, self.tag, self.owner);
                // Fails only if we were reclaimed as failed: nothing to undo.
                let _ = w.cas(pc.slot_word(idx)?, claimed, FREE)?;
                self.restart()
            }
            Phase::Confirm { idx } => {
                let claimed = make(CLAIMED, self.tag, self.owner);
                let pending = make(PENDING, self.tag, self.owner);
                if w.cas(pc.slot_word(idx)?, claimed, pending)?.is_ok() {
                    Ok(Step::Done(Lookup::Miss(idx)))
                } else {
                    self.restart()
                }
            }
            Phase::Cold { i, pass } => {
                let idx = self.window(mask, i);
                let word = w.load(pc.slot_word(idx)?)?;
                let s = decode(word)?;
                if s.state == VALID && s.refs == 0 {
                    return self.go(Phase::ColdRef { i, pass, word });
                }
                self.next_cold(i, pass)
            }
            Phase::ColdRef { i, pass, word } => {
                let idx = self.window(mask, i);
                if w.load(pc.aux_word(idx)?)? & AUX_REF == 0 {
                    return self.go(Phase::ColdEvict { i, pass, word });
                }
                self.next_cold(i, pass)
            }
            Phase::ColdEvict { i, pass, word } => {
                let idx = self.window(mask, i);
                if w.cas(pc.slot_word(idx)?, word, FREE)?.is_ok() {
                    return self.restart();
                }
                self.next_cold(i, pass)
            }
            Phase::Clear { i } => {
                let idx = self.window(mask, i);
                w.fetch_and(pc.aux_word(idx)?, !AUX_REF)?;
                if usize::from(i) + 1 < PROBE_LEN {
                    return self.go(Phase::Clear { i: i + 1 });
                }
                self.go(Phase::Yield)
            }
            Phase::Yield => {
                // Gives other participants a chance to touch their hot
                // slots again before the rescan (DaxFS's cpu_relax).
                self.phase = Phase::Cold { i: 0, pass: 1 };
                Ok(Step::Blocked)
            }
            Phase::Force { i } => {
                let idx = self.window(mask, i);
                let word = w.load(pc.slot_word(idx)?)?;
                let s = decode(word)?;
                if s.state == VALID && s.refs == 0 {
                    return self.go(Phase::ForceEvict { i, word });
                }
                self.next_force(i)
            }
            Phase::ForceEvict { i, word } => {
                let idx = self.window(mask, i);
                if w.cas(pc.slot_word(idx)?, word, FREE)?.is_ok() {
                    return self.restart();
                }
                self.next_force(i)
            }
            Phase::Full => self.restart(),
        }
    }

    fn next_cold(&mut self, i: u8, pass: u8) -> Result<Step<Lookup>, Error> {
        if usize::from(i) + 1 < PROBE_LEN {
            return self.go(Phase::Cold { i: i + 1, pass });
        }
        if pass == 0 {
            self.go(Phase::Clear { i: 0 })
        } else {
            self.go(Phase::Force { i: 0 })
        }
    }

    fn next_force(&mut self, i: u8) -> Result<Step<Lookup>, Error> {
        if usize::from(i) + 1 < PROBE_LEN {
            return self.go(Phase::Force { i: i + 1 });
        }
        // Every slot of the window is claimed, pending or pinned.
        self.phase = Phase::Full;
        Ok(Step::Blocked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU64;

    fn area(slots: usize) -> Vec<AtomicU64> {
        let n = PageCache::<[AtomicU64]>::words_needed(slots).unwrap();
        (0..n).map(|_| AtomicU64::new(0)).collect()
    }

    fn spin() -> crate::SpinWaiter {
        crate::SpinWaiter { left: 1000 }
    }

    fn fill(pc: &PageCache<'_, [AtomicU64]>, slot: usize) {
        let job = pc.pending_at(slot).unwrap().expect("pending");
        assert!(pc.publish(&job).unwrap());
    }

    #[test]
    fn slot_word_packs_state_refcount_tag_owner() {
        let t = Tag::new(0xFFFF_FFFF, 0xF_FFFF).unwrap();
        let w = make(PENDING, t, 63);
        let s = decode(w).unwrap();
        assert_eq!((s.state, s.refs, s.tag, s.owner), (PENDING, 0, t, 63));
        let v = make(VALID, t, 0) + 3 * REF_INC;
        assert_eq!(decode(v).unwrap().refs, 3);
        assert_eq!(decode(v).unwrap().tag, t);
        assert!(Tag::new(1 << 32, 0).is_err());
        assert!(Tag::new(1, 1 << 20).is_err());
        // Values nobody writes.
        assert_eq!(decode(5 << TAG_SHIFT), Err(Error::Corrupt));
        assert_eq!(decode(make(VALID, t, 1)), Err(Error::Corrupt));
        assert_eq!(decode(make(PENDING, t, 1) | REF_INC), Err(Error::Corrupt));
    }

    #[test]
    fn page_n_of_every_file_does_not_share_one_window() {
        // With DaxFS's home (`tag & mask`) page 0 of every file starts at
        // slot 0: 64 files' first pages would fight over 8 slots.
        let a = area(1024);
        let pc = PageCache::format(&a[..], 0, 1024).unwrap();
        let mut homes: Vec<usize> = (1..=64)
            .map(|ino| pc.home(Tag::new(ino, 0).unwrap()))
            .collect();
        homes.sort();
        homes.dedup();
        assert!(homes.len() > 48, "{} homes", homes.len());
        for ino in 1..=64 {
            let Lookup::Miss(s) = pc
                .lookup(Tag::new(ino, 0).unwrap(), 0, 0, &mut spin())
                .unwrap()
            else {
                panic!()
            };
            fill(&pc, s);
        }
        // No eviction was needed: all 64 first pages are cached.
        let valid = (0..1024)
            .filter(|&s| pc.slot(s).unwrap().state == VALID)
            .count();
        assert_eq!(valid, 64);
    }

    #[test]
    fn header_is_checked_on_attach() {
        let a = area(64);
        assert_eq!(
            PageCache::attach(&a[..], 0, 64).err(),
            Some(Error::BadHeader)
        );
        PageCache::format(&a[..], 0, 64).unwrap();
        assert!(PageCache::attach(&a[..], 0, 64).is_ok());
        assert_eq!(
            PageCache::attach(&a[..], 0, 32).err(),
            Some(Error::BadHeader)
        );
        assert_eq!(
            PageCache::attach(&a[..], 1, 64).err(),
            Some(Error::OutOfBounds)
        );
        assert_eq!(
            PageCache::format(&a[..], 0, 48).err(),
            Some(Error::BadHeader)
        );
    }

    #[test]
    fn miss_fill_hit_unpin() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let t = Tag::new(7, 3).unwrap();
        let Lookup::Miss(s) = pc.lookup(t, 1, 0, &mut spin()).unwrap() else {
            panic!("expected a miss")
        };
        assert_eq!(pc.slot(s).unwrap().state, PENDING);
        assert_eq!(pc.slot(s).unwrap().owner, 1);
        // Another participant waits, and times out with the slot and owner.
        assert_eq!(
            pc.lookup(t, 2, 0, &mut crate::SpinWaiter { left: 3 }),
            Err(Error::Timeout { slot: s, owner: 1 })
        );
        fill(&pc, s);
        assert_eq!(pc.lookup(t, 2, 0, &mut spin()), Ok(Lookup::Hit(s)));
        assert_eq!(pc.lookup(t, 1, 0, &mut spin()), Ok(Lookup::Hit(s)));
        assert_eq!(pc.slot(s).unwrap().refs, 2);
        assert!(pc.referenced(s).unwrap());
        pc.unpin(2, 0, s).unwrap();
        pc.unpin(1, 0, s).unwrap();
        assert_eq!(pc.unpin(1, 0, s), Err(Error::NotPinned));
        assert_eq!(pc.slot(s).unwrap().refs, 0);
    }

    #[test]
    fn a_failed_fill_frees_the_slot_and_waiters_claim_again() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let t = Tag::new(1, 1).unwrap();
        let Lookup::Miss(s) = pc.lookup(t, 0, 0, &mut spin()).unwrap() else {
            panic!()
        };
        let job = pc.pending_at(s).unwrap().unwrap();
        assert!(pc.abort_fill(&job).unwrap());
        assert_eq!(pc.slot(s).unwrap().state, FREE);
        assert!(matches!(
            pc.lookup(t, 1, 0, &mut spin()),
            Ok(Lookup::Miss(_))
        ));
        // A stale job (its slot changed) does not publish.
        assert!(!pc.publish(&job).unwrap());
    }

    #[test]
    fn the_pin_limit_waits_instead_of_overflowing() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let t = Tag::new(1, 1).unwrap();
        let Lookup::Miss(s) = pc.lookup(t, 0, 0, &mut spin()).unwrap() else {
            panic!()
        };
        fill(&pc, s);
        for rec in 0..15 {
            assert_eq!(pc.lookup(t, 0, rec, &mut spin()), Ok(Lookup::Hit(s)));
        }
        assert_eq!(pc.slot(s).unwrap().refs, 15);
        assert!(pc
            .lookup(t, 1, 0, &mut crate::SpinWaiter { left: 5 })
            .is_err());
        assert_eq!(pc.slot(s).unwrap().refs, 15);
        pc.unpin(0, 3, s).unwrap();
        assert_eq!(pc.lookup(t, 1, 0, &mut spin()), Ok(Lookup::Hit(s)));
    }

    /// Tags whose home is `home`, found by search (the hash is fixed).
    fn tags_with_home(pc: &PageCache<'_, [AtomicU64]>, home: usize, n: usize) -> Vec<Tag> {
        (0..)
            .map(|p| Tag::new(9, p).unwrap())
            .filter(|t| pc.home(*t) == home)
            .take(n)
            .collect()
    }

    fn cached(pc: &PageCache<'_, [AtomicU64]>, t: Tag) -> Option<usize> {
        (0..pc.slots()).find(|&s| {
            let x = pc.slot(s).unwrap();
            x.state == VALID && x.tag == t
        })
    }

    fn load_and_release(pc: &PageCache<'_, [AtomicU64]>, t: Tag) -> usize {
        let s = match pc.lookup(t, 0, 0, &mut spin()).unwrap() {
            Lookup::Miss(s) => {
                fill(pc, s);
                let Lookup::Hit(h) = pc.lookup(t, 0, 0, &mut spin()).unwrap() else {
                    panic!()
                };
                assert_eq!(h, s);
                s
            }
            Lookup::Hit(s) => s,
        };
        pc.unpin(0, 0, s).unwrap();
        s
    }

    #[test]
    fn mh_clock_evicts_the_cold_slot_of_the_window() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let tags = tags_with_home(&pc, 5, 9);
        let slots: Vec<usize> = tags[..8]
            .iter()
            .map(|t| load_and_release(&pc, *t))
            .collect();
        // The window 5..13 is full; all are referenced (publish sets the bit).
        for (i, s) in slots.iter().enumerate() {
            assert_eq!(*s, 5 + i);
            assert!(pc.referenced(*s).unwrap());
        }
        // Cool one slot: the sweep-like clear of its bit makes it the victim.
        a[pc.aux_word(9).unwrap()].fetch_and(!AUX_REF, core::sync::atomic::Ordering::SeqCst);
        let s = load_and_release(&pc, tags[8]);
        assert_eq!(s, 9);
        assert_eq!(cached(&pc, tags[4]), None);
        for t in [0, 1, 2, 3, 5, 6, 7] {
            assert!(cached(&pc, tags[t]).is_some());
        }
    }

    #[test]
    fn mh_clock_all_hot_clears_and_rescans_and_skips_pins() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let tags = tags_with_home(&pc, 60, 9);
        for t in &tags[..8] {
            load_and_release(&pc, *t);
        }
        // Pin the first slot of the window (60): it must survive.
        assert_eq!(pc.lookup(tags[0], 3, 0, &mut spin()), Ok(Lookup::Hit(60)));
        let s = load_and_release(&pc, tags[8]);
        // All hot: bits cleared, the rescan takes the first cold unpinned
        // slot, which is the window's second (61), the window wrapping.
        assert_eq!(s, 61);
        assert!(cached(&pc, tags[0]).is_some());
        for i in 2..8 {
            let idx = (60 + i) & 63;
            assert!(!pc.referenced(idx).unwrap(), "slot {idx}");
        }
    }

    #[test]
    fn a_window_of_pins_and_claims_blocks_then_gives_up() {
        let a = area(8);
        let pc = PageCache::format(&a[..], 0, 8).unwrap();
        let tags = tags_with_home(&pc, 0, 9);
        for (r, t) in tags[..8].iter().enumerate() {
            let Lookup::Miss(_) = pc.lookup(*t, 1, r as u8, &mut spin()).unwrap() else {
                panic!()
            };
        }
        // Eight PENDING slots: nothing to evict.
        assert!(pc
            .lookup(tags[8], 2, 0, &mut crate::SpinWaiter { left: 20 })
            .is_err());
    }

    #[test]
    fn sweep_advances_the_hand_by_cas_and_clears_bits() {
        let a = area(128);
        let pc = PageCache::format(&a[..], 0, 128).unwrap();
        let mut filled = Vec::new();
        for p in 0..40 {
            filled.push(load_and_release(&pc, Tag::new(2, p).unwrap()));
        }
        assert!(pc.sweep().unwrap());
        assert_eq!(a[2].load(core::sync::atomic::Ordering::SeqCst), 64);
        for s in &filled {
            assert_eq!(pc.referenced(*s).unwrap(), *s >= 64, "slot {s}");
        }
        assert!(pc.sweep().unwrap());
        assert_eq!(a[2].load(core::sync::atomic::Ordering::SeqCst), 0);
        for s in &filled {
            assert!(!pc.referenced(*s).unwrap());
        }
        // An untrusted hand is reduced to a slot.
        a[2].store(u64::MAX, core::sync::atomic::Ordering::SeqCst);
        assert!(pc.sweep().unwrap());
        assert_eq!(a[2].load(core::sync::atomic::Ordering::SeqCst), 63);
    }

    #[test]
    fn reclaim_frees_a_failed_owners_claims_and_pins() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let t1 = Tag::new(1, 1).unwrap();
        let t2 = Tag::new(1, 2).unwrap();
        let t3 = Tag::new(1, 3).unwrap();
        // Owner 4 claims t1 (PENDING) and dies; owner 5 waits in vain.
        let Lookup::Miss(s1) = pc.lookup(t1, 4, 0, &mut spin()).unwrap() else {
            panic!()
        };
        // Owner 4 pins t2 twice and dies holding the pins.
        let s2 = load_and_release(&pc, t2);
        assert_eq!(pc.lookup(t2, 4, 1, &mut spin()), Ok(Lookup::Hit(s2)));
        assert_eq!(pc.lookup(t2, 4, 2, &mut spin()), Ok(Lookup::Hit(s2)));
        assert_eq!(pc.lookup(t2, 6, 0, &mut spin()), Ok(Lookup::Hit(s2)));
        // And is caught between intent and pin CAS on t3.
        let s3 = load_and_release(&pc, t3);
        let mut op = LookupOp::new(&pc, t3, 4, 3).unwrap();
        while !matches!(op.phase, Phase::Pin { .. }) {
            assert_eq!(op.step(&pc).unwrap(), Step::Again);
        }
        assert!(matches!(
            pc.lookup(t1, 5, 0, &mut crate::SpinWaiter { left: 3 }),
            Err(Error::Timeout { owner: 4, .. })
        ));
        let r = pc.reclaim_owner(4).unwrap();
        assert_eq!(
            r,
            Reclaimed {
                claims: 1,
                pins: 2,
                uncertain: 1
            }
        );
        assert_eq!(pc.slot(s1).unwrap().state, FREE);
        assert_eq!(pc.slot(s2).unwrap().refs, 1);
        assert_eq!(pc.slot(s3).unwrap().refs, 0);
        // The waiter now claims the page itself.
        assert!(matches!(
            pc.lookup(t1, 5, 0, &mut spin()),
            Ok(Lookup::Miss(_))
        ));
        // Reclaim is idempotent.
        assert_eq!(pc.reclaim_owner(4).unwrap(), Reclaimed::default());
        pc.unpin(6, 0, s2).unwrap();
        assert_eq!(pc.slot(s2).unwrap().refs, 0);
    }

    #[test]
    fn a_claim_that_fails_validation_gives_its_slot_back() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let t = Tag::new(3, 3).unwrap();
        // A scans and claims, but another claim of its home validates first.
        let mut op = LookupOp::new(&pc, t, 1, 0).unwrap();
        while !matches!(op.phase, Phase::Validate { .. }) {
            op.step(&pc).unwrap();
        }
        let Phase::Validate { idx, .. } = op.phase else {
            unreachable!()
        };
        assert_eq!(pc.slot(idx).unwrap().state, CLAIMED);
        a[pc.aux_word(pc.home(t)).unwrap()]
            .fetch_add(AUX_SEQ_INC, core::sync::atomic::Ordering::SeqCst);
        // Undo, restart, and this time the claim validates.
        let got = loop {
            if let Step::Done(l) = op.step(&pc).unwrap() {
                break l;
            }
        };
        assert_eq!(got, Lookup::Miss(idx));
        assert_eq!(op.restarts, 1);
    }

    #[test]
    fn corrupt_slot_words_are_errors_not_panics() {
        let a = area(64);
        let pc = PageCache::format(&a[..], 0, 64).unwrap();
        let t = Tag::new(1, 1).unwrap();
        let home = pc.home(t);
        a[pc.slot_word(home).unwrap()].store(u64::MAX, core::sync::atomic::Ordering::SeqCst);
        assert_eq!(pc.lookup(t, 0, 0, &mut spin()), Err(Error::Corrupt));
        assert_eq!(pc.unpin(0, 0, home), Err(Error::NotPinned));
        assert_eq!(pc.slot(64), Err(Error::OutOfBounds));
        // A pin record naming a slot out of range.
        a[pc.rec_word(7, 0).unwrap()].store(
            (REC_HELD << REC_KIND_SHIFT) | 1000,
            core::sync::atomic::Ordering::SeqCst,
        );
        a[pc.slot_word(home).unwrap()].store(0, core::sync::atomic::Ordering::SeqCst);
        assert_eq!(pc.reclaim_owner(7), Err(Error::Corrupt));
        assert_eq!(pc.reclaim_owner(64), Err(Error::OutOfBounds));
    }
}
