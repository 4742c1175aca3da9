//! The overlay's racing protocols as step machines: one shared-memory
//! operation per step (a load, a store or a CAS of one word), so that the
//! interleaving tests run every order of two or three participants'
//! steps. The blocking calls of [`Overlay`] just run them.
//!
//! Two steps do more than one operation: taking a pool entry
//! (`Overlay::alloc`, a pop of the free list or a bump) and giving one
//! back (`Overlay::push_free`) are one step each, their own CAS loops
//! being retried inside the step. Their effect on the protocols (an entry
//! reused while a slow participant still copies it) is interleaved; the
//! free list's own races are checked by the stress tests.

use super::{Inserted, Key, Kind, Overlay, Value, I_APPEND, I_SIZE, MAX_RETRIES, USED};
use crate::{Error, Step, Words};

/// Where an insert is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    /// Read probe bucket `i`'s state key.
    Probe { i: usize },
    /// CAS it from FREE to our key.
    Claim { i: usize },
    /// Read the key's value; publish ours by CAS if it is unpublished.
    Publish { b: usize },
}

/// One insert as a step machine (one shared operation per step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InsertOp {
    key: Key,
    value: u64,
    home: usize,
    pub(super) phase: Phase,
}

impl InsertOp {
    pub fn new<W: Words + ?Sized>(
        ov: &Overlay<'_, W>,
        key: Key,
        off: usize,
    ) -> Result<Self, Error> {
        let off = ov.entry(off, key.kind())?;
        Ok(InsertOp {
            key,
            value: Value { off, version: 0 }.encode(),
            home: ov.home(key),
            phase: Phase::Probe { i: 0 },
        })
    }

    pub fn step<W: Words + ?Sized>(
        &mut self,
        ov: &Overlay<'_, W>,
    ) -> Result<Step<Inserted>, Error> {
        let w = ov.words;
        let mask = ov.buckets - 1;
        let want = (self.key.0 << 1) | USED;
        match self.phase {
            Phase::Probe { i } => {
                if i >= ov.buckets {
                    return Ok(Step::Done(Inserted::Full));
                }
                let b = (self.home + i) & mask;
                let sk = w.load(ov.bucket_word(b)?)?;
                self.phase = if sk == 0 {
                    Phase::Claim { i }
                } else if sk == want {
                    Phase::Publish { b }
                } else {
                    Phase::Probe { i: i + 1 }
                };
                Ok(Step::Again)
            }
            Phase::Claim { i } => {
                let b = (self.home + i) & mask;
                // On failure re-read the same bucket: it may now hold our key.
                self.phase = match w.cas(ov.bucket_word(b)?, 0, want)? {
                    Ok(_) => Phase::Publish { b },
                    Err(_) => Phase::Probe { i },
                };
                Ok(Step::Again)
            }
            Phase::Publish { b } => {
                let vw = ov.bucket_word(b)? + 1;
                let v = w.load(vw)?;
                if v != 0 {
                    ov.decode(v, self.key.kind())?;
                    return Ok(Step::Done(Inserted::Existing {
                        bucket: b,
                        value: v,
                    }));
                }
                if w.cas(vw, 0, self.value)?.is_ok() {
                    return Ok(Step::Done(Inserted::New { bucket: b }));
                }
                Ok(Step::Again)
            }
        }
    }
}

/// A lookup of a key's published value, a step at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Find {
    /// Read probe bucket `i`'s state key.
    Probe { i: usize },
    /// Read bucket `b`'s value.
    Value { b: usize },
}

/// What one step of a [`Find`] came to.
enum Found {
    Again(Find),
    /// The key's bucket and published value, or `None`: absent or not
    /// yet published (reads as absent).
    Done(Option<(usize, Value)>),
}

impl Find {
    fn step<W: Words + ?Sized>(self, ov: &Overlay<'_, W>, key: Key) -> Result<Found, Error> {
        match self {
            Find::Probe { i } => {
                if i >= ov.buckets {
                    return Ok(Found::Done(None));
                }
                let b = (ov.home(key) + i) & (ov.buckets - 1);
                let sk = ov.words.load(ov.bucket_word(b)?)?;
                Ok(if sk == 0 {
                    Found::Done(None)
                } else if sk == (key.0 << 1) | USED {
                    Found::Again(Find::Value { b })
                } else {
                    Found::Again(Find::Probe { i: i + 1 })
                })
            }
            Find::Value { b } => {
                let v = ov.words.load(ov.bucket_word(b)? + 1)?;
                if v == 0 {
                    return Ok(Found::Done(None));
                }
                Ok(Found::Done(Some((b, ov.decode(v, key.kind())?))))
            }
        }
    }
}

fn page_buf<W: Words + ?Sized>(ov: &Overlay<'_, W>, buf: &[u64]) -> Result<(), Error> {
    if buf.len() != ov.page_words {
        return Err(Error::OutOfBounds);
    }
    Ok(())
}

/// Where a validated page read is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RPhase {
    Find(Find),
    /// Copy word `k` of the page `cur` names.
    Copy {
        k: usize,
    },
    /// Re-read the value: unchanged, the copy is one whole version.
    Check,
}

/// A read of one page ([`Overlay::read_page`]) as a step machine: find
/// the key's value, copy the page a word per step, then check the value
/// did not change (a write replaced the page and may have recycled it
/// meanwhile); if it did, start over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadOp {
    key: Key,
    phase: RPhase,
    cur: Option<(usize, Value)>,
    tries: u32,
}

impl ReadOp {
    pub fn new<W: Words + ?Sized>(
        ov: &Overlay<'_, W>,
        key: Key,
        buf: &[u64],
    ) -> Result<Self, Error> {
        page_buf(ov, buf)?;
        Ok(ReadOp {
            key,
            phase: RPhase::Find(Find::Probe { i: 0 }),
            cur: None,
            tries: 0,
        })
    }

    /// One step; `Done(false)`: the overlay has no such page; `Done(true)`:
    /// `buf` holds one whole version of it.
    pub fn step<W: Words + ?Sized>(
        &mut self,
        ov: &Overlay<'_, W>,
        buf: &mut [u64],
    ) -> Result<Step<bool>, Error> {
        page_buf(ov, buf)?;
        match self.phase {
            RPhase::Find(f) => match f.step(ov, self.key)? {
                Found::Again(f) => self.phase = RPhase::Find(f),
                Found::Done(None) => return Ok(Step::Done(false)),
                Found::Done(Some(c)) => {
                    self.cur = Some(c);
                    self.phase = RPhase::Copy { k: 0 };
                }
            },
            RPhase::Copy { k } => {
                let (_, v) = self.cur.ok_or(Error::Corrupt)?;
                buf[k] = ov.words.load(ov.pool_word(v.off)? + k)?;
                self.phase = if k + 1 == buf.len() {
                    RPhase::Check
                } else {
                    RPhase::Copy { k: k + 1 }
                };
            }
            RPhase::Check => {
                let (b, v) = self.cur.ok_or(Error::Corrupt)?;
                if ov.words.load(ov.bucket_word(b)? + 1)? == v.encode() {
                    return Ok(Step::Done(true));
                }
                self.tries += 1;
                if self.tries >= MAX_RETRIES {
                    return Err(Error::Busy);
                }
                self.phase = RPhase::Find(Find::Probe { i: 0 });
            }
        }
        Ok(Step::Again)
    }
}

/// How an update ends once its spare page is given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Outcome {
    Installed,
    NoSpace,
    Busy,
}

/// Where a copy-on-write page write is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum UPhase {
    /// Take a pool page for the new version.
    Alloc,
    Find(Find),
    /// Copy word `k` of the current version (`cur`).
    Copy {
        k: usize,
    },
    /// Store word `k` of the new version into our page.
    Store {
        k: usize,
    },
    /// CAS the value from the version we copied to ours.
    Install,
    /// The key had no published value: insert ours.
    Insert(InsertOp),
    /// Give page `off` back (the version we replaced, or our unused page),
    /// then end.
    Free {
        off: usize,
        then: Outcome,
    },
}

/// A write of one page ([`Overlay::update_page`]) as a step machine:
/// take a page, find the key's current version, copy it (or fill it from
/// `base` when the overlay has none), apply `change`, store the result
/// into our page, install it by CAS on the value copied from (or insert
/// it), and give the replaced version back. A lost CAS starts again from
/// the find with the same page, so every change is applied to the latest
/// version: concurrent writers of one page lose no update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UpdateOp {
    key: Key,
    phase: UPhase,
    new: usize,
    cur: Option<(usize, Value)>,
    tries: u32,
}

impl UpdateOp {
    pub fn new<W: Words + ?Sized>(
        ov: &Overlay<'_, W>,
        key: Key,
        buf: &[u64],
    ) -> Result<Self, Error> {
        page_buf(ov, buf)?;
        if key.kind() != Kind::Data {
            return Err(Error::TooBig);
        }
        Ok(UpdateOp {
            key,
            phase: UPhase::Alloc,
            new: 0,
            cur: None,
            tries: 0,
        })
    }

    /// A lost race: look again, unless it has been lost too often.
    fn again(&mut self) {
        self.tries += 1;
        self.phase = if self.tries >= MAX_RETRIES {
            UPhase::Free {
                off: self.new,
                then: Outcome::Busy,
            }
        } else {
            UPhase::Find(Find::Probe { i: 0 })
        };
    }

    pub fn step<W: Words + ?Sized>(
        &mut self,
        ov: &Overlay<'_, W>,
        buf: &mut [u64],
        base: &mut dyn FnMut(&mut [u64]),
        change: &mut dyn FnMut(&mut [u64]),
    ) -> Result<Step<()>, Error> {
        page_buf(ov, buf)?;
        match self.phase {
            UPhase::Alloc => {
                self.new = ov.alloc(Kind::Data)?;
                self.phase = UPhase::Find(Find::Probe { i: 0 });
            }
            UPhase::Find(f) => match f.step(ov, self.key)? {
                Found::Again(f) => self.phase = UPhase::Find(f),
                Found::Done(None) => {
                    self.cur = None;
                    base(buf);
                    change(buf);
                    self.phase = UPhase::Store { k: 0 };
                }
                Found::Done(Some(c)) => {
                    self.cur = Some(c);
                    self.phase = UPhase::Copy { k: 0 };
                }
            },
            UPhase::Copy { k } => {
                let (_, v) = self.cur.ok_or(Error::Corrupt)?;
                buf[k] = ov.words.load(ov.pool_word(v.off)? + k)?;
                self.phase = if k + 1 == buf.len() {
                    change(buf);
                    UPhase::Store { k: 0 }
                } else {
                    UPhase::Copy { k: k + 1 }
                };
            }
            UPhase::Store { k } => {
                ov.words.store(ov.pool_word(self.new)? + k, buf[k])?;
                self.phase = if k + 1 < buf.len() {
                    UPhase::Store { k: k + 1 }
                } else if self.cur.is_some() {
                    UPhase::Install
                } else {
                    UPhase::Insert(InsertOp::new(ov, self.key, self.new)?)
                };
            }
            UPhase::Install => {
                let (b, v) = self.cur.ok_or(Error::Corrupt)?;
                let vw = ov.bucket_word(b)? + 1;
                match ov.words.cas(vw, v.encode(), v.next(self.new).encode())? {
                    // Readers copying the old page see the value change.
                    Ok(_) => {
                        self.phase = UPhase::Free {
                            off: v.off,
                            then: Outcome::Installed,
                        }
                    }
                    Err(_) => self.again(),
                }
            }
            UPhase::Insert(mut op) => match op.step(ov)? {
                Step::Again | Step::Blocked => self.phase = UPhase::Insert(op),
                Step::Done(Inserted::New { .. }) => return Ok(Step::Done(())),
                Step::Done(Inserted::Existing { .. }) => self.again(),
                Step::Done(Inserted::Full) => {
                    self.phase = UPhase::Free {
                        off: self.new,
                        then: Outcome::NoSpace,
                    }
                }
            },
            UPhase::Free { off, then } => {
                ov.push_free(off, Kind::Data)?;
                return match then {
                    Outcome::Installed => Ok(Step::Done(())),
                    Outcome::NoSpace => Err(Error::NoSpace),
                    Outcome::Busy => Err(Error::Busy),
                };
            }
        }
        Ok(Step::Again)
    }
}

/// The words of an inode's size and append reservation end.
fn size_words<W: Words + ?Sized>(ov: &Overlay<'_, W>, ino: u64) -> Result<(usize, usize), Error> {
    let sw = ov.inode_word(ino, I_SIZE)?.ok_or(Error::NoInode)?;
    Ok((sw, sw - I_SIZE + I_APPEND))
}

/// Where an append's reservation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum RsPhase {
    /// Read the reservation end.
    LoadEnd,
    /// Read the size (a plain write may have grown the file past the
    /// reservations).
    LoadSize { a: u64 },
    /// CAS the reservation end from `a` to `start + len`.
    Cas { a: u64, start: u64 },
}

/// An append's reservation ([`Overlay::reserve_append`]) as a step machine.
/// The inode entry is found when the machine is made (inode entries are
/// never replaced, so its words stay the file's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReserveOp {
    size_w: usize,
    append_w: usize,
    len: u64,
    phase: RsPhase,
}

impl ReserveOp {
    pub fn new<W: Words + ?Sized>(ov: &Overlay<'_, W>, ino: u64, len: u64) -> Result<Self, Error> {
        let (size_w, append_w) = size_words(ov, ino)?;
        Ok(ReserveOp {
            size_w,
            append_w,
            len,
            phase: RsPhase::LoadEnd,
        })
    }

    /// One step; `Done(start)`: bytes `[start, start + len)` are ours.
    pub fn step<W: Words + ?Sized>(&mut self, ov: &Overlay<'_, W>) -> Result<Step<u64>, Error> {
        match self.phase {
            RsPhase::LoadEnd => {
                let a = ov.words.load(self.append_w)?;
                self.phase = RsPhase::LoadSize { a };
            }
            RsPhase::LoadSize { a } => {
                let start = a.max(ov.words.load(self.size_w)?);
                start.checked_add(self.len).ok_or(Error::TooBig)?;
                self.phase = RsPhase::Cas { a, start };
            }
            RsPhase::Cas { a, start } => {
                let end = start + self.len;
                if ov.words.cas(self.append_w, a, end)?.is_ok() {
                    return Ok(Step::Done(start));
                }
                self.phase = RsPhase::LoadEnd;
            }
        }
        Ok(Step::Again)
    }
}

/// Where an append's publication is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum PbPhase {
    /// Read the size.
    Load,
    /// CAS it from `s` to the append's end.
    Cas { s: u64 },
}

/// An append's publication ([`Overlay::publish_append`]) as a step
/// machine: the size moves to the append's end once it has reached the
/// append's start (every earlier reservation published); until then the
/// step is `Blocked`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PublishOp {
    size_w: usize,
    start: u64,
    end: u64,
    phase: PbPhase,
}

impl PublishOp {
    pub fn new<W: Words + ?Sized>(
        ov: &Overlay<'_, W>,
        ino: u64,
        start: u64,
        len: u64,
    ) -> Result<Self, Error> {
        let (size_w, _) = size_words(ov, ino)?;
        Ok(PublishOp {
            size_w,
            start,
            end: start.checked_add(len).ok_or(Error::TooBig)?,
            phase: PbPhase::Load,
        })
    }

    pub fn step<W: Words + ?Sized>(&mut self, ov: &Overlay<'_, W>) -> Result<Step<()>, Error> {
        match self.phase {
            PbPhase::Load => {
                let s = ov.words.load(self.size_w)?;
                if s >= self.end {
                    return Ok(Step::Done(()));
                }
                if s < self.start {
                    return Ok(Step::Blocked);
                }
                self.phase = PbPhase::Cas { s };
            }
            PbPhase::Cas { s } => {
                if ov.words.cas(self.size_w, s, self.end)?.is_ok() {
                    return Ok(Step::Done(()));
                }
                self.phase = PbPhase::Load;
            }
        }
        Ok(Step::Again)
    }
}
