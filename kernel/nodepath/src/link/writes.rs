//! Several file-server writes in flight together: the write-back of
//! dirty pages (`private`, `net`) and of relaxed mode's private copies.
//!
//! The counterpart of [`super::reads`] for slot 2, the write slot. A
//! batch of writes is cut into groups whose data fits that slot side by
//! side: write `k` of a group puts its bytes at its own sub-slot and
//! names it (`Request::Data { at, .. }`; the directory checks `at + len`
//! against the slot's capacity in the validated layout). A group's
//! requests are published together and their answers collected in any
//! order. The directory serves them in ring order, so the versions it
//! answers follow the order of the batch, as one write after another
//! would. So 32 scattered dirty pages cost two round trips (a 64 KiB
//! slot holds 16), not 32.
//!
//! `net` mode sends the writes one at a time (its TCP client stages one
//! payload at a time).

use alloc::vec;
use alloc::vec::Vec;

use fabric::proto::{Errno, Op, Request, Response};

use super::Link;
use crate::env::Env;
use crate::link::reads::MAX_RING_READS;
use crate::link::Session;

/// The write slot.
const SLOT: u32 = 2;

/// One write of a batch: `data` at byte `offset` of file `ino`.
#[derive(Debug, Clone, Copy)]
pub struct WriteReq<'a> {
    /// The file.
    pub ino: u64,
    /// The generation of the file the bytes were written to
    /// ([`fabric::proto::Attr::gen`]): refused if the number now names
    /// another file (0: not checked).
    pub gen: u64,
    /// Byte offset in the file.
    pub offset: u64,
    /// The bytes (at most the write slot's capacity).
    pub data: &'a [u8],
}

impl<E: Env> Link<E> {
    /// Send `writes` to the file server, several in flight together on
    /// the rings; one answer per write, in order (`Response::Err` for a
    /// write refused in place: empty, or larger than the slot). `Err`
    /// only if the directory is unavailable: then the writes not answered
    /// may or may not have landed, as with a single call that timed out.
    pub fn fs_write_batch(
        &mut self,
        writes: &[WriteReq<'_>],
        svc: &mut dyn Session<E>,
    ) -> Result<Vec<Response>, Errno> {
        let mut out: Vec<Option<Response>> = vec![None; writes.len()];
        let r = self.write_batch_into(writes, &mut out, svc);
        if r == Err(Errno::Unavailable) {
            for (w, o) in writes.iter().zip(&out) {
                if o.is_none() {
                    self.in_doubt.insert(w.ino);
                }
            }
        }
        r?;
        Ok(finish(out))
    }

    /// Files with a write given up unanswered: it may have landed, late,
    /// or never. Nothing of theirs may be written back until the node
    /// has settled the doubt (`Vfs::settle_doubts`).
    pub fn in_doubt(&self) -> Vec<u64> {
        self.in_doubt.iter().copied().collect()
    }

    /// Is any file in doubt? (Cheap: checked before every I/O.)
    pub fn any_in_doubt(&self) -> bool {
        !self.in_doubt.is_empty()
    }

    /// A write of `ino` was given up unanswered.
    pub fn doubt(&mut self, ino: u64) {
        self.in_doubt.insert(ino);
    }

    /// `ino`'s doubt is settled.
    pub fn settled(&mut self, ino: u64) {
        self.in_doubt.remove(&ino);
    }

    /// [`Link::fs_write_batch`]'s work: the answers into `out`.
    fn write_batch_into(
        &mut self,
        writes: &[WriteReq<'_>],
        out: &mut [Option<Response>],
        svc: &mut dyn Session<E>,
    ) -> Result<(), Errno> {
        let cap = self.bulk_cap(SLOT)?;
        for (i, w) in writes.iter().enumerate() {
            if w.data.is_empty() || w.data.len() > cap {
                out[i] = Some(Response::Err(Errno::Invalid));
            }
        }
        if !self.rings() {
            for (i, w) in writes.iter().enumerate() {
                if out[i].is_none() {
                    self.bulk_write(SLOT, 0, w.data)?;
                    let req = data_req(w, 0);
                    out[i] = Some(self.fs_call(&req, svc)?);
                }
            }
            return Ok(());
        }
        let mut next = 0usize;
        while next < writes.len() {
            // A group: writes that fit the slot side by side.
            let mut group: Vec<(usize, Request)> = Vec::new();
            let mut used = 0usize;
            while let Some(w) = writes.get(next) {
                if out[next].is_some() {
                    next += 1;
                    continue;
                }
                if group.len() >= MAX_RING_READS || used + w.data.len() > cap {
                    break;
                }
                self.bulk_write(SLOT, used, w.data)?;
                group.push((next, data_req(w, used)));
                used += w.data.len();
                next += 1;
            }
            if !group.is_empty() {
                let t0 = self.env.now_ns();
                let r = self.ring_write_group(&group, out, svc);
                self.add_round_trip(t0);
                r?;
            }
        }
        Ok(())
    }

    /// Publish a group's requests together and collect every answer.
    fn ring_write_group(
        &mut self,
        group: &[(usize, Request)],
        out: &mut [Option<Response>],
        svc: &mut dyn Session<E>,
    ) -> Result<(), Errno> {
        let mut tags: Vec<Option<u32>> = Vec::with_capacity(group.len());
        for (idx, req) in group {
            match self.send(req, svc) {
                Ok(tag) => tags.push(Some(tag)),
                Err(Errno::Unavailable) => return Err(Errno::Unavailable),
                Err(e) => {
                    out[*idx] = Some(Response::Err(e));
                    tags.push(None);
                }
            }
        }
        let sent = tags.iter().filter(|t| t.is_some()).count() as u64;
        let s = &mut self.ring_write_stats;
        *s = (s.0 + 1, s.1 + sent, s.2.max(sent));
        let answers = self.collect_answers(&tags, Op::Write, svc)?;
        for ((idx, _), answer) in group.iter().zip(answers) {
            if let Some(r) = answer {
                out[*idx] = Some(r);
            }
        }
        self.reported = false;
        Ok(())
    }
}

fn data_req(w: &WriteReq<'_>, at: usize) -> Request {
    Request::Data {
        gen: w.gen,
        op: Op::Write,
        slot: SLOT,
        at: at as u32,
        ino: w.ino,
        offset: w.offset,
        len: w.data.len() as u32,
    }
}

fn finish(out: Vec<Option<Response>>) -> Vec<Response> {
    out.into_iter()
        .map(|o| o.unwrap_or(Response::Err(Errno::Io)))
        .collect()
}

/// Cut sorted page keys into runs of contiguous pages, each at most
/// `max` long (a write-back sends one write per run): the index ranges
/// into `keys`. `nth_after(k, n)` is the key `n` pages after `k` (in
/// the same file).
pub fn contiguous_runs<K: PartialEq>(
    keys: &[K],
    max: usize,
    nth_after: impl Fn(&K, u64) -> K,
) -> Vec<core::ops::Range<usize>> {
    let max = max.max(1);
    let mut runs = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let mut n = 1;
        while i + n < keys.len() && n < max && keys[i + n] == nth_after(&keys[i], n as u64) {
            n += 1;
        }
        runs.push(i..i + n);
        i += n;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::contiguous_runs;

    #[test]
    fn runs_are_contiguous_pages_of_one_file_up_to_the_limit() {
        let next = |k: &(u64, u64), n: u64| (k.0, k.1 + n);
        let keys = [(1, 0), (1, 1), (1, 2), (1, 4), (2, 5), (2, 6), (3, 0)];
        assert_eq!(contiguous_runs(&keys, 16, next), [0..3, 3..4, 4..6, 6..7]);
        assert_eq!(
            contiguous_runs(&keys, 2, next),
            [0..2, 2..3, 3..4, 4..6, 6..7]
        );
        assert_eq!(
            contiguous_runs(&keys, 0, next),
            (0..7).map(|i| i..i + 1).collect::<Vec<_>>()
        );
        assert!(contiguous_runs(&[] as &[(u64, u64)], 16, next).is_empty());
    }
}
