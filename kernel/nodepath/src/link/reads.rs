//! Several file-server reads in flight together over the rings.
//!
//! Each node has one bulk slot for reads (slot 1). A batch of reads is
//! cut into groups whose data fits that slot side by side: request `k`
//! of a group names a sub-slot (`Request::Data { at, .. }`, the byte
//! offset in the slot where its answer goes; the directory checks
//! `at + len` against the slot's capacity in the validated layout). A
//! group's requests are published together, their answers collected in
//! any order, then each one's bytes are copied from its sub-slot. So a
//! batch of 8 missing 4 KiB pages costs one round trip, not 8.

use alloc::vec;
use alloc::vec::Vec;

use fabric::proto::{Errno, Op, Request, Response};

use super::Link;
use crate::env::Env;
use crate::link::Session;

/// Most reads of one group in flight together (half a ring: the rest is
/// left for notices' acks and other requests).
pub const MAX_RING_READS: usize = 32;

/// One read of a group: its index in the batch, the request sent (with
/// its sub-slot), and where its data goes in slot 1.
struct Sub {
    idx: usize,
    req: Request,
    at: usize,
    len: usize,
}

impl<E: Env> Link<E> {
    /// Wait for the answers of a group of requests published together
    /// (`tags[k]`: request `k`'s tag, `None` if it was not sent), decoded
    /// as `op`'s, by index. Answers of other tags are kept as late (a
    /// registered call's is stored for its poll). `Err` only if the
    /// directory is unavailable.
    pub(super) fn collect_answers(
        &mut self,
        tags: &[Option<u32>],
        op: Op,
        svc: &mut dyn Session<E>,
    ) -> Result<Vec<Option<Response>>, Errno> {
        let mut answers: Vec<Option<Response>> = vec![None; tags.len()];
        let mut left = tags.iter().filter(|t| t.is_some()).count();
        while left > 0 {
            match self.recv()? {
                Some((tag, d)) => {
                    let Some(k) = tags.iter().position(|t| *t == Some(tag)) else {
                        self.keep_late(tag, d); // an abandoned call's answer
                        continue;
                    };
                    let Some(slot) = answers.get_mut(k).filter(|s| s.is_none()) else {
                        continue; // a duplicate tag: late
                    };
                    *slot = Some(match Response::decode(&d, op) {
                        Ok((_, r)) => r,
                        Err(_) => Response::Err(Errno::Io),
                    });
                    left -= 1;
                }
                None => {
                    if !self.wait(svc) {
                        return Err(Errno::Unavailable);
                    }
                }
            }
        }
        Ok(answers)
    }

    /// [`Link::fs_read_batch`] on the rings: groups of up to
    /// [`Link::ring_reads`] requests whose data fits slot 1 side by side,
    /// each group's requests in flight together. Only reads into slot 1
    /// are accepted (another request is answered `Invalid` in place).
    pub(super) fn ring_read_batch(
        &mut self,
        reqs: &[Request],
        svc: &mut dyn Session<E>,
    ) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
        let cap = self.bulk_cap(1)?;
        let most = self.ring_reads.clamp(1, MAX_RING_READS);
        let mut out: Vec<Option<(Response, Vec<u8>)>> = (0..reqs.len()).map(|_| None).collect();
        let mut next = 0usize;
        while next < reqs.len() {
            let mut group: Vec<Sub> = Vec::new();
            let mut used = 0usize;
            while let Some(req) = reqs.get(next) {
                if group.len() >= most {
                    break;
                }
                let Request::Data {
                    op: Op::Read,
                    slot: 1,
                    at: 0,
                    ino,
                    offset,
                    len,
                    gen,
                } = *req
                else {
                    put(&mut out, next, Response::Err(Errno::Invalid), Vec::new());
                    next += 1;
                    continue;
                };
                let n = len as usize;
                if n > cap {
                    put(&mut out, next, Response::Err(Errno::Invalid), Vec::new());
                    next += 1;
                    continue;
                }
                if used + n > cap {
                    break; // the slot is full: the next group
                }
                group.push(Sub {
                    idx: next,
                    req: Request::Data {
                        gen,
                        op: Op::Read,
                        slot: 1,
                        at: used as u32,
                        ino,
                        offset,
                        len,
                    },
                    at: used,
                    len: n,
                });
                used += n;
                next += 1;
            }
            if !group.is_empty() {
                self.ring_read_group(&group, &mut out, svc)?;
            }
        }
        Ok(out
            .into_iter()
            .map(|o| o.unwrap_or((Response::Err(Errno::Io), Vec::new())))
            .collect())
    }

    /// Send a group's requests together, collect every answer, copy each
    /// one's data from its sub-slot. `Err` only if the directory is
    /// unavailable (the batch is abandoned, as a single call would be).
    fn ring_read_group(
        &mut self,
        group: &[Sub],
        out: &mut [Option<(Response, Vec<u8>)>],
        svc: &mut dyn Session<E>,
    ) -> Result<(), Errno> {
        let t0 = self.env.now_ns();
        let r = self.ring_read_exchange(group, out, svc);
        self.add_round_trip(t0);
        r
    }

    /// [`Link::ring_read_group`] without the timing.
    fn ring_read_exchange(
        &mut self,
        group: &[Sub],
        out: &mut [Option<(Response, Vec<u8>)>],
        svc: &mut dyn Session<E>,
    ) -> Result<(), Errno> {
        let mut tags: Vec<Option<u32>> = Vec::with_capacity(group.len());
        for sub in group {
            match self.send(&sub.req, svc) {
                Ok(tag) => tags.push(Some(tag)),
                Err(Errno::Unavailable) => return Err(Errno::Unavailable),
                Err(e) => {
                    put(out, sub.idx, Response::Err(e), Vec::new());
                    tags.push(None);
                }
            }
        }
        let sent = tags.iter().filter(|t| t.is_some()).count();
        let s = &mut self.ring_read_stats;
        *s = (s.0 + 1, s.1 + sent as u64, s.2.max(sent as u64));
        let answers = self.collect_answers(&tags, Op::Read, svc)?;
        for (sub, answer) in group.iter().zip(answers) {
            let Some(resp) = answer else { continue };
            match resp {
                Response::Data { bytes, attr } if bytes as usize <= sub.len => {
                    let mut data = vec![0u8; bytes as usize];
                    self.bulk_read_at(1, sub.at, &mut data)?;
                    put(out, sub.idx, Response::Data { bytes, attr }, data);
                }
                // More bytes than asked for: not from this request.
                Response::Data { .. } => put(out, sub.idx, Response::Err(Errno::Io), Vec::new()),
                r => put(out, sub.idx, r, Vec::new()),
            }
        }
        self.reported = false;
        Ok(())
    }
}

fn put(out: &mut [Option<(Response, Vec<u8>)>], i: usize, r: Response, data: Vec<u8>) {
    if let Some(o) = out.get_mut(i) {
        *o = Some((r, data));
    }
}
