//! Acks in: a node's ack ring drained, each INV_ACK and INV_RANGE ack
//! handed to the page directory (unless it answers an invalidation taken
//! as acknowledged while the node slept: then it is dropped), whose
//! actions run at once; REVOKE acks go to the replicas
//! (`server/replicas.rs`). Anything else on the ack ring is a malformed
//! request.

use fabric::proto::{DecodeError, Desc, Notice, Op, PageKey, PageSpan};
use fabric::ring::RingError;
use fabric::shm::SharedMem;
use flatfs::BlockDevice;

use super::super::{Directory, Event};
use super::InvOut;

impl<D: BlockDevice> Directory<D> {
    /// Take up to `max` acks from `node`'s ack ring; how many were taken.
    pub(in crate::server) fn serve_acks(
        &mut self,
        mem: &(impl SharedMem + ?Sized),
        node: u32,
        max: usize,
    ) -> Result<usize, RingError> {
        let mut acks = 0;
        while acks < max {
            let Some(d) = self.links.pop_ack(mem, node)? else {
                break;
            };
            acks += 1;
            self.take_ack(mem, node, &d);
        }
        Ok(acks)
    }

    /// One descriptor from `node`'s ack ring.
    fn take_ack(&mut self, mem: &(impl SharedMem + ?Sized), node: u32, d: &Desc) {
        let (inv, dirty) = match Notice::decode(d) {
            Ok(Notice::InvAck { key, dirty }) => {
                log::debug!("node {node}: ack {key:?} dirty={dirty}");
                let span = PageSpan::page(key);
                (InvOut { span, range: false }, dirty)
            }
            Ok(Notice::InvRangeAck { span, dirty }) => {
                log::debug!("node {node}: range ack {span:?} dirty={dirty}");
                (InvOut { span, range: true }, dirty)
            }
            Ok(Notice::RevokeAck(key)) => return self.revoke_acked(mem, node, key),
            Ok(n) => {
                let op = match n {
                    Notice::DirInv(_) => Op::DirInv,
                    Notice::InvRange(_) => Op::InvRange,
                    Notice::Revoke(_) => Op::Revoke,
                    Notice::ReplicasUsed => Op::ReplicasUsed,
                    Notice::Recall(_) => Op::DelegRecall,
                    _ => Op::Sharers,
                };
                let error = DecodeError::BadOpcode(op as u16);
                return self.counters.bad(Event::BadRequest { node, error });
            }
            Err(error) => return self.counters.bad(Event::BadRequest { node, error }),
        };
        let arg = fabric::trace::key_arg(inv.span.ino, inv.span.first);
        fabric::trace::record(fabric::trace::Kind::AckTaken, node, 0, 0, arg);
        if self.inval.absorb(node, inv) {
            return; // taken while it slept (`quiet.rs`)
        }
        let a = if inv.range {
            self.pages.ack_range(node as u8, inv.span, dirty)
        } else {
            let key = PageKey {
                ino: inv.span.ino,
                idx: inv.span.first,
            };
            self.pages.ack(node as u8, key, dirty)
        };
        self.run(mem, a);
    }
}
