//! Tearing pages down: a failed node, a shrunk or deleted file.

use alloc::vec::Vec;

use super::{bit, invalidate_all, Action, PageDir, Phase};

impl PageDir {
    /// Node `node` failed (heartbeat timeout) or rejoined: drop it from
    /// every sharer set (completing invalidations that waited for it) and
    /// tear down every page it owned (its sharers are told to unmap; dirty
    /// pages are written back from the frame first, best effort).
    pub fn node_failed(&mut self, node: u8) -> Vec<Action> {
        let mut out = Vec::new();
        if !self.node_ok(node) {
            return out;
        }
        for key in self.table.keys() {
            let Some(mut e) = self.table.get(&key) else {
                continue;
            };
            if e.owner == node {
                match e.phase {
                    Phase::Exclusive { .. } => {
                        self.table.remove(&key);
                        self.stale.remove(&key);
                    }
                    Phase::Owned => {
                        // The owner's stores into its own frame never
                        // reach the directory (its dirty bit died with
                        // it), but the frame lives in the region, which
                        // survived it: write it back once the sharers are
                        // gone. A clean frame holds the disk's bytes
                        // (fills, and file-server writes refresh it), so
                        // writing it again changes nothing.
                        e.dirty = true;
                        let pending = e.sharers;
                        e.phase = Phase::Invalidating { pending, tag: 0 };
                        self.store(key, &e);
                        invalidate_all(&mut self.stats, key, pending, &mut out);
                        self.settle(key, &mut out);
                    }
                    Phase::Invalidating { pending, .. } => {
                        // The owner's own ack (file eviction) will not come,
                        // nor will anybody wait for the answer.
                        let pending = pending & !bit(node);
                        e.sharers &= !bit(node);
                        e.phase = Phase::Invalidating { pending, tag: 0 };
                        self.store(key, &e);
                        self.settle(key, &mut out);
                    }
                }
            } else if e.sharers & bit(node) != 0 {
                e.sharers &= !bit(node);
                // The sharer may have written the frame (strong mode) and
                // its dirty bit died with it: write the page back to be safe.
                e.dirty = true;
                match e.phase {
                    Phase::Invalidating { pending, tag } => {
                        e.phase = Phase::Invalidating {
                            pending: pending & !bit(node),
                            tag,
                        };
                        self.store(key, &e);
                        self.settle(key, &mut out);
                    }
                    _ => {
                        self.store(key, &e);
                        if e.sharers == 0 {
                            out.push(Action::Export {
                                gfn: e.gfn,
                                on: false,
                            });
                        }
                    }
                }
            }
        }
        // After the teardown of its pages: a parked request served now
        // finds them gone, not mapped from a failed node's frame.
        self.deleg_node_failed(node, &mut out);
        self.coalesce(&mut out);
        out
    }

    /// The file shrank or went away: tear down every cached page of `ino`
    /// from page `from_idx` on (no write-back: the data is gone). The
    /// sharers are told to drop the page first; once they all acked, the
    /// frame is unexported and the owner told to free it (never earlier: a
    /// sharer could still be using the frame); the entry leaves with the
    /// owner's ack. Pages in E or already in TBI are left alone (their
    /// installer will find the file's size when it commits; an owner's
    /// invalidation completes with its write-back as usual).
    ///
    /// Each node is told with one INV_RANGE per run of contiguous pages it
    /// maps or owns (one for a file it holds whole) and acks each once;
    /// only pages that await its ack are in a run, so a page it got anew
    /// meanwhile (a gap) is never torn down by it.
    pub fn evict_file(&mut self, ino: u64, from_idx: u64) -> Vec<Action> {
        self.evict_file_by(ino, from_idx, None)
    }

    /// [`PageDir::evict_file`] for a cut made by node `by` (`None`: by
    /// no node, or unknown): a delegation's holder cut its own list
    /// before it asked, so its ranges need no notice (see `deleg.rs`).
    pub fn evict_file_by(&mut self, ino: u64, from_idx: u64, by: Option<u8>) -> Vec<Action> {
        let mut out = Vec::new();
        if !self.delegs.is_empty() {
            self.cut_delegations(ino, from_idx, by, &mut out);
        }
        for key in self.table.keys_from(ino, from_idx) {
            let Some(mut e) = self.table.get(&key) else {
                continue;
            };
            if e.phase != Phase::Owned {
                continue;
            }
            e.dirty = false;
            let pending = e.sharers;
            // The owner's bit marks "still to be told" (see `settle`).
            e.sharers |= bit(e.owner);
            e.phase = Phase::Invalidating { pending, tag: 0 };
            self.store(key, &e);
            self.evicting.insert(key, false);
            invalidate_all(&mut self.stats, key, pending, &mut out);
            self.settle(key, &mut out);
        }
        self.coalesce(&mut out);
        out
    }

    /// Does any entry still use a frame of `node`'s pool (as owner)? A
    /// rejoining node must not reuse its frames before this is false.
    pub fn holds_frames_of(&self, node: u8) -> bool {
        self.table.iter().any(|(_, e)| e.owner == node)
            || self.delegs.values().any(|d| d.holder == node)
    }
}
