//! The peer table and the message plan of QEMU's ivshmem-server protocol,
//! independent of sockets and file descriptors.
//!
//! Every message is one little-endian `i64`, optionally with one file
//! descriptor. The plan names descriptors symbolically ([`FdRef`]); the
//! server resolves them to real ones when it queues the messages.

use std::collections::BTreeSet;

/// The protocol version QEMU (2.5 and later) expects as the first message.
pub const PROTOCOL_VERSION: i64 = 0;

/// Value of the message that carries the shared-memory fd.
pub const SHM_MESSAGE: i64 = -1;

/// Highest peer id: the Doorbell register has 16 bits for it.
pub const MAX_PEER_ID: u32 = 0xFFFF;

/// A peer id (QEMU's IVPosition register).
pub type PeerId = u16;

/// A file descriptor a message carries, named symbolically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdRef {
    /// The shared-memory file.
    Shm,
    /// Eventfd number `vector` of `peer`: writing it interrupts `peer` on
    /// that vector; `peer` itself reads it.
    Vector { peer: PeerId, vector: u16 },
}

/// One protocol message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub value: i64,
    pub fd: Option<FdRef>,
}

impl Msg {
    /// The 8 bytes on the wire.
    pub fn bytes(&self) -> [u8; 8] {
        self.value.to_le_bytes()
    }
}

/// A message for one peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub to: PeerId,
    pub msg: Msg,
}

/// Every id up to [`MAX_PEER_ID`] has been handed out once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdsExhausted;

/// Connected peers and id allocation. Ids start at 0 and only increase: a
/// peer that reconnects gets a new id, never one used before, so a stale
/// doorbell write aimed at a departed peer can never reach a newcomer.
#[derive(Debug)]
pub struct PeerTable {
    vectors: u16,
    next_id: u32,
    live: BTreeSet<PeerId>,
}

impl PeerTable {
    /// A table for peers with `vectors` interrupt vectors each (at least 1).
    pub fn new(vectors: u16) -> Self {
        assert!(vectors >= 1, "at least one vector");
        PeerTable {
            vectors,
            next_id: 0,
            live: BTreeSet::new(),
        }
    }

    pub fn vectors(&self) -> u16 {
        self.vectors
    }

    /// The id the next [`admit`](Self::admit) will hand out, if any is left.
    pub fn next_id(&self) -> Option<PeerId> {
        PeerId::try_from(self.next_id).ok()
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    pub fn contains(&self, id: PeerId) -> bool {
        self.live.contains(&id)
    }

    /// Connected peers in id order.
    pub fn ids(&self) -> impl Iterator<Item = PeerId> + '_ {
        self.live.iter().copied()
    }

    /// Admit a new client: its id and every message to send, in order per
    /// destination. To the new peer: version, its id, -1 with the shm fd,
    /// each existing peer's id `vectors` times with that peer's eventfds,
    /// then its own id `vectors` times with its own eventfds. To each
    /// existing peer: the new id `vectors` times with the new eventfds
    /// ("peer added").
    pub fn admit(&mut self) -> Result<(PeerId, Vec<Outgoing>), IdsExhausted> {
        let id = self.next_id().ok_or(IdsExhausted)?;
        self.next_id += 1;
        let n = self.vectors;
        let mut plan = Vec::with_capacity(3 + usize::from(n) * 2 * (self.live.len() + 1));
        let to_new = |msg| Outgoing { to: id, msg };
        plan.push(to_new(Msg {
            value: PROTOCOL_VERSION,
            fd: None,
        }));
        plan.push(to_new(Msg {
            value: i64::from(id),
            fd: None,
        }));
        plan.push(to_new(Msg {
            value: SHM_MESSAGE,
            fd: Some(FdRef::Shm),
        }));
        for &other in &self.live {
            plan.extend((0..n).map(|v| Outgoing {
                to: other,
                msg: vector_msg(id, v),
            }));
        }
        for &other in &self.live {
            plan.extend((0..n).map(|v| to_new(vector_msg(other, v))));
        }
        plan.extend((0..n).map(|v| to_new(vector_msg(id, v))));
        self.live.insert(id);
        Ok((id, plan))
    }

    /// Remove a peer: the "peer removed" message (its id, no fd) for every
    /// remaining peer. Removing an unknown id is a no-op.
    pub fn remove(&mut self, id: PeerId) -> Vec<Outgoing> {
        if !self.live.remove(&id) {
            return Vec::new();
        }
        self.live
            .iter()
            .map(|&other| Outgoing {
                to: other,
                msg: Msg {
                    value: i64::from(id),
                    fd: None,
                },
            })
            .collect()
    }
}

fn vector_msg(peer: PeerId, vector: u16) -> Msg {
    Msg {
        value: i64::from(peer),
        fd: Some(FdRef::Vector { peer, vector }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(plan: &[Outgoing], id: PeerId) -> Vec<Msg> {
        plan.iter().filter(|o| o.to == id).map(|o| o.msg).collect()
    }

    fn v(peer: PeerId, vector: u16) -> Msg {
        vector_msg(peer, vector)
    }

    #[test]
    fn first_client_gets_setup_sequence() {
        let mut t = PeerTable::new(3);
        let (id, plan) = t.admit().unwrap();
        assert_eq!(id, 0);
        assert!(plan.iter().all(|o| o.to == 0));
        let msgs = to(&plan, 0);
        assert_eq!(
            msgs,
            vec![
                Msg { value: 0, fd: None },
                Msg { value: 0, fd: None },
                Msg {
                    value: -1,
                    fd: Some(FdRef::Shm)
                },
                v(0, 0),
                v(0, 1),
                v(0, 2),
            ]
        );
        assert_eq!(msgs[2].bytes(), [0xff; 8]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn second_client_sees_first_then_itself_and_first_is_told() {
        let mut t = PeerTable::new(2);
        t.admit().unwrap();
        let (id, plan) = t.admit().unwrap();
        assert_eq!(id, 1);
        assert_eq!(to(&plan, 0), vec![v(1, 0), v(1, 1)]);
        let new = to(&plan, 1);
        assert_eq!(new.len(), 3 + 2 + 2);
        assert_eq!(new[1].value, 1);
        assert_eq!(&new[3..], &[v(0, 0), v(0, 1), v(1, 0), v(1, 1)]);
    }

    #[test]
    fn third_client_sees_existing_peers_in_id_order() {
        let mut t = PeerTable::new(1);
        for _ in 0..3 {
            t.admit().unwrap();
        }
        t.remove(1);
        let (id, plan) = t.admit().unwrap();
        assert_eq!(id, 3);
        assert_eq!(&to(&plan, 3)[3..], &[v(0, 0), v(2, 0), v(3, 0)]);
        assert_eq!(to(&plan, 0), vec![v(3, 0)]);
        assert_eq!(to(&plan, 2), vec![v(3, 0)]);
        assert!(to(&plan, 1).is_empty());
    }

    #[test]
    fn remove_tells_every_other_peer_once() {
        let mut t = PeerTable::new(4);
        for _ in 0..3 {
            t.admit().unwrap();
        }
        let plan = t.remove(1);
        let gone = Msg { value: 1, fd: None };
        assert_eq!(
            plan,
            vec![Outgoing { to: 0, msg: gone }, Outgoing { to: 2, msg: gone }]
        );
        assert!(!t.contains(1));
        assert!(t.remove(1).is_empty(), "second remove is a no-op");
        assert!(t.remove(77).is_empty());
        assert_eq!(t.ids().collect::<Vec<_>>(), vec![0, 2]);
    }

    #[test]
    fn ids_only_increase_and_run_out() {
        let mut t = PeerTable::new(1);
        let mut last = None;
        for _ in 0..1000 {
            let (id, _) = t.admit().unwrap();
            assert!(last.is_none_or(|l| id > l));
            last = Some(id);
            t.remove(id);
        }
        assert!(t.is_empty());
        t.next_id = MAX_PEER_ID;
        assert_eq!(t.next_id(), Some(0xFFFF));
        assert_eq!(t.admit().unwrap().0, 0xFFFF);
        assert_eq!(t.next_id(), None);
        assert_eq!(t.admit(), Err(IdsExhausted));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn last_peer_leaving_tells_nobody() {
        let mut t = PeerTable::new(2);
        let (id, _) = t.admit().unwrap();
        assert!(t.remove(id).is_empty());
        assert!(t.is_empty());
    }
}
