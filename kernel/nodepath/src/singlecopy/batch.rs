//! Batched page calls: requests published together and their answers
//! collected, with the relaxed mode's deferred DROPs riding in front of a
//! batch (or sent on their own without waiting once a batch of them is
//! due) and late answers (a LOOKUP_LOCK given up whose E grant came after
//! all) given back.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use fabric::proto::{
    Errno, Op, PageKey, PageReply, PageReq, PageRun, PageSpan, Request, Response, RunReply,
};

use super::{ScState, BATCH, MAX_ABANDONED};

/// Most deferred DROPs in flight without waiting: past it, a new batch
/// first waits for the oldest answers (the directory is not keeping up).
pub(super) const MAX_DROPS_IN_FLIGHT: usize = 2 * BATCH;
use crate::env::Env;
use crate::link::Link;
use fabric::proto::op_of;

/// DROPs of `keys` (clean: a deferred DROP never carries data).
fn drop_reqs(keys: &[PageKey]) -> Vec<PageReq> {
    keys.iter()
        .map(|&key| PageReq::Drop { key, dirty: false })
        .collect()
}

/// Relaxed mode's deferred DROPs.
#[derive(Debug, Default)]
pub(super) struct Drops {
    /// Remote mappings replaced by private copies whose DROP
    /// is not sent yet. They go out in front of the next batch of page
    /// requests (so before any new request for the same page), or on
    /// their own once [`BATCH`] are waiting: a write that makes a private
    /// copy never waits for the directory.
    pending: Vec<PageKey>,
    /// Deferred DROPs sent without waiting (a full batch of
    /// them, see [`ScState::defer_drop`]), by tag, oldest first; their
    /// answers are stored by the link as they come and taken in by
    /// [`ScState::reap_drops`].
    in_flight: Vec<(u32, PageKey)>,
}

impl Drops {
    /// None unsent and none unanswered.
    pub(super) fn none(&self) -> bool {
        self.pending.is_empty() && self.in_flight.is_empty()
    }

    /// Forget them all (the session is gone).
    pub(super) fn clear(&mut self) {
        self.pending.clear();
        self.in_flight.clear();
    }
}

/// Exchanges given up unanswered, and late grants being given back.
#[derive(Debug, Default)]
pub(super) struct Late {
    /// LOOKUP_LOCKs and INVs given up unanswered, by tag (with their
    /// opcode). If an E grant comes late, nobody would ever UNLOCK it and
    /// every other node's request for the page would be told to retry
    /// until we leave: such a grant is given back with a DROP. If an
    /// eviction's answer comes late, the directory has forgotten the page
    /// and no DIR_INV will come for it: the frame held `Reclaiming` is
    /// freed then (or the page given back, if the INV was refused), else
    /// every later access of the page would wait for that DIR_INV for
    /// good (see [`ScState::late_answer`]).
    abandoned: BTreeMap<u32, (PageSpan, fabric::proto::Op)>,
    /// Late E grants being given back: page -> our orphan frame, freed
    /// once the directory answers the DROP.
    releasing: BTreeMap<PageKey, u64>,
}

impl Late {
    /// Remember the call `tag` on `span` (opcode `op`) given up
    /// unanswered, forgetting the oldest past [`MAX_ABANDONED`].
    pub(super) fn abandon(&mut self, tag: u32, span: PageSpan, op: fabric::proto::Op) {
        if self.abandoned.len() >= MAX_ABANDONED {
            self.abandoned.pop_first();
        }
        self.abandoned.insert(tag, (span, op));
    }

    /// No late grant being given back.
    pub(super) fn none_releasing(&self) -> bool {
        self.releasing.is_empty()
    }

    /// Forget them all (the session is gone).
    pub(super) fn clear(&mut self) {
        self.abandoned.clear();
        self.releasing.clear();
    }
}

impl ScState {
    /// Send `reqs` together and collect their answers in order; the first
    /// error answer (or the timeout) is returned, after every answer that
    /// can come has come.
    pub(super) fn page_calls<E: Env>(
        &mut self,
        link: &mut Link<E>,
        reqs: &[PageReq],
    ) -> Result<Vec<PageReply>, Errno> {
        let (answers, fatal) = self.page_batch(link, reqs);
        if let Some(e) = fatal {
            return Err(e);
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or(Err(Errno::Unavailable)))
            .collect()
    }

    /// Send `reqs` together and collect every answer: one per request,
    /// `None` where none came (not sent, or the wait gave up). The second
    /// value is why some answers are missing. An error answer to one page
    /// never stops the collection of the others.
    pub(super) fn page_batch<E: Env>(
        &mut self,
        link: &mut Link<E>,
        reqs: &[PageReq],
    ) -> (Vec<Option<Result<PageReply, Errno>>>, Option<Errno>) {
        for (tag, d) in link.take_late() {
            self.late_answer(tag, &d);
        }
        self.reap_drops(link);
        let drops = self.take_drops(reqs.len());
        if drops.is_empty() {
            return self.send_batch(link, reqs);
        }
        let mut all = drop_reqs(&drops);
        all.extend_from_slice(reqs);
        let (mut out, fatal) = self.send_batch(link, &all);
        let rest = out.split_off(drops.len());
        self.drops_answered(&drops, out);
        (rest, fatal)
    }

    /// Look at late answers now and give back late E grants at once
    /// (idle loop; see [`ScState::late_answer`]).
    pub fn release_late<E: Env>(&mut self, link: &mut Link<E>) -> Result<(), Errno> {
        for (tag, d) in link.take_late() {
            self.late_answer(tag, &d);
        }
        self.answer_recalls(link);
        self.reap_drops(link);
        if self
            .coh
            .as_ref()
            .is_some_and(|c| !c.late.releasing.is_empty())
        {
            self.flush_drops(link)?;
        }
        Ok(())
    }

    /// Relaxed mode: remember to DROP `key` (a remote mapping replaced by
    /// a private copy); once [`BATCH`] are waiting they go out now,
    /// without waiting for their answers (see [`ScState::send_drops`]): a
    /// write never waits for the directory in steady state.
    pub(super) fn defer_drop<E: Env>(
        &mut self,
        link: &mut Link<E>,
        key: PageKey,
    ) -> Result<(), Errno> {
        let due = match self.coh.as_mut() {
            Some(c) => {
                c.drops.pending.push(key);
                c.drops.pending.len() >= BATCH
            }
            None => false,
        };
        if due {
            self.send_drops(link)?;
        }
        Ok(())
    }

    /// Send the deferred DROPs without waiting for their answers: each is
    /// a call the link registers, whose answer whoever reads the response
    /// ring next stores; [`ScState::reap_drops`] takes them in. At most
    /// [`MAX_DROPS_IN_FLIGHT`] are out: past that, first wait for the
    /// oldest (a directory that does not answer makes every call give up
    /// at its timeout, so this wait ends).
    pub(super) fn send_drops<E: Env>(&mut self, link: &mut Link<E>) -> Result<(), Errno> {
        self.reap_drops(link);
        loop {
            let room = self.coh.as_ref().map_or(0, |c| {
                MAX_DROPS_IN_FLIGHT.saturating_sub(c.drops.in_flight.len())
            });
            if room >= BATCH.min(self.coh.as_ref().map_or(0, |c| c.drops.pending.len())) {
                break;
            }
            if !link.wait_calls(self) {
                return Err(Errno::Unavailable);
            }
            self.reap_drops(link);
        }
        let drops = self.take_drops(BATCH);
        for (i, key) in drops.iter().enumerate() {
            let req = Request::Page(PageReq::Drop {
                key: *key,
                dirty: false,
            });
            match link.start_call(&req, self) {
                Ok(tag) => {
                    if let Some(c) = self.coh.as_mut() {
                        c.drops.in_flight.push((tag, *key));
                    }
                }
                Err(e) => {
                    // Not sent: keep them for the next batch.
                    if let Some(c) = self.coh.as_mut() {
                        let mut back = drops[i..].to_vec();
                        back.append(&mut c.drops.pending);
                        c.drops.pending = back;
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Take in the answers to DROPs in flight that came (or gave up).
    pub(super) fn reap_drops<E: Env>(&mut self, link: &mut Link<E>) {
        let Some(c) = self.coh.as_mut() else { return };
        if c.drops.in_flight.is_empty() {
            return;
        }
        let mut done = Vec::new();
        let mut answers = Vec::new();
        c.drops
            .in_flight
            .retain(|&(tag, key)| match link.poll_call(tag, Op::PageDrop) {
                None => true,
                Some(r) => {
                    done.push(key);
                    answers.push(Some(match r {
                        Ok(Response::Page(p)) => Ok(p),
                        Ok(_) => Ok(PageReply::Refused),
                        Err(e) => Err(e),
                    }));
                    false
                }
            });
        self.drops_answered(&done, answers);
    }

    /// Send every deferred DROP now and wait for the answers of all DROPs
    /// in flight (fsync, `cache drop`, a late grant given back).
    pub fn flush_drops<E: Env>(&mut self, link: &mut Link<E>) -> Result<(), Errno> {
        let drops = self.take_drops(0);
        if !drops.is_empty() {
            let all = drop_reqs(&drops);
            let (out, fatal) = self.send_batch(link, &all);
            self.drops_answered(&drops, out);
            if let Some(e) = fatal {
                return Err(e);
            }
        }
        loop {
            self.reap_drops(link);
            if self
                .coh
                .as_ref()
                .is_none_or(|c| c.drops.in_flight.is_empty())
            {
                return Ok(());
            }
            if !link.wait_calls(self) {
                return Err(Errno::Unavailable);
            }
        }
    }

    /// The deferred DROPs that fit in front of `others` requests (the
    /// ring's slots bound a batch: at most `2 * BATCH` go out together).
    pub(super) fn take_drops(&mut self, others: usize) -> Vec<PageKey> {
        let room = (2 * BATCH).saturating_sub(others);
        match self.coh.as_mut() {
            Some(c) if room > 0 && !c.drops.pending.is_empty() => {
                let n = c.drops.pending.len().min(room);
                c.drops.pending.drain(..n).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The answers to deferred DROPs: an answered one is done; a refused
    /// one raced a DIR_INV that already took the mapping away (acked), and
    /// an unanswered one (the wait gave up) leaves at worst one stale
    /// sharer entry, whose next DIR_INV we acknowledge.
    pub(super) fn drops_answered(
        &mut self,
        drops: &[PageKey],
        answers: Vec<Option<Result<PageReply, Errno>>>,
    ) {
        let Some(c) = self.coh.as_mut() else { return };
        for (k, a) in drops.iter().zip(answers) {
            if let Some(Ok(reply)) = a {
                c.cache.drop_done(k);
                if let Some(gfn) = c.late.releasing.remove(k) {
                    if matches!(reply, PageReply::Done { .. }) {
                        c.cache.free_orphan(gfn);
                    }
                }
            }
        }
    }

    /// An answer whose call was given up. A late E grant of an abandoned
    /// LOOKUP_LOCK is given back (a DROP of a reservation we hold: the
    /// directory returns the page to I); other late answers need nothing
    /// (a late fill is adopted when the page is asked for again, see
    /// `NodeCache::apply_answer`).
    pub(super) fn late_answer(&mut self, tag: u32, d: &fabric::proto::Desc) {
        if self.deleg_late(tag, d) {
            return;
        }
        let Some(c) = self.coh.as_mut() else { return };
        let Some((span, op)) = c.late.abandoned.remove(&tag) else {
            return;
        };
        let key = PageKey {
            ino: span.ino,
            idx: span.first,
        };
        if op == Op::PageInvRun {
            let done = match Response::decode(d, op) {
                Ok((_, Response::Run(r))) => r.done,
                _ => 0,
            };
            log::debug!("late answer to the eviction of {span:?}");
            c.cache.run_answered(span, done);
            return;
        }
        let reply = match Response::decode(d, op) {
            Ok((_, Response::Page(p))) => Some(p),
            _ => None,
        };
        match (op, reply) {
            (fabric::proto::Op::PageLookupLock, Some(PageReply::Exclusive { gfn }))
                if c.cache.orphan_key(gfn) == Some(key) =>
            {
                log::debug!("late E grant of {key:?} in frame {gfn}: giving it back");
                c.late.releasing.insert(key, gfn);
                c.drops.pending.push(key);
            }
            (fabric::proto::Op::PageInv, Some(PageReply::Done { .. })) => {
                log::debug!("late answer to the eviction of {key:?}: frame freed");
                c.cache.reclaimed(&key);
            }
            (fabric::proto::Op::PageInv, _) => c.cache.reclaim_failed(&key),
            _ => {}
        }
    }

    /// [`ScState::page_batch`] without the deferred DROPs, timed as one
    /// round trip (see [`crate::link::Probe`]).
    pub(super) fn send_batch<E: Env>(
        &mut self,
        link: &mut Link<E>,
        reqs: &[PageReq],
    ) -> (Vec<Option<Result<PageReply, Errno>>>, Option<Errno>) {
        let t0 = link.env.now_ns();
        if let Some(c) = self.cache() {
            c.count_batch();
        }
        let r = self.exchange(link, reqs);
        link.add_round_trip(t0);
        r
    }

    /// [`ScState::send_batch`] without the timing.
    fn exchange<E: Env>(
        &mut self,
        link: &mut Link<E>,
        reqs: &[PageReq],
    ) -> (Vec<Option<Result<PageReply, Errno>>>, Option<Errno>) {
        let mut out: Vec<Option<Result<PageReply, Errno>>> = alloc::vec![None; reqs.len()];
        let mut tags = Vec::with_capacity(reqs.len());
        let mut fatal = None;
        for r in reqs {
            let req = Request::Page(*r);
            match link.send(&req, self) {
                Ok(tag) => tags.push((tag, op_of(&req))),
                Err(e) => {
                    fatal = Some(e);
                    break;
                }
            }
        }
        let ids: Vec<u32> = tags.iter().map(|(t, _)| *t).collect();
        let left = self.collect(
            link,
            &ids,
            &mut out,
            &mut fatal,
            |i, d| match Response::decode(d, tags[i].1) {
                Ok((_, Response::Page(p))) => Ok(p),
                Ok((_, Response::Err(e))) => Err(e),
                _ => Ok(PageReply::Refused),
            },
        );
        if left > 0 {
            // Given up: remember the LOOKUP_LOCKs, whose grant may still
            // come, and the INVs, whose pages stay held until an answer.
            if let Some(c) = self.coh.as_mut() {
                for (i, (tag, op)) in tags.iter().enumerate() {
                    let key = match (&out[i], reqs[i]) {
                        (None, PageReq::LookupLock { key, .. } | PageReq::Inv { key, .. }) => key,
                        _ => continue,
                    };
                    c.late.abandon(*tag, PageSpan::page(key), *op);
                }
            }
        }
        (out, fatal)
    }

    /// Wait for the answers to `tags` (sent together, in order), each
    /// decoded by `decode(i, bytes)` into `out[i]`; an answer to another
    /// tag is a late one. Stops early when the link gives up (`fatal`);
    /// returns how many are still unanswered.
    pub(super) fn collect<E: Env, T>(
        &mut self,
        link: &mut Link<E>,
        tags: &[u32],
        out: &mut [Option<T>],
        fatal: &mut Option<Errno>,
        decode: impl Fn(usize, &[u8; 64]) -> T,
    ) -> usize {
        let mut left = tags.len();
        while left > 0 {
            match link.recv() {
                Ok(Some((tag, d))) => {
                    let Some(i) = tags.iter().position(|t| *t == tag) else {
                        // A late answer to an abandoned call.
                        self.late_answer(tag, &d);
                        continue;
                    };
                    if out[i].replace(decode(i, &d)).is_none() {
                        left -= 1;
                    }
                }
                Ok(None) => {
                    if !link.wait(self) {
                        fatal.get_or_insert(Errno::Unavailable);
                        break;
                    }
                    // A RECALL serviced in the wait is answered now: the
                    // answer this waits for may wait for it.
                    self.answer_recalls(link);
                }
                Err(e) => {
                    fatal.get_or_insert(e);
                    break;
                }
            }
        }
        left
    }

    /// Send `runs` together (at most [`BATCH`]) and collect their answers
    /// in order, as [`ScState::page_batch`]: `None` where none came, the
    /// second value why. A given-up INV run is remembered: its late answer
    /// frees (or gives back) its pages.
    pub(super) fn run_batch<E: Env>(
        &mut self,
        link: &mut Link<E>,
        runs: &[PageRun],
    ) -> (Vec<Option<Result<RunReply, Errno>>>, Option<Errno>) {
        for (tag, d) in link.take_late() {
            self.late_answer(tag, &d);
        }
        let t0 = link.env.now_ns();
        if let Some(c) = self.cache() {
            c.count_batch();
        }
        let mut out: Vec<Option<Result<RunReply, Errno>>> = alloc::vec![None; runs.len()];
        let mut tags = Vec::with_capacity(runs.len());
        let mut fatal = None;
        for r in runs {
            match link.send(&Request::PageRun(*r), self) {
                Ok(tag) => {
                    tags.push(tag);
                    if let (Some(c), fabric::proto::RunKind::Inv) = (self.cache(), r.kind) {
                        c.count_inv_entry();
                    }
                }
                Err(e) => {
                    fatal = Some(e);
                    break;
                }
            }
        }
        let left = self.collect(
            link,
            &tags,
            &mut out,
            &mut fatal,
            |i, d| match Response::decode(d, runs[i].kind.op()) {
                Ok((_, Response::Run(r))) => Ok(r),
                Ok((_, Response::Err(e))) => Err(e),
                _ => Ok(RunReply::default()),
            },
        );
        if left > 0 {
            if let Some(c) = self.coh.as_mut() {
                for (i, tag) in tags.iter().enumerate() {
                    if out[i].is_some() || runs[i].kind != fabric::proto::RunKind::Inv {
                        continue;
                    }
                    c.late.abandon(*tag, runs[i].span, Op::PageInvRun);
                }
            }
        }
        link.add_round_trip(t0);
        (out, fatal)
    }
}
