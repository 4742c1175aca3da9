//! Eviction lists, as cache_ext gives them to its policies (`list_create`,
//! `list_add`, `list_move`, `list_del`, and an iterator with two modes:
//! simple, where a callback decides page by page, and batch scoring, where
//! N pages are scored and the lowest proposed). Here they are doubly linked
//! lists over one arena, indexed by page, so every operation is O(log n).
//! Each page is in at most one list and carries a `meta` word its policy
//! owns (a frequency, a reference bit: what cache_ext policies keep in BPF
//! maps keyed by folio), plus what the cache knows of it: the sharer count
//! the directory reported and the last access time.

use crate::keymap::KeyMap;
use alloc::vec::Vec;

use fabric::proto::PageKey;

use super::EvictCtx;

/// A list handle from [`Lists::list_create`].
pub type ListId = usize;

/// Index of an entry in the arena.
type Slot = usize;

#[derive(Debug, Clone)]
struct Entry {
    key: PageKey,
    list: ListId,
    prev: Option<Slot>,
    next: Option<Slot>,
    meta: u64,
    sharers: u32,
    atime: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Ends {
    head: Option<Slot>,
    tail: Option<Slot>,
    len: usize,
}

/// Why a list operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListError {
    /// No such list.
    NoList,
    /// `list_add` of a page that is in a list already.
    Present,
    /// The page is in no list.
    Absent,
}

/// What a simple-mode iteration callback decides for one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iter {
    /// Propose it for eviction and go on.
    Evict,
    /// Leave it where it is and go on.
    Continue,
    /// Move it to the tail of this list (second chance) and go on.
    MoveTail,
    /// Move it to the tail of another list and go on.
    MoveTo(ListId),
    /// Stop iterating.
    Stop,
}

/// What an iteration callback sees of a page.
#[derive(Debug)]
pub struct View<'a> {
    /// The page.
    pub key: PageKey,
    /// The policy's word for this page (writable).
    pub meta: &'a mut u64,
    /// Nodes mapping it, as the directory last reported (0: none known).
    pub sharers: u32,
    /// Last access (the cache's clock, nanoseconds).
    pub atime: u64,
}

/// Where an iteration starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// The head (oldest added at the tail).
    Head,
    /// The tail.
    Tail,
}

/// Every eviction list of one cache.
#[derive(Debug, Default)]
pub struct Lists {
    arena: Vec<Option<Entry>>,
    free: Vec<Slot>,
    index: KeyMap<Slot>,
    ends: Vec<Ends>,
}

impl Lists {
    /// No lists.
    pub fn new() -> Lists {
        Lists::default()
    }

    /// A new, empty list.
    pub fn list_create(&mut self) -> ListId {
        self.ends.push(Ends::default());
        self.ends.len() - 1
    }

    /// Pages in `list` (0 for an unknown list).
    pub fn len(&self, list: ListId) -> usize {
        self.ends.get(list).map_or(0, |e| e.len)
    }

    /// Every page, list by list (in creation order), head first.
    pub fn all_keys(&self) -> Vec<PageKey> {
        let mut v = Vec::with_capacity(self.total());
        for l in 0..self.ends.len() {
            v.extend(self.keys(l));
        }
        v
    }

    /// Pages in every list.
    pub fn total(&self) -> usize {
        self.index.len()
    }

    /// Is `key` in a list?
    pub fn contains(&self, key: &PageKey) -> bool {
        self.index.contains_key(key)
    }

    /// The list `key` is in.
    pub fn list_of(&self, key: &PageKey) -> Option<ListId> {
        self.entry(key).map(|e| e.list)
    }

    /// The policy's word of `key` (0 if absent).
    pub fn meta(&self, key: &PageKey) -> u64 {
        self.entry(key).map_or(0, |e| e.meta)
    }

    /// Set the policy's word of `key` (ignored if absent).
    pub fn set_meta(&mut self, key: &PageKey, meta: u64) {
        if let Some(e) = self.entry_mut(key) {
            e.meta = meta;
        }
    }

    /// The sharer count of `key` the directory last reported.
    pub fn sharers(&self, key: &PageKey) -> u32 {
        self.entry(key).map_or(0, |e| e.sharers)
    }

    /// Record the sharer count of `key` (the cache does it).
    pub fn set_sharers(&mut self, key: &PageKey, n: u32) {
        if let Some(e) = self.entry_mut(key) {
            e.sharers = n;
        }
    }

    /// Last access time of `key`.
    pub fn atime(&self, key: &PageKey) -> Option<u64> {
        self.entry(key).map(|e| e.atime)
    }

    /// Record an access time (the cache does it).
    pub fn touch(&mut self, key: &PageKey, now: u64) {
        if let Some(e) = self.entry_mut(key) {
            e.atime = now;
        }
    }

    /// The first page of `list`.
    pub fn front(&self, list: ListId) -> Option<PageKey> {
        self.ends.get(list)?.head.map(|s| self.at(s).key)
    }

    /// The last page of `list`.
    pub fn back(&self, list: ListId) -> Option<PageKey> {
        self.ends.get(list)?.tail.map(|s| self.at(s).key)
    }

    /// The page after `key` in its list (towards the tail).
    pub fn next(&self, key: &PageKey) -> Option<PageKey> {
        self.entry(key)?.next.map(|s| self.at(s).key)
    }

    /// The pages of `list`, head first.
    pub fn keys(&self, list: ListId) -> Vec<PageKey> {
        let mut v = Vec::with_capacity(self.len(list));
        let mut cur = self.ends.get(list).and_then(|e| e.head);
        while let Some(s) = cur {
            v.push(self.at(s).key);
            cur = self.at(s).next;
        }
        v
    }

    /// Add `key` to `list` at its tail (or head); its word starts at 0.
    pub fn list_add(&mut self, list: ListId, key: PageKey, tail: bool) -> Result<(), ListError> {
        if list >= self.ends.len() {
            return Err(ListError::NoList);
        }
        if self.index.contains_key(&key) {
            return Err(ListError::Present);
        }
        let e = Entry {
            key,
            list,
            prev: None,
            next: None,
            meta: 0,
            sharers: 0,
            atime: 0,
        };
        let s = match self.free.pop() {
            Some(s) => {
                self.arena[s] = Some(e);
                s
            }
            None => {
                self.arena.push(Some(e));
                self.arena.len() - 1
            }
        };
        self.index.insert(key, s);
        self.link(s, list, tail);
        Ok(())
    }

    /// Move `key` to the tail (or head) of `list` (its word is kept).
    pub fn list_move(&mut self, list: ListId, key: &PageKey, tail: bool) -> Result<(), ListError> {
        if list >= self.ends.len() {
            return Err(ListError::NoList);
        }
        let s = *self.index.get(key).ok_or(ListError::Absent)?;
        self.unlink(s);
        self.link(s, list, tail);
        Ok(())
    }

    /// Take `key` out of its list.
    pub fn list_del(&mut self, key: &PageKey) -> Result<(), ListError> {
        let s = self.index.remove(key).ok_or(ListError::Absent)?;
        self.unlink(s);
        self.arena[s] = None;
        self.free.push(s);
        Ok(())
    }

    /// Empty every list (the lists themselves stay).
    pub fn clear(&mut self) {
        self.arena.clear();
        self.free.clear();
        self.index.clear();
        for e in &mut self.ends {
            *e = Ends::default();
        }
    }

    /// Simple mode: walk `list` from `from`, asking `f` about each page,
    /// until `ctx` has what it asked for, `f` says [`Iter::Stop`], or every
    /// page was seen twice (a page moved to the tail is met again once:
    /// what CLOCK's second chance needs). Pages proposed stay in their list
    /// until the cache takes them.
    pub fn iterate(
        &mut self,
        list: ListId,
        from: From,
        ctx: &mut EvictCtx,
        mut f: impl FnMut(View<'_>) -> Iter,
    ) {
        let Some(ends) = self.ends.get(list).copied() else {
            return;
        };
        let mut budget = ends.len.saturating_mul(2);
        let mut cur = match from {
            From::Head => ends.head,
            From::Tail => ends.tail,
        };
        while let Some(s) = cur {
            if ctx.full() || budget == 0 {
                break;
            }
            budget -= 1;
            let e = self.arena[s].as_mut().expect("linked slot is live");
            let after = match from {
                From::Head => e.next,
                From::Tail => e.prev,
            };
            let key = e.key;
            let v = View {
                key,
                meta: &mut e.meta,
                sharers: e.sharers,
                atime: e.atime,
            };
            match f(v) {
                Iter::Evict => {
                    ctx.propose(key);
                }
                Iter::Continue => {}
                Iter::MoveTail => {
                    self.unlink(s);
                    self.link(s, list, true);
                }
                Iter::MoveTo(other) if other < self.ends.len() => {
                    self.unlink(s);
                    self.link(s, other, true);
                }
                Iter::MoveTo(_) => {}
                Iter::Stop => break,
            }
            cur = after;
        }
    }

    /// Simple mode proposing every page met: `list` in order from `from`
    /// until `ctx` is full (the walk FIFO, LRU, MRU and the fallbacks of
    /// the multi-list policies share).
    pub fn take_in_order(&mut self, list: ListId, from: From, ctx: &mut EvictCtx) {
        self.iterate(list, from, ctx, |_| Iter::Evict);
    }

    /// Batch-scoring mode: score the first `sample` pages of `list` (from
    /// the head) with `score`, propose the lowest-scored ones (ties: nearer
    /// the head first) until `ctx` has what it asked for. `requeue`: the
    /// pages scored but not proposed move to the tail, so the next call
    /// samples others (cache_ext's "continue at the tail").
    pub fn score(
        &mut self,
        list: ListId,
        sample: usize,
        requeue: bool,
        ctx: &mut EvictCtx,
        mut score: impl FnMut(View<'_>) -> i64,
    ) {
        let mut scored: Vec<(i64, usize, Slot)> = Vec::new();
        let mut cur = self.ends.get(list).and_then(|e| e.head);
        while let Some(s) = cur {
            if scored.len() >= sample {
                break;
            }
            let e = self.arena[s].as_mut().expect("linked slot is live");
            cur = e.next;
            let v = View {
                key: e.key,
                meta: &mut e.meta,
                sharers: e.sharers,
                atime: e.atime,
            };
            let pos = scored.len();
            scored.push((score(v), pos, s));
        }
        scored.sort_unstable();
        let mut kept = Vec::new();
        for (_, pos, s) in scored {
            if ctx.full() {
                kept.push((pos, s));
                continue;
            }
            ctx.propose(self.at(s).key);
        }
        if requeue {
            kept.sort_unstable();
            for (_, s) in kept {
                self.unlink(s);
                self.link(s, list, true);
            }
        }
    }

    fn entry(&self, key: &PageKey) -> Option<&Entry> {
        self.index.get(key).map(|s| self.at(*s))
    }

    fn entry_mut(&mut self, key: &PageKey) -> Option<&mut Entry> {
        let s = *self.index.get(key)?;
        self.arena[s].as_mut()
    }

    fn at(&self, s: Slot) -> &Entry {
        self.arena[s].as_ref().expect("indexed slot is live")
    }

    fn link(&mut self, s: Slot, list: ListId, tail: bool) {
        let ends = self.ends[list];
        let e = self.arena[s].as_mut().expect("slot is live");
        e.list = list;
        if tail {
            e.prev = ends.tail;
            e.next = None;
            match ends.tail {
                Some(t) => self.arena[t].as_mut().expect("tail is live").next = Some(s),
                None => self.ends[list].head = Some(s),
            }
            self.ends[list].tail = Some(s);
        } else {
            e.next = ends.head;
            e.prev = None;
            match ends.head {
                Some(h) => self.arena[h].as_mut().expect("head is live").prev = Some(s),
                None => self.ends[list].tail = Some(s),
            }
            self.ends[list].head = Some(s);
        }
        self.ends[list].len += 1;
    }

    fn unlink(&mut self, s: Slot) {
        let (list, prev, next) = {
            let e = self.at(s);
            (e.list, e.prev, e.next)
        };
        match prev {
            Some(p) => self.arena[p].as_mut().expect("prev is live").next = next,
            None => self.ends[list].head = next,
        }
        match next {
            Some(n) => self.arena[n].as_mut().expect("next is live").prev = prev,
            None => self.ends[list].tail = prev,
        }
        self.ends[list].len -= 1;
    }
}
