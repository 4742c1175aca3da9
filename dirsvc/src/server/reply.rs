//! Where a file-server answer goes. A request from the rings is answered
//! on its node's response ring (its data already in the node's bulk
//! slot); a request from `net` mode's link is answered by a frame that
//! carries its data, which the kernel's link sends in the connection's
//! order. An answer produced later (a read whose blocks arrived, a write
//! that landed, an fsync whose flush completed) carries its route along.

use alloc::vec::Vec;

use fabric::netwire::Frame;
use fabric::proto::Desc;
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::Directory;

/// The route of one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// The requester's response ring.
    Ring,
    /// `net` mode: the link's token for the request (opaque here; the
    /// link matches it to its place in the connection's order).
    Net(u64),
}

/// An answer to a `net` mode request served after
/// [`Directory::serve_net`] returned (see [`Directory::take_net_answers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetAnswer {
    /// The requester.
    pub node: u32,
    /// The token the link gave the request.
    pub token: u64,
    /// The answer frame.
    pub frame: Frame,
}

/// `net` mode's answers served after their request returned, and their
/// count. Owned here; the disk paths push answers (through
/// [`Directory::answer_via`]), the kernel's links take them.
#[derive(Debug, Default)]
pub(super) struct NetAnswers {
    /// Not yet taken by the kernel's links.
    answers: Vec<NetAnswer>,
    /// `net` mode requests answered later, since boot.
    later: u64,
}

impl NetAnswers {
    /// Answers waiting to be taken.
    pub(super) fn len(&self) -> usize {
        self.answers.len()
    }
}

impl<D: BlockDevice> Directory<D> {
    /// Answer `node` by `via`: `d` on its ring, or `d` and `payload` in a
    /// frame for its link (`payload` is ignored on the ring path, whose
    /// data went to the bulk slot).
    pub(super) fn answer_via(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        via: Via,
        d: Desc,
        payload: Vec<u8>,
    ) {
        match via {
            Via::Ring => self.respond(mem, node, d),
            Via::Net(token) => {
                self.net.later += 1;
                self.net.answers.push(NetAnswer {
                    node,
                    token,
                    frame: Frame { desc: d, payload },
                });
            }
        }
    }

    /// Take the answers to `net` mode requests that completed since the
    /// last call, in completion order (a link sends them in its
    /// connection's order).
    pub fn take_net_answers(&mut self) -> Vec<NetAnswer> {
        core::mem::take(&mut self.net.answers)
    }

    /// `net` mode requests answered after `serve_net` returned (their
    /// disk reads, writes or flushes were in flight meanwhile).
    pub fn net_answered_later(&self) -> u64 {
        self.net.later
    }
}
