//! DaxFS's hash overlay: where writes go.
//!
//! # Layout (in words, from the area's base)
//!
//! * header, [`HEADER_WORDS`]: magic, bucket count, pool size (words), the
//!   bump allocator `pool_alloc` (words), `next_ino`, the free-list heads
//!   of inode entries and data pages;
//! * per bucket two words (DaxFS's 16-byte `daxfs_overlay_bucket`): the
//!   **state key** (bit 0 USED, bits 1-63 the key; 0 = FREE) and the
//!   **value**;
//! * the pool: data pages ([`PAGE_WORDS`], page-aligned, raw data as in
//!   DaxFS's format) and inode entries ([`INODE_WORDS`]).
//!
//! Keys are DaxFS's: data `(ino << 20) | pgoff` with `pgoff` at most
//! [`MAX_PGOFF`], inode `(ino << 20) | 0xFFFFF`.
//!
//! # Protocol, and where it differs from DaxFS
//!
//! An insert probes from the key's home bucket (linear probing) and claims
//! the first FREE bucket with one CAS of its state key, as DaxFS. Then:
//!
//! * **The value is published by CAS, and readers tolerate a bucket whose
//!   value is not yet published.** DaxFS writes the value with a plain
//!   store after the key's CAS, so between the two a reader matching the
//!   key reads value 0 and follows pool offset 0 (another entry). Here the
//!   value word is 0 until published, and a published value has bit 0 set;
//!   a reader that finds the key unpublished treats the page as absent
//!   (the write that creates it has not completed, so reading the old data
//!   is correct), and any inserter of the same key may publish its own
//!   value by CAS from 0. So an inserter that fails between its two CASes
//!   blocks no one, and the entry's content is always written before its
//!   value is visible.
//! * **The home bucket is a hash of the key** ([`crate::hash64`]); DaxFS
//!   masks the raw key.
//! * **Page writes are copy-on-write**, with the value carrying a version:
//!   a writer copies the current page (or the base data) into a new pool
//!   page, applies its change, and installs it by CAS on the value it read;
//!   if the value changed meanwhile it merges again, so concurrent writers
//!   of one page lose no update, and a reader copies the page and checks
//!   the value did not change (else copies again), so it never sees a torn
//!   page. DaxFS writes into the overlay page in place, where a concurrent
//!   reader can see half a write. The replaced page goes to the free list.
//! * **The file size is one word of the inode entry, changed by CAS**:
//!   grow-only for writes ([`Overlay::extend_size`]), and appends reserve
//!   their range first ([`Overlay::reserve_append`]) and publish the new
//!   size in range order ([`Overlay::publish_append`]), so the size never
//!   covers data not yet written and concurrent appends lose nothing.
//!   DaxFS replaces the whole inode entry (copy-on-write of its 32 bytes),
//!   so two hosts extending a file at once can lose one size update.
//! * **Free lists are tagged**: a free-list head carries a counter bumped
//!   by every push and pop, so a pop cannot succeed on a head that was
//!   popped and pushed back meanwhile (the ABA problem of a plain CAS
//!   stack, which DaxFS's has).
//!
//! Every offset read from the region is checked against the pool and its
//! kind's alignment before use.

use crate::{hash64, Error, Step, Waiter, Words};

/// Words of the header.
pub const HEADER_WORDS: usize = 16;
/// Words per bucket (16 bytes, as DaxFS).
pub const BUCKET_WORDS: usize = 2;
/// Words of a data page (4 KiB).
pub const PAGE_WORDS: usize = 512;
/// Words of an inode entry: mode, size, append reservation end, nlink.
pub const INODE_WORDS: usize = 4;
/// Largest page offset of a data key (DaxFS's `DAXFS_OVL_MAX_PGOFF`).
pub const MAX_PGOFF: u64 = 0xF_FFFD;
/// Largest inode number (the key must fit 63 bits).
pub const MAX_INO: u64 = (1 << 43) - 1;
/// Tries of a copy-on-write update or a validated read before [`Error::Busy`].
pub const MAX_RETRIES: u32 = 1000;

/// "daxovrly".
pub const MAGIC: u64 = u64::from_le_bytes(*b"daxovrly");

const H_BUCKETS: usize = 1;
const H_POOL_WORDS: usize = 2;
const H_POOL_ALLOC: usize = 3;
const H_NEXT_INO: usize = 4;
const H_FREE_INODE: usize = 5;
const H_FREE_DATA: usize = 6;
const H_PAGE_WORDS: usize = 7;

const USED: u64 = 1;
const VAL_OFF_SHIFT: u32 = 12;
const VAL_VER_MASK: u64 = 0x7FF;
const HEAD_OFF_BITS: u32 = 44;
const HEAD_OFF_MASK: u64 = (1 << HEAD_OFF_BITS) - 1;

const I_MODE: usize = 0;
const I_SIZE: usize = 1;
const I_APPEND: usize = 2;
const I_NLINK: usize = 3;

/// An overlay key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key(u64);

impl Key {
    /// The key of page `pgoff` of inode `ino`.
    pub fn data(ino: u64, pgoff: u64) -> Result<Key, Error> {
        if ino > MAX_INO || pgoff > MAX_PGOFF {
            return Err(Error::TooBig);
        }
        Ok(Key((ino << 20) | pgoff))
    }
    /// The key of inode `ino`'s entry.
    pub fn inode(ino: u64) -> Result<Key, Error> {
        if ino > MAX_INO {
            return Err(Error::TooBig);
        }
        Ok(Key((ino << 20) | 0xF_FFFF))
    }
    pub fn raw(self) -> u64 {
        self.0
    }
    fn kind(self) -> Kind {
        if self.0 & 0xF_FFFF == 0xF_FFFF {
            Kind::Inode
        } else {
            Kind::Data
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Inode,
    Data,
}

impl Kind {
    fn free_head(self) -> usize {
        match self {
            Kind::Inode => H_FREE_INODE,
            Kind::Data => H_FREE_DATA,
        }
    }
}

/// A published bucket value: the pool offset (words) of the entry and the
/// version of the bucket (bumped by every replacement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    pub off: usize,
    pub version: u16,
}

impl Value {
    fn encode(self) -> u64 {
        ((self.off as u64) << VAL_OFF_SHIFT) | ((u64::from(self.version) & VAL_VER_MASK) << 1) | 1
    }
    fn next(self, off: usize) -> Value {
        Value {
            off,
            version: ((u64::from(self.version) + 1) & VAL_VER_MASK) as u16,
        }
    }
}

/// What an insert found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inserted {
    /// Our value is the key's.
    New { bucket: usize },
    /// The key already had a published value (ours was not used).
    Existing { bucket: usize, value: u64 },
    /// Every bucket holds another key.
    Full,
}

/// A view of the overlay area inside shared words.
pub struct Overlay<'a, W: Words + ?Sized> {
    words: &'a W,
    base: usize,
    buckets: usize,
    pool_words: usize,
    /// Words of a data page: [`PAGE_WORDS`], or fewer for the
    /// interleaving tests ([`Overlay::format_paged`]).
    page_words: usize,
}

impl<'a, W: Words + ?Sized> Overlay<'a, W> {
    /// Words the area needs.
    pub fn words_needed(buckets: usize, pool_words: usize) -> Option<usize> {
        buckets
            .checked_mul(BUCKET_WORDS)?
            .checked_add(HEADER_WORDS)?
            .checked_add(pool_words)
    }

    fn check(
        words: &W,
        base: usize,
        buckets: usize,
        pool_words: usize,
        page_words: usize,
    ) -> Result<(), Error> {
        if !buckets.is_power_of_two()
            || !page_words.is_power_of_two()
            || pool_words >= 1 << HEAD_OFF_BITS
        {
            return Err(Error::BadHeader);
        }
        let end = base
            .checked_add(Self::words_needed(buckets, pool_words).ok_or(Error::OutOfBounds)?)
            .ok_or(Error::OutOfBounds)?;
        if end > words.len() {
            return Err(Error::OutOfBounds);
        }
        Ok(())
    }

    /// Lays out an empty overlay at `base`.
    pub fn format(
        words: &'a W,
        base: usize,
        buckets: usize,
        pool_words: usize,
    ) -> Result<Self, Error> {
        Self::format_paged(words, base, buckets, pool_words, PAGE_WORDS)
    }

    /// [`Overlay::format`] with data pages of `page_words` words (a power
    /// of two): the interleaving tests use pages of a few words, so that
    /// every word of a copy is one step.
    pub fn format_paged(
        words: &'a W,
        base: usize,
        buckets: usize,
        pool_words: usize,
        page_words: usize,
    ) -> Result<Self, Error> {
        Self::check(words, base, buckets, pool_words, page_words)?;
        for i in 0..HEADER_WORDS + buckets * BUCKET_WORDS {
            words.store(base + i, 0)?;
        }
        words.store(base + H_BUCKETS, buckets as u64)?;
        words.store(base + H_POOL_WORDS, pool_words as u64)?;
        words.store(base + H_PAGE_WORDS, page_words as u64)?;
        words.store(base + H_NEXT_INO, 1)?;
        words.store(base, MAGIC)?;
        Ok(Overlay {
            words,
            base,
            buckets,
            pool_words,
            page_words,
        })
    }

    /// Attaches to a formatted overlay whose header must match this
    /// participant's configured geometry.
    pub fn attach(
        words: &'a W,
        base: usize,
        buckets: usize,
        pool_words: usize,
    ) -> Result<Self, Error> {
        Self::attach_paged(words, base, buckets, pool_words, PAGE_WORDS)
    }

    /// [`Overlay::attach`] to an overlay of `page_words`-word pages.
    pub fn attach_paged(
        words: &'a W,
        base: usize,
        buckets: usize,
        pool_words: usize,
        page_words: usize,
    ) -> Result<Self, Error> {
        Self::check(words, base, buckets, pool_words, page_words)?;
        if words.load(base)? != MAGIC
            || words.load(base + H_BUCKETS)? != buckets as u64
            || words.load(base + H_POOL_WORDS)? != pool_words as u64
            || words.load(base + H_PAGE_WORDS)? != page_words as u64
        {
            return Err(Error::BadHeader);
        }
        Ok(Overlay {
            words,
            base,
            buckets,
            pool_words,
            page_words,
        })
    }

    /// Words of a data page.
    pub fn page_words(&self) -> usize {
        self.page_words
    }

    fn kind_words(&self, kind: Kind) -> usize {
        match kind {
            Kind::Inode => INODE_WORDS,
            Kind::Data => self.page_words,
        }
    }

    fn bucket_word(&self, b: usize) -> Result<usize, Error> {
        if b >= self.buckets {
            return Err(Error::OutOfBounds);
        }
        Ok(self.base + HEADER_WORDS + b * BUCKET_WORDS)
    }

    fn pool_word(&self, off: usize) -> Result<usize, Error> {
        if off >= self.pool_words {
            return Err(Error::OutOfBounds);
        }
        Ok(self.base + HEADER_WORDS + self.buckets * BUCKET_WORDS + off)
    }

    /// The home bucket of a key.
    pub fn home(&self, key: Key) -> usize {
        (hash64(key.0) as usize) & (self.buckets - 1)
    }

    /// Checks an entry offset read from the region for a key of `kind`.
    fn entry(&self, off: usize, kind: Kind) -> Result<usize, Error> {
        let end = off
            .checked_add(self.kind_words(kind))
            .ok_or(Error::Corrupt)?;
        if end > self.pool_words || (kind == Kind::Data && !off.is_multiple_of(self.page_words)) {
            return Err(Error::Corrupt);
        }
        Ok(off)
    }

    fn decode(&self, v: u64, kind: Kind) -> Result<Value, Error> {
        if v & 1 == 0 {
            return Err(Error::Corrupt);
        }
        let off = usize::try_from(v >> VAL_OFF_SHIFT).map_err(|_| Error::Corrupt)?;
        Ok(Value {
            off: self.entry(off, kind)?,
            version: ((v >> 1) & VAL_VER_MASK) as u16,
        })
    }

    /// Runs an insert of `key -> value` (a fresh entry's offset).
    pub fn insert(&self, key: Key, off: usize) -> Result<Inserted, Error> {
        let mut op = InsertOp::new(self, key, off)?;
        loop {
            if let Step::Done(r) = op.step(self)? {
                return Ok(r);
            }
        }
    }

    /// Finds a key's bucket and published value; `None` if absent or not
    /// yet published.
    pub fn lookup(&self, key: Key) -> Result<Option<(usize, Value)>, Error> {
        let home = self.home(key);
        let want = (key.0 << 1) | USED;
        for i in 0..self.buckets {
            let b = (home + i) & (self.buckets - 1);
            let bw = self.bucket_word(b)?;
            let sk = self.words.load(bw)?;
            if sk == 0 {
                return Ok(None);
            }
            if sk == want {
                let v = self.words.load(bw + 1)?;
                if v == 0 {
                    return Ok(None);
                }
                return Ok(Some((b, self.decode(v, key.kind())?)));
            }
        }
        Ok(None)
    }

    /// Bump allocation of `n` words aligned to `align` words.
    fn bump(&self, n: usize, align: usize) -> Result<usize, Error> {
        let w = self.base + H_POOL_ALLOC;
        loop {
            let a = self.words.load(w)?;
            let a = usize::try_from(a).map_err(|_| Error::Corrupt)?;
            let start = a.checked_next_multiple_of(align).ok_or(Error::NoSpace)?;
            let end = start.checked_add(n).ok_or(Error::NoSpace)?;
            if end > self.pool_words {
                return Err(Error::NoSpace);
            }
            if self.words.cas(w, a as u64, end as u64)?.is_ok() {
                return Ok(start);
            }
        }
    }

    fn pop_free(&self, kind: Kind) -> Result<Option<usize>, Error> {
        let hw = self.base + kind.free_head();
        loop {
            let h = self.words.load(hw)?;
            let top = h & HEAD_OFF_MASK;
            if top == 0 {
                return Ok(None);
            }
            let off = self.entry(usize::try_from(top - 1).map_err(|_| Error::Corrupt)?, kind)?;
            let next = self.words.load(self.pool_word(off)?)? & HEAD_OFF_MASK;
            // `next` may be garbage if another participant popped this entry
            // and wrote into it meanwhile; then the head has changed and the
            // CAS below fails. Judge it only if the head still holds.
            let next_ok = next == 0
                || usize::try_from(next - 1)
                    .ok()
                    .and_then(|o| self.entry(o, kind).ok())
                    .is_some();
            let tagged = ((h >> HEAD_OFF_BITS).wrapping_add(1) << HEAD_OFF_BITS) | next;
            if !next_ok {
                if self.words.load(hw)? == h {
                    return Err(Error::Corrupt);
                }
                continue;
            }
            if self.words.cas(hw, h, tagged)?.is_ok() {
                return Ok(Some(off));
            }
        }
    }

    fn push_free(&self, off: usize, kind: Kind) -> Result<(), Error> {
        let off = self.entry(off, kind)?;
        let hw = self.base + kind.free_head();
        loop {
            let h = self.words.load(hw)?;
            self.words.store(self.pool_word(off)?, h & HEAD_OFF_MASK)?;
            let tagged = ((h >> HEAD_OFF_BITS).wrapping_add(1) << HEAD_OFF_BITS) | (off as u64 + 1);
            if self.words.cas(hw, h, tagged)?.is_ok() {
                return Ok(());
            }
        }
    }

    fn alloc(&self, kind: Kind) -> Result<usize, Error> {
        if let Some(off) = self.pop_free(kind)? {
            return Ok(off);
        }
        match kind {
            Kind::Data => self.bump(self.page_words, self.page_words),
            Kind::Inode => self.bump(INODE_WORDS, 1),
        }
    }

    /// Data pages on the free list (a walk of it, bounded by the pool: a
    /// cycle is [`Error::Corrupt`]).
    pub fn free_pages(&self) -> Result<usize, Error> {
        let mut n = 0;
        let mut next = self.words.load(self.base + H_FREE_DATA)? & HEAD_OFF_MASK;
        while next != 0 {
            if n > self.pool_words / self.page_words {
                return Err(Error::Corrupt);
            }
            let off = usize::try_from(next - 1).map_err(|_| Error::Corrupt)?;
            let off = self.entry(off, Kind::Data)?;
            next = self.words.load(self.pool_word(off)?)? & HEAD_OFF_MASK;
            n += 1;
        }
        Ok(n)
    }

    /// Words bump-allocated so far.
    pub fn pool_used(&self) -> Result<u64, Error> {
        self.words.load(self.base + H_POOL_ALLOC)
    }

    /// A new inode number (DaxFS's atomic `next_ino`).
    pub fn next_ino(&self) -> Result<u64, Error> {
        let w = self.base + H_NEXT_INO;
        loop {
            let n = self.words.load(w)?;
            let next = n
                .checked_add(1)
                .filter(|x| *x <= MAX_INO)
                .ok_or(Error::NoSpace)?;
            if self.words.cas(w, n, next)?.is_ok() {
                return Ok(n);
            }
        }
    }

    /// The overlay inode of `ino`, created (size `size`) if absent.
    /// Returns the entry's pool offset.
    pub fn inode(&self, ino: u64, mode: u64, size: u64) -> Result<usize, Error> {
        let key = Key::inode(ino)?;
        if let Some((_, v)) = self.lookup(key)? {
            return Ok(v.off);
        }
        let off = self.alloc(Kind::Inode)?;
        let p = self.pool_word(off)?;
        self.words.store(p + I_MODE, mode)?;
        self.words.store(p + I_SIZE, size)?;
        self.words.store(p + I_APPEND, size)?;
        self.words.store(p + I_NLINK, 1)?;
        match self.insert(key, off)? {
            Inserted::New { .. } => Ok(off),
            Inserted::Existing { value, .. } => {
                self.push_free(off, Kind::Inode)?;
                Ok(self.decode(value, Kind::Inode)?.off)
            }
            Inserted::Full => {
                self.push_free(off, Kind::Inode)?;
                Err(Error::NoSpace)
            }
        }
    }

    fn inode_word(&self, ino: u64, field: usize) -> Result<Option<usize>, Error> {
        match self.lookup(Key::inode(ino)?)? {
            Some((_, v)) => Ok(Some(self.pool_word(v.off)? + field)),
            None => Ok(None),
        }
    }

    /// The authoritative file size (read on every read); `None` if the file
    /// has no overlay inode.
    pub fn size(&self, ino: u64) -> Result<Option<u64>, Error> {
        match self.inode_word(ino, I_SIZE)? {
            Some(w) => Ok(Some(self.words.load(w)?)),
            None => Ok(None),
        }
    }

    /// Grows the size to at least `end` (a write that ended there).
    pub fn extend_size(&self, ino: u64, end: u64) -> Result<u64, Error> {
        let w = self.inode_word(ino, I_SIZE)?.ok_or(Error::NoInode)?;
        loop {
            let s = self.words.load(w)?;
            if s >= end {
                return Ok(s);
            }
            if self.words.cas(w, s, end)?.is_ok() {
                return Ok(end);
            }
        }
    }

    /// Reserves `len` bytes at the end of the file for an append; returns
    /// where they start. Publish with [`Overlay::publish_append`] after the
    /// data is written.
    pub fn reserve_append(&self, ino: u64, len: u64) -> Result<u64, Error> {
        let mut op = ReserveOp::new(self, ino, len)?;
        loop {
            if let Step::Done(start) = op.step(self)? {
                return Ok(start);
            }
        }
    }

    /// Publishes an append reserved at `start`: the size moves to
    /// `start + len` once every earlier reservation has published, so the
    /// size never covers data not yet written. Waits on `waiter`.
    pub fn publish_append(
        &self,
        ino: u64,
        start: u64,
        len: u64,
        waiter: &mut dyn Waiter,
    ) -> Result<(), Error> {
        let mut op = PublishOp::new(self, ino, start, len)?;
        loop {
            match op.step(self)? {
                Step::Again => {}
                Step::Blocked => {
                    if !waiter.pause() {
                        return Err(Error::Busy);
                    }
                }
                Step::Done(()) => return Ok(()),
            }
        }
    }

    /// Copies page `pgoff` of `ino` into `buf` (a page of words) if the
    /// overlay has it, checking that no write replaced it meanwhile (else
    /// copies again): the copy is always one whole version of the page.
    pub fn read_page(&self, ino: u64, pgoff: u64, buf: &mut [u64]) -> Result<bool, Error> {
        let mut op = ReadOp::new(self, Key::data(ino, pgoff)?, buf)?;
        loop {
            if let Step::Done(found) = op.step(self, buf)? {
                return Ok(found);
            }
        }
    }

    /// Writes page `pgoff` of `ino` by copy-on-write: `base` fills the page
    /// when the overlay does not have it yet (from the page cache or the
    /// disk), `change` applies the write to a copy of the current page, and
    /// the copy is installed by CAS on the value it was copied from; if
    /// another write won meanwhile, the change is applied again to that
    /// write's page. No concurrent write is lost ([`UpdateOp`]).
    pub fn update_page(
        &self,
        ino: u64,
        pgoff: u64,
        buf: &mut [u64],
        base: &mut dyn FnMut(&mut [u64]),
        change: &mut dyn FnMut(&mut [u64]),
    ) -> Result<(), Error> {
        let mut op = UpdateOp::new(self, Key::data(ino, pgoff)?, buf)?;
        loop {
            if let Step::Done(()) = op.step(self, buf, base, change)? {
                return Ok(());
            }
        }
    }
}

mod ops;
pub use ops::{InsertOp, PublishOp, ReadOp, ReserveOp, UpdateOp};

#[cfg(test)]
mod tests;
