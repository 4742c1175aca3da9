//! Compact storage of the page directory's entries.
//!
//! Pages are grouped in chunks of [`CHUNK`] consecutive pages of one file:
//! a `BTreeMap<(inode, page / 64), Chunk>` where a chunk is a 64-bit
//! presence mask and one exact-size boxed byte array holding a packed
//! record for every present page, in page order (the page index is
//! implicit: a page's record is at the rank of its bit). A record is the
//! stable part of an [`Entry`]:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..4 | owner's frame, `u32` global frame number (offset in the region / 4096) |
//! | 4 | owner node |
//! | 5 | bit 0 dirty, bits 1-2 phase kind (0 Owned, 1 Exclusive, 2 Invalidating) |
//! | 6..10 | sharer mask of nodes 1..=32 |
//! | 10..14 | sharer mask of nodes 33..=64 ([`Width::Wide`] only) |
//!
//! So 10 bytes per page for clusters of up to 32 nodes ([`Width::Narrow`])
//! and 14 for up to 64 ([`Width::Wide`]). What a transient phase needs
//! beyond its kind (E: who fills and the tag to answer; TBI: the pending
//! ack mask and the tag) lives in a side table keyed by page, which only
//! holds pages in E or TBI (a few at any moment). It is a hash map: a
//! page miss puts its page in E and takes it out again, and a `BTreeMap`
//! that empties and fills allocates and frees a node each time (about
//! half a microsecond per operation under TCG, on every miss).
//!
//! [`Table::memory`] counts the bytes held: the records exactly (a boxed
//! slice holds exactly its length), the B-tree map by an upper bound
//! from std's node layout (11 slots per node, every node but the root at
//! least 5 full, every node counted at the size of an internal node), and
//! the side table by its capacity (an entry and a control byte a slot).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::hash::BuildHasherDefault;
use core::mem::size_of;

use rustc_hash::FxHasher;

use fabric::proto::PageKey;

use super::{Entry, Phase};

/// Pages per chunk (one presence bit each).
pub const CHUNK: u64 = 64;

/// Record size for clusters of up to 32 nodes.
pub const NARROW_RECORD: usize = 10;
/// Record size for clusters of 33..=64 nodes.
pub const WIDE_RECORD: usize = 14;

/// Which record layout a directory uses, from the cluster's node count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// Nodes 1..=32: 32-bit sharer mask, 10-byte records.
    Narrow,
    /// Nodes 1..=64: 64-bit sharer mask, 14-byte records.
    Wide,
}

impl Width {
    /// The layout for a cluster of `max_nodes` nodes.
    pub fn for_nodes(max_nodes: u32) -> Width {
        if max_nodes <= 32 {
            Width::Narrow
        } else {
            Width::Wide
        }
    }

    /// Highest node id the layout can record.
    pub fn max_nodes(self) -> u8 {
        match self {
            Width::Narrow => 32,
            Width::Wide => 64,
        }
    }

    /// Bytes per record.
    pub fn record(self) -> usize {
        match self {
            Width::Narrow => NARROW_RECORD,
            Width::Wide => WIDE_RECORD,
        }
    }
}

/// Why an entry cannot be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    /// The frame number does not fit 32 bits.
    Frame,
    /// A sharer is beyond the layout's node count.
    Node,
}

/// 64 consecutive pages of one file.
#[derive(Debug, Default, Clone)]
struct Chunk {
    /// Bit `i`: page `64 * chunk + i` is cached.
    present: u64,
    /// One record per set bit, in bit order.
    records: Box<[u8]>,
}

const KIND_OWNED: u8 = 0;
const KIND_EXCLUSIVE: u8 = 1;
const KIND_INVALIDATING: u8 = 2;

/// Bytes of one std `BTreeMap<K, V>` node, counted at the size of an
/// internal node: parent pointer, parent index and length, 11 keys, 11
/// values, 12 edges.
const fn btree_node<K, V>() -> usize {
    (8 + 4 + 11 * (size_of::<K>() + size_of::<V>()) + 12 * 8).next_multiple_of(8)
}

/// Upper bound of the bytes a std `BTreeMap<K, V>` of `len` entries holds
/// (every node but the root holds at least 5 entries).
pub fn btree_bytes<K, V>(len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (1 + len / 5) * btree_node::<K, V>()
}

/// Bytes per cached page in the narrow layout when chunks are full (files
/// cached whole): the record plus the chunk's share of the chunk map.
pub const DENSE_NARROW_BYTES: usize =
    NARROW_RECORD + btree_node::<(u64, u64), Chunk>().div_ceil(5 * CHUNK as usize);

/// The side table's map (deterministic hash: simulations stay replayable).
type SideMap = hashbrown::HashMap<PageKey, Phase, BuildHasherDefault<FxHasher>>;

/// A side table holding more slots than this, and less than an eighth of
/// them in use, gives the rest back (after a burst of invalidations).
const SIDE_KEEP: usize = 64;

/// The entries, compactly.
#[derive(Debug, Clone)]
pub struct Table {
    width: Width,
    chunks: BTreeMap<(u64, u64), Chunk>,
    /// Phase details of pages in E or TBI.
    side: SideMap,
    len: usize,
}

fn split(key: &PageKey) -> ((u64, u64), u32) {
    ((key.ino, key.idx / CHUNK), (key.idx % CHUNK) as u32)
}

fn rank(present: u64, bit: u32) -> usize {
    (present & ((1u64 << bit) - 1)).count_ones() as usize
}

impl Table {
    /// An empty table of the given layout.
    pub fn new(width: Width) -> Table {
        Table {
            width,
            chunks: BTreeMap::new(),
            side: SideMap::default(),
            len: 0,
        }
    }

    /// The record layout.
    pub fn width(&self) -> Width {
        self.width
    }

    /// Cached pages.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes held by the table (records exact, maps an upper bound).
    pub fn memory(&self) -> usize {
        let records: usize = self.chunks.values().map(|c| c.records.len()).sum();
        records
            + btree_bytes::<(u64, u64), Chunk>(self.chunks.len())
            + self.side.capacity() * (size_of::<(PageKey, Phase)>() + 1)
    }

    fn encode(&self, e: &Entry) -> Result<[u8; WIDE_RECORD], Unfit> {
        let gfn = u32::try_from(e.gfn).map_err(|_| Unfit::Frame)?;
        if self.width == Width::Narrow && e.sharers >> 32 != 0 {
            return Err(Unfit::Node);
        }
        let kind = match e.phase {
            Phase::Owned => KIND_OWNED,
            Phase::Exclusive { .. } => KIND_EXCLUSIVE,
            Phase::Invalidating { .. } => KIND_INVALIDATING,
        };
        let mut r = [0u8; WIDE_RECORD];
        r[0..4].copy_from_slice(&gfn.to_le_bytes());
        r[4] = e.owner;
        r[5] = u8::from(e.dirty) | (kind << 1);
        r[6..14].copy_from_slice(&e.sharers.to_le_bytes());
        Ok(r)
    }

    fn decode(&self, key: &PageKey, r: &[u8]) -> Entry {
        let mut gfn = [0u8; 4];
        gfn.copy_from_slice(&r[0..4]);
        let mut lo = [0u8; 4];
        lo.copy_from_slice(&r[6..10]);
        let mut sharers = u64::from(u32::from_le_bytes(lo));
        if self.width == Width::Wide {
            let mut hi = [0u8; 4];
            hi.copy_from_slice(&r[10..14]);
            sharers |= u64::from(u32::from_le_bytes(hi)) << 32;
        }
        let phase = if (r[5] >> 1) & 3 == KIND_OWNED {
            Phase::Owned
        } else {
            // A record of a transient kind always has its side entry; a
            // missing one would be a bug of this module: show it as TBI
            // with nothing pending, which `PageDir::check` flags.
            self.side
                .get(key)
                .copied()
                .unwrap_or(Phase::Invalidating { pending: 0, tag: 0 })
        };
        Entry {
            owner: r[4],
            gfn: u64::from(u32::from_le_bytes(gfn)),
            sharers,
            dirty: r[5] & 1 != 0,
            phase,
        }
    }

    /// The entry of `key`.
    pub fn get(&self, key: &PageKey) -> Option<Entry> {
        let (ck, bit) = split(key);
        let c = self.chunks.get(&ck)?;
        if c.present & (1u64 << bit) == 0 {
            return None;
        }
        let w = self.width.record();
        let at = rank(c.present, bit) * w;
        Some(self.decode(key, &c.records[at..at + w]))
    }

    /// Is `key` cached?
    pub fn contains(&self, key: &PageKey) -> bool {
        let (ck, bit) = split(key);
        self.chunks
            .get(&ck)
            .is_some_and(|c| c.present & (1u64 << bit) != 0)
    }

    /// Store `e` for `key` (insert or overwrite).
    pub fn put(&mut self, key: PageKey, e: &Entry) -> Result<(), Unfit> {
        let rec = self.encode(e)?;
        let w = self.width.record();
        let (ck, bit) = split(&key);
        let c = self.chunks.entry(ck).or_default();
        let at = rank(c.present, bit) * w;
        if c.present & (1u64 << bit) != 0 {
            c.records[at..at + w].copy_from_slice(&rec[..w]);
        } else {
            let mut v = Vec::with_capacity(c.records.len() + w);
            v.extend_from_slice(&c.records[..at]);
            v.extend_from_slice(&rec[..w]);
            v.extend_from_slice(&c.records[at..]);
            c.records = v.into_boxed_slice();
            c.present |= 1u64 << bit;
            self.len += 1;
        }
        if e.phase == Phase::Owned {
            if !self.side.is_empty() {
                self.side_remove(&key);
            }
        } else {
            self.side.insert(key, e.phase);
        }
        Ok(())
    }

    /// Forget `key`; its entry, if it was cached.
    pub fn remove(&mut self, key: &PageKey) -> Option<Entry> {
        let e = self.get(key)?;
        let w = self.width.record();
        let (ck, bit) = split(key);
        let c = self.chunks.get_mut(&ck)?;
        let at = rank(c.present, bit) * w;
        c.present &= !(1u64 << bit);
        if c.present == 0 {
            self.chunks.remove(&ck);
        } else {
            let mut v = Vec::with_capacity(c.records.len() - w);
            v.extend_from_slice(&c.records[..at]);
            v.extend_from_slice(&c.records[at + w..]);
            c.records = v.into_boxed_slice();
        }
        self.side_remove(key);
        self.len -= 1;
        Some(e)
    }

    /// Take `key` out of the side table; a table left mostly empty after a
    /// burst gives its slots back.
    fn side_remove(&mut self, key: &PageKey) {
        if self.side.remove(key).is_some()
            && self.side.capacity() > SIDE_KEEP
            && self.side.len() < self.side.capacity() / 8
        {
            self.side.shrink_to(SIDE_KEEP.max(self.side.len() * 2));
        }
    }

    /// The side table holds exactly the pages whose records are of a
    /// transient kind.
    pub fn check(&self) -> Result<(), alloc::string::String> {
        let mut transient = 0;
        for (&(ino, chunk), c) in &self.chunks {
            let w = self.width.record();
            if c.records.len() != c.present.count_ones() as usize * w {
                return Err(alloc::format!("chunk {ino}/{chunk}: records out of step"));
            }
            for (i, k) in Self::chunk_keys(ino, chunk, c.present).enumerate() {
                if (c.records[i * w + 5] >> 1) & 3 != KIND_OWNED {
                    transient += 1;
                    if !self.side.contains_key(&k) {
                        return Err(alloc::format!("{k:?}: transient without its phase"));
                    }
                }
            }
        }
        if transient != self.side.len() {
            return Err(alloc::format!(
                "{} side entries for {transient} transient pages",
                self.side.len()
            ));
        }
        Ok(())
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (PageKey, Entry)> + '_ {
        self.chunks
            .iter()
            .flat_map(move |(&(ino, chunk), c)| self.chunk_entries(ino, chunk, c))
    }

    /// Cached pages of `ino` with index >= `from`, in order.
    pub fn keys_from(&self, ino: u64, from: u64) -> Vec<PageKey> {
        self.keys_between(ino, from, u64::MAX)
    }

    /// Cached pages of `ino` with index in `from..=to`, in order (only
    /// the chunks that hold such indices are read).
    pub fn keys_between(&self, ino: u64, from: u64, to: u64) -> Vec<PageKey> {
        if from > to {
            return Vec::new();
        }
        self.chunks
            .range((ino, from / CHUNK)..=(ino, to / CHUNK))
            .flat_map(|(&(ino, chunk), c)| Self::chunk_keys(ino, chunk, c.present))
            .filter(|k| (from..=to).contains(&k.idx))
            .collect()
    }

    /// Every cached page.
    pub fn keys(&self) -> Vec<PageKey> {
        let mut out = Vec::with_capacity(self.len);
        for (&(ino, chunk), c) in &self.chunks {
            out.extend(Self::chunk_keys(ino, chunk, c.present));
        }
        out
    }

    fn chunk_keys(ino: u64, chunk: u64, present: u64) -> impl Iterator<Item = PageKey> {
        (0..64u64)
            .filter(move |b| present & (1u64 << b) != 0)
            .map(move |b| PageKey {
                ino,
                idx: chunk * CHUNK + b,
            })
    }

    fn chunk_entries<'a>(
        &'a self,
        ino: u64,
        chunk: u64,
        c: &'a Chunk,
    ) -> impl Iterator<Item = (PageKey, Entry)> + 'a {
        let w = self.width.record();
        Self::chunk_keys(ino, chunk, c.present)
            .enumerate()
            .map(move |(i, k)| (k, self.decode(&k, &c.records[i * w..(i + 1) * w])))
    }
}
