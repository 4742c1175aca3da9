//! The order of one `net` mode connection's answers. The node's client
//! matches every answer to its oldest request still outstanding
//! (`nodepath::netclient`), so the directory must answer a connection's
//! requests in the order they came, even when a later one (a metadata
//! call, a read of cached data) is ready before an earlier one waiting
//! for the disk. [`AnswerOrder`] gives each request a token, takes
//! answers in any order, and releases them in request order.
//!
//! A token carries the connection's generation: after
//! [`AnswerOrder::reset`] (the connection closed, the node failed or
//! rejoined) answers to the old connection's requests are dropped.

use alloc::collections::VecDeque;

/// Requests of one connection whose answers are not released yet.
#[derive(Debug)]
pub struct AnswerOrder<T> {
    /// Generation of the current connection (the token's high half).
    generation: u32,
    /// Sequence number of the oldest request in `waiting`.
    head: u32,
    /// Requests in order: `Some` once answered.
    waiting: VecDeque<Option<T>>,
}

impl<T> Default for AnswerOrder<T> {
    fn default() -> Self {
        AnswerOrder::new()
    }
}

impl<T> AnswerOrder<T> {
    /// No request waiting, generation 0.
    pub fn new() -> AnswerOrder<T> {
        AnswerOrder {
            generation: 0,
            head: 0,
            waiting: VecDeque::new(),
        }
    }

    /// Requests not released yet (answered or not).
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Nothing waiting?
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Is the oldest request answered (will [`AnswerOrder::release`]
    /// give something)?
    pub fn ready(&self) -> bool {
        matches!(self.waiting.front(), Some(Some(_)))
    }

    /// A new connection: forget every request of the old one (their
    /// answers, when they come, are dropped).
    pub fn reset(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.head = 0;
        self.waiting.clear();
    }

    /// The next request in order; its token. `answer`: its answer if it
    /// is ready now.
    pub fn push(&mut self, answer: Option<T>) -> u64 {
        let seq = self.head.wrapping_add(self.waiting.len() as u32);
        self.waiting.push_back(answer);
        (u64::from(self.generation) << 32) | u64::from(seq)
    }

    /// The answer to the request of `token`. False (and the answer is
    /// dropped) if the token is not one of this connection's requests
    /// waiting for an answer: an old connection's, never given, or
    /// answered already.
    pub fn answer(&mut self, token: u64, answer: T) -> bool {
        if (token >> 32) as u32 != self.generation {
            return false;
        }
        let i = (token as u32).wrapping_sub(self.head) as usize;
        match self.waiting.get_mut(i) {
            Some(slot @ None) => {
                *slot = Some(answer);
                true
            }
            _ => false,
        }
    }

    /// The answers that may go out now, in request order: the oldest
    /// answered requests up to the first one still waiting.
    pub fn release(&mut self) -> impl Iterator<Item = T> + '_ {
        core::iter::from_fn(move || {
            if !self.ready() {
                return None;
            }
            self.head = self.head.wrapping_add(1);
            self.waiting.pop_front().flatten()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use alloc::vec::Vec;

    #[test]
    fn answers_ready_at_once_go_out_in_order() {
        let mut o = AnswerOrder::new();
        o.push(Some(1));
        o.push(Some(2));
        assert_eq!(o.release().collect::<Vec<_>>(), [1, 2]);
        assert!(o.is_empty());
    }

    #[test]
    fn a_later_answer_waits_for_an_earlier_one() {
        let mut o = AnswerOrder::new();
        let a = o.push(None);
        o.push(Some(2));
        let c = o.push(None);
        o.push(Some(4));
        assert_eq!(o.release().count(), 0);
        assert!(o.answer(c, 3));
        assert_eq!(o.release().count(), 0, "the first is still waiting");
        assert!(o.answer(a, 1));
        assert_eq!(o.release().collect::<Vec<_>>(), [1, 2, 3, 4]);
    }

    #[test]
    fn stale_unknown_and_repeated_tokens_are_dropped() {
        let mut o = AnswerOrder::new();
        let old = o.push(None);
        o.reset();
        let new = o.push(None);
        assert_eq!(old & 0xffff_ffff, new & 0xffff_ffff, "same sequence number");
        assert!(!o.answer(old, 1), "the old connection's answer");
        assert!(!o.answer(new + 5, 1), "never given");
        assert!(o.answer(new, 2));
        assert!(!o.answer(new, 3), "answered already");
        assert_eq!(o.release().collect::<Vec<_>>(), [2]);
        assert!(!o.answer(new, 4), "released already");
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut o: AnswerOrder<u32> = AnswerOrder::new();
        o.head = u32::MAX - 2;
        let toks: Vec<u64> = (0..6).map(|_| o.push(None)).collect();
        for (k, t) in toks.iter().enumerate().rev() {
            assert!(o.answer(*t, k as u32));
        }
        assert_eq!(o.release().collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
    }

    /// Answers in random order (some ready at once) always come out in
    /// request order, each once.
    #[test]
    fn random_completion_orders_release_in_request_order() {
        for seed in 0..200 {
            let mut rng = SplitMix64::new(seed);
            let mut o = AnswerOrder::new();
            let mut pending = Vec::new();
            let mut out = Vec::new();
            let mut next = 0u32;
            for _ in 0..300 {
                if rng.below(2) == 0 {
                    if rng.below(3) == 0 {
                        o.push(Some(next));
                    } else {
                        pending.push((o.push(None), next));
                    }
                    next += 1;
                } else if !pending.is_empty() {
                    let i = rng.below(pending.len() as u64) as usize;
                    let (t, v) = pending.swap_remove(i);
                    assert!(o.answer(t, v));
                }
                out.extend(o.release());
            }
            for (t, v) in pending.drain(..) {
                assert!(o.answer(t, v));
            }
            out.extend(o.release());
            assert_eq!(out, (0..next).collect::<Vec<_>>(), "seed {seed}");
        }
    }
}
