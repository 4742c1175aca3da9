//! Single-producer/single-consumer rings of 64-byte descriptors in the
//! shared region.
//!
//! Memory layout of one ring at offset `off` (see [`RingLoc`]):
//!
//! | offset          | content                                      |
//! | --------------- | -------------------------------------------- |
//! | `off + 0`       | `head: u32`, written only by the producer    |
//! | `off + 64`      | `tail: u32`, written only by the consumer    |
//! | `off + 128 + 64*i` | slot `i` (`i < slots`, `slots` a power of 2) |
//!
//! Indices run freely and wrap at 2^32; slot = index mod slots. Each side
//! keeps its own index in private memory and only *publishes* it to the
//! region, so a peer that scribbles over the region can make a ring look
//! full, empty or corrupt, but never make this side index outside the slot
//! array: the peer's index is only used in the difference `head - tail`,
//! which is checked against `slots`.

use crate::proto::{Desc, DESC_SIZE};
use crate::shm::SharedMem;

/// Bytes before the first slot (two cache lines of indices).
pub const RING_HEADER: usize = 128;

/// Where a ring lives in the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLoc {
    /// Offset of the ring (64-byte aligned).
    pub off: usize,
    /// Number of slots (a power of two).
    pub slots: u32,
}

impl RingLoc {
    /// Bytes one ring with `slots` slots occupies.
    pub const fn bytes(slots: u32) -> usize {
        RING_HEADER + slots as usize * DESC_SIZE
    }
    fn head_off(&self) -> usize {
        self.off
    }
    fn tail_off(&self) -> usize {
        self.off + 64
    }
    fn slot_off(&self, index: u32) -> usize {
        self.off + RING_HEADER + (index & (self.slots - 1)) as usize * DESC_SIZE
    }
    /// Does the ring hold unread descriptors, as the region says now (a
    /// sleeper's re-check; garbage indices read as "something": wake up
    /// and let the consumer report it)?
    pub fn unread(&self, mem: &(impl SharedMem + ?Sized)) -> bool {
        mem.load_u32(self.head_off()) != mem.load_u32(self.tail_off())
    }
    /// Zero both indices (only while neither side uses the ring).
    pub fn reset(&self, mem: &(impl SharedMem + ?Sized)) {
        mem.store_u32(self.head_off(), 0);
        mem.store_u32(self.tail_off(), 0);
    }
}

/// Ring failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingError {
    /// No free slot (producer) — try again later.
    Full,
    /// The indices in the region are impossible (`head - tail > slots`):
    /// the peer or the region is broken.
    Corrupt {
        /// Head as seen.
        head: u32,
        /// Tail as seen.
        tail: u32,
    },
}

/// The producing end of a ring.
#[derive(Debug)]
pub struct Producer {
    loc: RingLoc,
    head: u32,
}

impl Producer {
    /// A producer starting at index 0 (the ring must have been reset).
    pub fn new(loc: RingLoc) -> Producer {
        debug_assert!(loc.slots.is_power_of_two());
        Producer { loc, head: 0 }
    }

    /// Where the ring lives.
    pub fn loc(&self) -> RingLoc {
        self.loc
    }

    /// Descriptors published so far (the head index, wrapping): a change
    /// means the consumer got something.
    pub fn published(&self) -> u32 {
        self.head
    }

    /// Free slots as seen now.
    pub fn free(&self, mem: &(impl SharedMem + ?Sized)) -> Result<u32, RingError> {
        let tail = mem.load_u32(self.loc.tail_off());
        let used = self.head.wrapping_sub(tail);
        if used > self.loc.slots {
            return Err(RingError::Corrupt {
                head: self.head,
                tail,
            });
        }
        Ok(self.loc.slots - used)
    }

    /// Append one descriptor and publish it.
    pub fn push(&mut self, mem: &(impl SharedMem + ?Sized), d: &Desc) -> Result<(), RingError> {
        if self.free(mem)? == 0 {
            return Err(RingError::Full);
        }
        mem.write(self.loc.slot_off(self.head), d);
        self.head = self.head.wrapping_add(1);
        mem.store_u32(self.loc.head_off(), self.head);
        Ok(())
    }
}

/// The consuming end of a ring.
#[derive(Debug)]
pub struct Consumer {
    loc: RingLoc,
    tail: u32,
}

impl Consumer {
    /// A consumer starting at index 0 (the ring must have been reset).
    pub fn new(loc: RingLoc) -> Consumer {
        debug_assert!(loc.slots.is_power_of_two());
        Consumer { loc, tail: 0 }
    }

    /// Where the ring lives.
    pub fn loc(&self) -> RingLoc {
        self.loc
    }

    /// Descriptors waiting.
    pub fn pending(&self, mem: &(impl SharedMem + ?Sized)) -> Result<u32, RingError> {
        let head = mem.load_u32(self.loc.head_off());
        let n = head.wrapping_sub(self.tail);
        if n > self.loc.slots {
            return Err(RingError::Corrupt {
                head,
                tail: self.tail,
            });
        }
        Ok(n)
    }

    /// Take the next descriptor, if any.
    pub fn pop(&mut self, mem: &(impl SharedMem + ?Sized)) -> Result<Option<Desc>, RingError> {
        if self.pending(mem)? == 0 {
            return Ok(None);
        }
        let mut d = [0u8; DESC_SIZE];
        mem.read(self.loc.slot_off(self.tail), &mut d);
        self.tail = self.tail.wrapping_add(1);
        mem.store_u32(self.loc.tail_off(), self.tail);
        Ok(Some(d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::HeapShm;

    fn desc(v: u8) -> Desc {
        [v; DESC_SIZE]
    }

    #[test]
    fn fifo_order_full_and_empty() {
        let mem = HeapShm::new(RingLoc::bytes(8));
        let loc = RingLoc { off: 0, slots: 8 };
        let mut p = Producer::new(loc);
        let mut c = Consumer::new(loc);
        assert_eq!(c.pop(&*mem), Ok(None));
        for i in 0..8 {
            p.push(&*mem, &desc(i)).unwrap();
        }
        assert_eq!(p.push(&*mem, &desc(99)), Err(RingError::Full));
        for i in 0..8 {
            assert_eq!(c.pop(&*mem), Ok(Some(desc(i))));
        }
        assert_eq!(c.pop(&*mem), Ok(None));
    }

    #[test]
    fn wraps_around_u32() {
        let mem = HeapShm::new(RingLoc::bytes(4));
        let loc = RingLoc { off: 0, slots: 4 };
        let mut p = Producer::new(loc);
        let mut c = Consumer::new(loc);
        // Start both sides just below the wrap point.
        p.head = u32::MAX - 2;
        c.tail = u32::MAX - 2;
        mem.store_u32(0, p.head);
        mem.store_u32(64, c.tail);
        for round in 0..20u8 {
            p.push(&*mem, &desc(round)).unwrap();
            p.push(&*mem, &desc(round.wrapping_add(100))).unwrap();
            assert_eq!(c.pop(&*mem), Ok(Some(desc(round))));
            assert_eq!(c.pop(&*mem), Ok(Some(desc(round.wrapping_add(100)))));
        }
    }

    #[test]
    fn corrupt_peer_indices_are_detected_not_followed() {
        let mem = HeapShm::new(RingLoc::bytes(4));
        let loc = RingLoc { off: 0, slots: 4 };
        let mut p = Producer::new(loc);
        let mut c = Consumer::new(loc);
        // A peer writes a wild head: the consumer refuses it.
        mem.store_u32(0, 1000);
        assert!(matches!(c.pop(&*mem), Err(RingError::Corrupt { .. })));
        // A peer writes a tail ahead of our head: the producer refuses it.
        mem.store_u32(64, 7);
        assert!(matches!(
            p.push(&*mem, &desc(1)),
            Err(RingError::Corrupt { .. })
        ));
    }

    #[test]
    fn threads_exchange_many_descriptors() {
        use std::sync::Arc;
        let mem = Arc::new(HeapShm::new(RingLoc::bytes(16)));
        let loc = RingLoc { off: 0, slots: 16 };
        let n = 200_000u32;
        let m2 = Arc::clone(&mem);
        let prod = std::thread::spawn(move || {
            let mut p = Producer::new(loc);
            let mut i = 0u32;
            while i < n {
                let mut d = [0u8; DESC_SIZE];
                d[..4].copy_from_slice(&i.to_le_bytes());
                d[60..].copy_from_slice(&i.to_le_bytes());
                match p.push(&**m2, &d) {
                    Ok(()) => i += 1,
                    Err(RingError::Full) => std::hint::spin_loop(),
                    Err(e) => panic!("{e:?}"),
                }
            }
        });
        let mut c = Consumer::new(loc);
        let mut expect = 0u32;
        while expect < n {
            if let Some(d) = c.pop(&**mem).unwrap() {
                let a = u32::from_le_bytes(d[..4].try_into().unwrap());
                let b = u32::from_le_bytes(d[60..].try_into().unwrap());
                assert_eq!((a, b), (expect, expect), "torn or reordered descriptor");
                expect += 1;
            } else {
                std::hint::spin_loop();
            }
        }
        prod.join().unwrap();
    }
}
