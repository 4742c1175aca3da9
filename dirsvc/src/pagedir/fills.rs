//! Fills from disk: their completion (E -> O, or the reader told to
//! retry or of an error) and fills made stale by a change of their
//! blocks while they flew.

use alloc::vec::Vec;

use fabric::proto::{PageKey, PageReply};

use super::{Action, PageDir, Phase};

impl PageDir {
    /// The fill of `key` (an [`Action::Fill`]) finished; `ok` is false on
    /// a disk error. Commits E -> O and answers the reader.
    pub fn filled(&mut self, key: PageKey, ok: bool) -> Vec<Action> {
        let mut out = Vec::new();
        let stale = self.stale.remove(&key);
        let Some(mut e) = self.table.get(&key) else {
            return out; // the reader failed meanwhile
        };
        let Phase::Exclusive { by_dir: true, tag } = e.phase else {
            return out;
        };
        let node = e.owner;
        let reply = if stale {
            // Its block changed meanwhile: the reader asks again and is
            // filled with the new bytes.
            self.table.remove(&key);
            self.stats.retries += 1;
            PageReply::Retry
        } else if ok {
            e.phase = Phase::Owned;
            self.store(key, &e);
            PageReply::Owner { gfn: e.gfn }
        } else {
            self.table.remove(&key);
            PageReply::IoError
        };
        out.push(Action::Reply { node, tag, reply });
        out
    }

    /// The blocks of file `ino` behind pages `from_idx..=to_idx` changed
    /// (a write, a truncation, an unlink): fills from disk of those pages
    /// still in flight read older bytes. Each is marked stale, and its
    /// completion ([`PageDir::filled`]) answers the reader `Retry` instead
    /// of committing the page, so the directory need not wait for them
    /// before changing the file. Returns how many were marked.
    pub fn stale_fills(&mut self, ino: u64, from_idx: u64, to_idx: u64) -> usize {
        let mut n = 0;
        for key in self.table.keys_between(ino, from_idx, to_idx) {
            let filling = self
                .table
                .get(&key)
                .is_some_and(|e| matches!(e.phase, Phase::Exclusive { by_dir: true, .. }));
            if filling && self.stale.insert(key) {
                n += 1;
            }
        }
        n
    }

    /// Is the fill of `key` stale (see [`PageDir::stale_fills`])?
    pub fn fill_is_stale(&self, key: &PageKey) -> bool {
        self.stale.contains(key)
    }
}
