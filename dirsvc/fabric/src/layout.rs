//! The versioned header of the shared region and where each area lives.
//!
//! The directory computes a [`Layout`] from the region size and the node
//! count, zeroes the region, writes the header and publishes it by writing
//! the magic last. Nodes read the header back with [`Layout::read`], which
//! checks the magic, the version, a CRC over the immutable fields and that
//! every area lies inside the region without overlapping another, and then
//! use only their validated private copy.
//!
//! Region map (all offsets in the header):
//!
//! | area      | size                                                      |
//! | --------- | --------------------------------------------------------- |
//! | header    | [`HEADER_BYTES`]: fixed fields, dynamic words, node table |
//! | channels  | per node: request, response, notify, ack rings            |
//! | bulk      | per node: `bulk_slots` staging buffers                    |
//! | bitmaps   | per node: two bits per frame of its pool: export bits,    |
//! |           | then (second half) replica bits                           |
//! | pools     | per node: `pool_frames` 4 KiB frames                      |
//!
//! In `daxfs` mode the pools' area holds DaxFS's slot array and slot
//! frames instead (see [`DaxLayout`], `layout/dax.rs`).
//!
//! Header words (byte offsets):
//!
//! | off | field                | off | field                    |
//! | --- | -------------------- | --- | ------------------------ |
//! | 0   | magic u64            | 64  | bulk_slots u32           |
//! | 8   | version u32          | 68  | bulk_slot_bytes u32      |
//! | 12  | header_bytes u32     | 72  | bitmap_off u64           |
//! | 16  | region_size u64      | 80  | bitmap_bytes u64         |
//! | 24  | max_nodes u32        | 88  | pool_off u64             |
//! | 28  | ring_slots u32       | 96  | pool_frames u64          |
//! | 32  | channels_off u64     | 104 | crc32 of bytes 8..104    |
//! | 40  | channel_bytes u64    | 128 | epoch u64 (dynamic)      |
//! | 48  | bulk_off u64         | 136 | dir_state u32 (dynamic)  |
//! | 56  | bulk_bytes u64       | 144 | dir_heartbeat u64        |
//! |     |                      | 160 | meta_epoch u64 (dynamic) |
//! |     |                      | 168 | atomic_probe u64 (`bench atomics`) |
//! |     |                      | 176 | replicas_used u64 (dynamic) |
//! |     |                      | 192 | ping u64 (`bench pingpong`) |
//! |     |                      | 8128 | pong u64 (directory's echo) |
//!
//! Node table at [`NODE_TABLE`], one 64-byte record per node id `k`
//! (1..=max_nodes) at `NODE_TABLE + (k-1)*64`: `state u32` at +0,
//! `epoch u64` at +8, `heartbeat u64` at +16, `join_nonce u64` at +24,
//! `writing u64` at +32 (strong-mode replicas: the frame the node is
//! storing into, plus one; written by that node only), `sees_replicas
//! u64` at +40 (nonzero once the node has read `replicas_used` set: from
//! then on it announces every store; written by that node only),
//! `fence_request u64` at +48 (the session epoch the directory asks to
//! have fenced; written by the directory only) and `fence_done u64` at +56
//! (the last epoch the host's fencer confirmed fenced; written by the
//! fencer only), see [`crate::fence`].
//!
//! After the node table (offset 4352, version 2): the doorbell table, one
//! 32-byte entry per instance (peer id, flags, sleeping word), see
//! [`crate::doorbell`].

use core::fmt;

use crate::proto::DESC_SIZE;
use crate::ring::RingLoc;
use crate::shm::SharedMem;
use crate::PAGE_SIZE;

mod dax;
mod frames;
mod header;

pub use dax::{DaxLayout, MAX_SLOTS as DAX_MAX_SLOTS};
pub use header::Header;

/// "ONECOPY1" as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ONECOPY1");
/// Layout version this code reads and writes (2: the doorbell table; 3:
/// replica bits, the writing words and `replicas_used`; 4: the fence
/// words).
pub const VERSION: u32 = 4;
/// Bytes reserved for the header including the node table.
pub const HEADER_BYTES: usize = 8192;
/// Offset of the node table.
pub const NODE_TABLE: usize = 256;
/// Bytes per node record.
pub const NODE_RECORD: usize = 64;
/// Most nodes a region can describe (ids 1..=MAX_NODES).
pub const MAX_NODES: u32 = 64;
/// Slots per ring.
pub const DEFAULT_RING_SLOTS: u32 = 64;
/// Bulk slots per node.
pub const DEFAULT_BULK_SLOTS: u32 = 4;
/// Bytes per bulk slot.
pub const DEFAULT_BULK_SLOT_BYTES: u32 = 64 * 1024;
/// Smallest region we accept.
pub const MIN_REGION: usize = 1 << 20;

const OFF_EPOCH: usize = 128;
const OFF_DIR_STATE: usize = 136;
const OFF_DIR_HEARTBEAT: usize = 144;
/// `bench pingpong`: a node writes here (own cache line)...
const OFF_PING: usize = 192;
/// Metadata epoch: bumped by the directory (its only writer) before it
/// serves any request that may change a file's version or size.
const OFF_META_EPOCH: usize = 160;
/// The one word several instances read-modify-write, and only to measure
/// whether that is atomic across instances (`bench atomics`); every other
/// shared word has a single writer.
const OFF_ATOMIC_PROBE: usize = 168;
/// Nonzero from the first strong-mode PROMOTE on (the directory, its only
/// writer): until a node reads it set, its stores need no replica check.
const OFF_REPLICAS_USED: usize = 176;
/// ...and the directory echoes the value here (another cache line, at the
/// end of the header, after the node table).
const OFF_PONG: usize = HEADER_BYTES - 64;

/// Directory state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum DirState {
    /// Formatting the region or mounting the disk.
    Booting = 0,
    /// Serving.
    Up = 1,
    /// Serving, but without storage: every request gets `Unavailable`.
    NoStorage = 2,
    /// Shut down.
    Down = 3,
}

impl DirState {
    /// Decode; unknown values read as `None`.
    pub fn from_u32(v: u32) -> Option<DirState> {
        Some(match v {
            0 => DirState::Booting,
            1 => DirState::Up,
            2 => DirState::NoStorage,
            3 => DirState::Down,
            _ => return None,
        })
    }
}

/// Per-node membership state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum NodeState {
    /// Never joined.
    Down = 0,
    /// The node asked to join and waits for the directory.
    Joining = 1,
    /// Member.
    Up = 2,
    /// The directory declared it failed (heartbeat timeout).
    Failed = 3,
    /// The node left cleanly.
    Left = 4,
}

impl NodeState {
    /// Decode; unknown values read as `None`.
    pub fn from_u32(v: u32) -> Option<NodeState> {
        Some(match v {
            0 => NodeState::Down,
            1 => NodeState::Joining,
            2 => NodeState::Up,
            3 => NodeState::Failed,
            4 => NodeState::Left,
            _ => return None,
        })
    }

    /// Lower-case name for the shell.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Down => "down",
            NodeState::Joining => "joining",
            NodeState::Up => "up",
            NodeState::Failed => "failed",
            NodeState::Left => "left",
        }
    }
}

/// Why a region header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutError {
    /// The region is smaller than the minimum or than the header says.
    TooSmall {
        /// Actual size.
        have: usize,
        /// Needed size.
        need: usize,
    },
    /// No magic: not formatted (yet) or not ours.
    BadMagic(u64),
    /// Formatted by another version.
    BadVersion(u32),
    /// The header checksum does not match.
    BadChecksum,
    /// An area is misplaced, misaligned, overlapping or out of range.
    Inconsistent(&'static str),
    /// Too many or zero nodes.
    BadNodeCount(u32),
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::TooSmall { have, need } => {
                write!(f, "shared region too small: {have} bytes, need {need}")
            }
            LayoutError::BadMagic(m) => {
                write!(
                    f,
                    "shared region not formatted by onecopy (magic {m:#018x})"
                )
            }
            LayoutError::BadVersion(v) => write!(
                f,
                "shared region has layout version {v}, this kernel speaks version {VERSION}"
            ),
            LayoutError::BadChecksum => f.write_str("shared region header checksum mismatch"),
            LayoutError::Inconsistent(what) => {
                write!(f, "shared region header inconsistent: {what}")
            }
            LayoutError::BadNodeCount(n) => {
                write!(
                    f,
                    "shared region describes {n} nodes (1..={MAX_NODES} allowed)"
                )
            }
        }
    }
}

/// The rings of one node's channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    /// Node -> directory requests.
    pub request: RingLoc,
    /// Directory -> node responses.
    pub response: RingLoc,
    /// Directory -> node notifications (invalidations).
    pub notify: RingLoc,
    /// Node -> directory acknowledgements.
    pub ack: RingLoc,
}

impl Channel {
    /// All four rings.
    pub fn rings(&self) -> [RingLoc; 4] {
        [self.request, self.response, self.notify, self.ack]
    }
}

/// The validated geometry of a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Region size in bytes.
    pub region_size: usize,
    /// Node ids run 1..=max_nodes.
    pub max_nodes: u32,
    /// Slots per ring.
    pub ring_slots: u32,
    /// Offset of node 1's channel.
    pub channels_off: usize,
    /// Bytes per channel.
    pub channel_bytes: usize,
    /// Offset of node 1's bulk area.
    pub bulk_off: usize,
    /// Bytes of bulk per node.
    pub bulk_bytes: usize,
    /// Bulk slots per node.
    pub bulk_slots: u32,
    /// Bytes per bulk slot.
    pub bulk_slot_bytes: u32,
    /// Offset of node 1's export bitmap.
    pub bitmap_off: usize,
    /// Bytes of bitmap per node: the export bits, then as many bytes of
    /// replica bits.
    pub bitmap_bytes: usize,
    /// Offset of node 1's frame pool.
    pub pool_off: usize,
    /// Frames per node pool.
    pub pool_frames: u64,
}

fn align_up(v: usize, a: usize) -> Option<usize> {
    v.checked_add(a - 1).map(|x| x & !(a - 1))
}

impl Layout {
    /// Geometry for a region of `region_size` bytes shared by `nodes` nodes.
    pub fn compute(region_size: usize, nodes: u32) -> Result<Layout, LayoutError> {
        if nodes == 0 || nodes > MAX_NODES {
            return Err(LayoutError::BadNodeCount(nodes));
        }
        let n = nodes as usize;
        let ring_slots = DEFAULT_RING_SLOTS;
        let channel_bytes =
            align_up(4 * RingLoc::bytes(ring_slots), PAGE_SIZE).unwrap_or(usize::MAX);
        let channels_off = HEADER_BYTES;
        let bulk_off = channels_off + n * channel_bytes;
        let bulk_bytes = (DEFAULT_BULK_SLOTS * DEFAULT_BULK_SLOT_BYTES) as usize;
        let bitmap_off = bulk_off + n * bulk_bytes;
        let fixed = bitmap_off;
        let need = fixed + n * (PAGE_SIZE + 64) + n * PAGE_SIZE;
        if region_size < MIN_REGION.max(need) {
            return Err(LayoutError::TooSmall {
                have: region_size,
                need: MIN_REGION.max(need),
            });
        }
        // Frames left for pools, after reserving bitmaps (two bits per
        // frame, each half rounded up to 64 bytes per node) and alignment.
        let mut frames = ((region_size - fixed) / n) / PAGE_SIZE;
        loop {
            let bitmap_bytes = align_up(frames.div_ceil(8), 64)
                .and_then(|h| h.checked_mul(2))
                .unwrap_or(usize::MAX);
            let pool_off = align_up(bitmap_off + n * bitmap_bytes, PAGE_SIZE).unwrap_or(usize::MAX);
            if pool_off
                .checked_add(n * frames * PAGE_SIZE)
                .is_some_and(|end| end <= region_size)
            {
                return Ok(Layout {
                    region_size,
                    max_nodes: nodes,
                    ring_slots,
                    channels_off,
                    channel_bytes,
                    bulk_off,
                    bulk_bytes,
                    bulk_slots: DEFAULT_BULK_SLOTS,
                    bulk_slot_bytes: DEFAULT_BULK_SLOT_BYTES,
                    bitmap_off,
                    bitmap_bytes,
                    pool_off,
                    pool_frames: frames as u64,
                });
            }
            frames -= 1;
        }
    }

    fn fixed_fields(&self) -> [u8; 96] {
        let mut b = [0u8; 96];
        let mut put = |off: usize, v: &[u8]| b[off - 8..off - 8 + v.len()].copy_from_slice(v);
        put(8, &VERSION.to_le_bytes());
        put(12, &(HEADER_BYTES as u32).to_le_bytes());
        put(16, &(self.region_size as u64).to_le_bytes());
        put(24, &self.max_nodes.to_le_bytes());
        put(28, &self.ring_slots.to_le_bytes());
        put(32, &(self.channels_off as u64).to_le_bytes());
        put(40, &(self.channel_bytes as u64).to_le_bytes());
        put(48, &(self.bulk_off as u64).to_le_bytes());
        put(56, &(self.bulk_bytes as u64).to_le_bytes());
        put(64, &self.bulk_slots.to_le_bytes());
        put(68, &self.bulk_slot_bytes.to_le_bytes());
        put(72, &(self.bitmap_off as u64).to_le_bytes());
        put(80, &(self.bitmap_bytes as u64).to_le_bytes());
        put(88, &(self.pool_off as u64).to_le_bytes());
        put(96, &self.pool_frames.to_le_bytes());
        b
    }

    /// Zero the region's control areas, write the header with `epoch`, and
    /// publish it (magic last). Only the directory calls this, before any
    /// node can have joined.
    pub fn format(&self, mem: &(impl SharedMem + ?Sized), epoch: u64) {
        mem.store_u64(0, 0);
        // Header, channels, bulk and bitmaps; pools are left as they are
        // (frames are always initialised before they are exported).
        mem.zero(8, self.pool_off - 8);
        let fixed = self.fixed_fields();
        mem.write(8, &fixed);
        mem.store_u32(104, crc32fast::hash(&fixed));
        mem.store_u64(OFF_EPOCH, epoch);
        mem.store_u32(OFF_DIR_STATE, DirState::Booting as u32);
        mem.store_u64(0, MAGIC);
    }

    /// Read and validate the header of a region of `region_size` bytes.
    pub fn read(mem: &(impl SharedMem + ?Sized)) -> Result<Layout, LayoutError> {
        let have = mem.size();
        if have < MIN_REGION {
            return Err(LayoutError::TooSmall {
                have,
                need: MIN_REGION,
            });
        }
        let magic = mem.load_u64(0);
        if magic != MAGIC {
            return Err(LayoutError::BadMagic(magic));
        }
        let version = mem.load_u32(8);
        if version != VERSION {
            return Err(LayoutError::BadVersion(version));
        }
        let mut fixed = [0u8; 96];
        mem.read(8, &mut fixed);
        if crc32fast::hash(&fixed) != mem.load_u32(104) {
            return Err(LayoutError::BadChecksum);
        }
        let u32at = |o: usize| u32::from_le_bytes(fixed[o - 8..o - 4].try_into().unwrap_or([0; 4]));
        let u64at = |o: usize| u64::from_le_bytes(fixed[o - 8..o].try_into().unwrap_or([0; 8]));
        let usz = |o: usize| usize::try_from(u64at(o)).unwrap_or(usize::MAX);
        if u32at(12) as usize != HEADER_BYTES {
            return Err(LayoutError::Inconsistent("header size"));
        }
        let l = Layout {
            region_size: usz(16),
            max_nodes: u32at(24),
            ring_slots: u32at(28),
            channels_off: usz(32),
            channel_bytes: usz(40),
            bulk_off: usz(48),
            bulk_bytes: usz(56),
            bulk_slots: u32at(64),
            bulk_slot_bytes: u32at(68),
            bitmap_off: usz(72),
            bitmap_bytes: usz(80),
            pool_off: usz(88),
            pool_frames: u64at(96),
        };
        if l.region_size > have {
            return Err(LayoutError::TooSmall {
                have,
                need: l.region_size,
            });
        }
        l.validate()?;
        Ok(l)
    }

    /// Check that every area fits, is aligned and does not overlap.
    pub fn validate(&self) -> Result<(), LayoutError> {
        use LayoutError::Inconsistent as Bad;
        let n = self.max_nodes as usize;
        if self.max_nodes == 0 || self.max_nodes > MAX_NODES {
            return Err(LayoutError::BadNodeCount(self.max_nodes));
        }
        if !self.ring_slots.is_power_of_two() || self.ring_slots > 4096 {
            return Err(Bad("ring slots"));
        }
        let ring_bytes = RingLoc::bytes(self.ring_slots);
        if self.channel_bytes < 4 * ring_bytes || !self.channel_bytes.is_multiple_of(64) {
            return Err(Bad("channel size"));
        }
        if self.bulk_slots == 0
            || self.bulk_slot_bytes == 0
            || !(self.bulk_slot_bytes as usize).is_multiple_of(PAGE_SIZE)
            || (self.bulk_slots as usize).checked_mul(self.bulk_slot_bytes as usize)
                != Some(self.bulk_bytes)
        {
            return Err(Bad("bulk slots"));
        }
        let frames = usize::try_from(self.pool_frames).map_err(|_| Bad("pool frames"))?;
        if self.bitmap_bytes / 2 < frames.div_ceil(8) || !self.bitmap_bytes.is_multiple_of(128) {
            return Err(Bad("bitmap size"));
        }
        // Areas in order, each inside the region and after the previous.
        let areas: [(usize, Option<usize>, &'static str); 4] = [
            (
                self.channels_off,
                n.checked_mul(self.channel_bytes),
                "channels",
            ),
            (self.bulk_off, n.checked_mul(self.bulk_bytes), "bulk"),
            (self.bitmap_off, n.checked_mul(self.bitmap_bytes), "bitmaps"),
            (
                self.pool_off,
                n.checked_mul(frames).and_then(|f| f.checked_mul(PAGE_SIZE)),
                "pools",
            ),
        ];
        let mut end = HEADER_BYTES;
        for (off, len, what) in areas {
            let len = len.ok_or(Bad(what))?;
            if off < end || !off.is_multiple_of(64) {
                return Err(Bad(what));
            }
            end = off.checked_add(len).ok_or(Bad(what))?;
            if end > self.region_size {
                return Err(Bad(what));
            }
        }
        if !self.pool_off.is_multiple_of(PAGE_SIZE) {
            return Err(Bad("pool alignment"));
        }
        Ok(())
    }

    /// Is `node` a valid node id in this region?
    pub fn valid_node(&self, node: u32) -> bool {
        node >= 1 && node <= self.max_nodes
    }

    /// The channel of node `node` (1-based; caller checked `valid_node`).
    pub fn channel(&self, node: u32) -> Channel {
        debug_assert!(self.valid_node(node));
        let base = self.channels_off + (node as usize - 1) * self.channel_bytes;
        let rb = RingLoc::bytes(self.ring_slots);
        let ring = |i: usize| RingLoc {
            off: base + i * rb,
            slots: self.ring_slots,
        };
        Channel {
            request: ring(0),
            response: ring(1),
            notify: ring(2),
            ack: ring(3),
        }
    }

    /// Offset and length of bulk slot `slot` of `node`, or `None` if the
    /// slot number is out of range.
    pub fn bulk_slot(&self, node: u32, slot: u32) -> Option<(usize, usize)> {
        if !self.valid_node(node) || slot >= self.bulk_slots {
            return None;
        }
        let off = self.bulk_off
            + (node as usize - 1) * self.bulk_bytes
            + slot as usize * self.bulk_slot_bytes as usize;
        Some((off, self.bulk_slot_bytes as usize))
    }

    /// Offset of node `node`'s record in the node table.
    fn node_rec(&self, node: u32) -> usize {
        debug_assert!(self.valid_node(node));
        NODE_TABLE + (node as usize - 1) * NODE_RECORD
    }

    /// Global frame number range `[first, end)` of node `node`'s pool.
    pub fn pool_gfns(&self, node: u32) -> (u64, u64) {
        let first = (self.pool_off / PAGE_SIZE) as u64 + (node as u64 - 1) * self.pool_frames;
        (first, first + self.pool_frames)
    }

    /// Which node's pool holds global frame `gfn`, if any.
    pub fn gfn_owner(&self, gfn: u64) -> Option<u32> {
        let first = (self.pool_off / PAGE_SIZE) as u64;
        if gfn < first || self.pool_frames == 0 {
            return None;
        }
        let node = (gfn - first) / self.pool_frames + 1;
        (node <= self.max_nodes as u64).then_some(node as u32)
    }

    /// Descriptor size sanity (used by tests).
    pub const fn desc_size() -> usize {
        DESC_SIZE
    }
}

#[cfg(test)]
mod tests;
