//! One lookup of the slot cache as a step machine (probe, pin, claim,
//! MH-clock eviction), one shared-memory operation per step.

use super::*;

/// Where a lookup is (its local state between two shared operations).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
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
    pub(super) restarts: u32,
    pub(super) phase: Phase,
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

    pub(super) fn timeout<W: Words + ?Sized>(&self, pc: &PageCache<'_, W>) -> Error {
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
        match self.phase {
            Phase::Start | Phase::Probe { .. } => self.probe(pc),
            Phase::PinIntent { .. }
            | Phase::Pin { .. }
            | Phase::PinHeld { .. }
            | Phase::PinAbort { .. }
            | Phase::Touch { .. }
            | Phase::TouchSet { .. } => self.pin(pc),
            Phase::Wait { .. }
            | Phase::Claim { .. }
            | Phase::Validate { .. }
            | Phase::Undo { .. }
            | Phase::Confirm { .. } => self.claim(pc),
            Phase::Cold { .. }
            | Phase::ColdRef { .. }
            | Phase::ColdEvict { .. }
            | Phase::Clear { .. }
            | Phase::Yield
            | Phase::Force { .. }
            | Phase::ForceEvict { .. }
            | Phase::Full => self.evict(pc),
        }
    }

    /// Reads the home slot's claim sequence and probes the window.
    fn probe<W: Words + ?Sized>(&mut self, pc: &PageCache<'_, W>) -> Result<Step<Lookup>, Error> {
        let w = pc.words;
        let mask = pc.mask();
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
            _ => unreachable!("step dispatches only this family's phases"),
        }
    }

    /// Pins a VALID slot with our tag (intent, CAS, held) and touches it.
    fn pin<W: Words + ?Sized>(&mut self, pc: &PageCache<'_, W>) -> Result<Step<Lookup>, Error> {
        let w = pc.words;
        let rec = pc.rec_word(self.owner, self.rec)?;
        match self.phase {
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
            _ => unreachable!("step dispatches only this family's phases"),
        }
    }

    /// Waits for another's claim, or claims a FREE slot, validates and confirms it.
    fn claim<W: Words + ?Sized>(&mut self, pc: &PageCache<'_, W>) -> Result<Step<Lookup>, Error> {
        let w = pc.words;
        match self.phase {
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
            _ => unreachable!("step dispatches only this family's phases"),
        }
    }

    /// MH-clock: a cold victim, else clear and rescan, else force one.
    fn evict<W: Words + ?Sized>(&mut self, pc: &PageCache<'_, W>) -> Result<Step<Lookup>, Error> {
        let w = pc.words;
        let mask = pc.mask();
        match self.phase {
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
            _ => unreachable!("step dispatches only this family's phases"),
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
