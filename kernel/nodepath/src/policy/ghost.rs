//! A ghost list: keys of pages evicted recently, without their data, in
//! insertion order and bounded (the oldest fall out). S3-FIFO and ARC use
//! one to notice a page that comes back soon after its eviction.

use alloc::collections::{BTreeMap, VecDeque};

use fabric::proto::PageKey;

/// A bounded FIFO set of page keys.
#[derive(Debug, Default)]
pub struct Ghost {
    order: VecDeque<(PageKey, u64)>,
    live: BTreeMap<PageKey, u64>,
    seq: u64,
}

impl Ghost {
    /// Keys held.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Is it empty?
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Is `key` a ghost?
    pub fn contains(&self, key: &PageKey) -> bool {
        self.live.contains_key(key)
    }

    /// Remember `key`, then forget the oldest keys beyond `cap`.
    pub fn insert(&mut self, key: PageKey, cap: usize) {
        self.seq += 1;
        self.live.insert(key, self.seq);
        self.order.push_back((key, self.seq));
        self.shrink(cap);
    }

    /// Forget `key`; true if it was there.
    pub fn remove(&mut self, key: &PageKey) -> bool {
        self.live.remove(key).is_some()
    }

    /// Forget the oldest keys until at most `cap` are left.
    pub fn shrink(&mut self, cap: usize) {
        while self.live.len() > cap {
            let Some((k, s)) = self.order.pop_front() else {
                break;
            };
            if self.live.get(&k) == Some(&s) {
                self.live.remove(&k);
            }
        }
        // Stale order entries (removed keys) are dropped lazily; keep the
        // queue from growing without bound.
        if self.order.len() > 2 * self.live.len() + 64 {
            let live = &self.live;
            self.order.retain(|(k, s)| live.get(k) == Some(s));
        }
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        self.order.clear();
        self.live.clear();
    }
}
