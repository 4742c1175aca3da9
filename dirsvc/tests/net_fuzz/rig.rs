//! The directory over an asynchronous in-memory disk, its links as the
//! kernel's `DirLink` keeps them, the honest node, and answer checks.

use super::*;

/// The directory's end of one node's connection, as the kernel's
/// `DirLink` keeps it.
#[derive(Default)]
pub(super) struct Link {
    pub(super) reader: FrameReader,
    pub(super) order: AnswerOrder<Frame>,
    /// Answers released in order, not read by the node yet.
    pub(super) out: Vec<u8>,
}

impl Link {
    /// The connection is dropped (a framing error), or a new one comes.
    pub(super) fn reset(&mut self) {
        self.reader.reset();
        self.order.reset();
        self.out.clear();
    }

    pub(super) fn release(&mut self) {
        for f in self.order.release() {
            encode_frame(&f.desc, &f.payload, &mut self.out);
        }
    }
}

/// What one turn of a link's reader gave.
pub(super) enum Served {
    /// Nothing complete.
    Nothing,
    /// A request frame, served.
    Frame(Frame),
    /// A framing error: the connection was dropped.
    Dropped,
}

/// A directory over an asynchronous in-memory disk and its links.
pub(super) struct Net {
    pub(super) mem: HeapShm,
    pub(super) layout: Layout,
    pub(super) dir: Directory<FakeDisk>,
    pub(super) disk: FakeControl,
    pub(super) now: u64,
    pub(super) links: Vec<Link>,
}

impl Net {
    pub(super) fn new(seed: u64) -> Net {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, NODES).unwrap();
        layout.format(&*mem, 0);
        let image = Fs::format(MemDisk::new(512), 64).unwrap().into_device();
        let (fake, disk) = FakeDisk::new(image, 4, Completion::Random, seed);
        let fs = Fs::mount(fake).unwrap();
        let mut dir = Directory::new(&*mem, layout, Some(fs), DirConfig::default());
        let h = Header::new(&*mem, layout);
        h.set_node_state(HOSTILE, NodeState::Joining);
        h.set_node_state(HONEST, NodeState::Joining);
        dir.membership(&*mem, 0);
        assert!(dir.is_member(HOSTILE) && dir.is_member(HONEST));
        assert!(!dir.is_member(STRANGER));
        Net {
            mem,
            layout,
            dir,
            disk,
            now: 0,
            links: (0..NODES).map(|_| Link::default()).collect(),
        }
    }

    pub(super) fn link(&mut self, node: u32) -> &mut Link {
        &mut self.links[(node - 1) as usize]
    }

    /// One pass of the directory's loop: members beat, the disk
    /// completes some requests, answers that waited go to their links.
    pub(super) fn step(&mut self) {
        self.now += 1_000;
        let h = Header::new(&*self.mem, self.layout);
        h.beat_node(HOSTILE);
        h.beat_node(HONEST);
        let (mem, now) = (&self.mem, self.now);
        let dir = &mut self.dir;
        let answers = budgeted(|| {
            dir.poll(&**mem, now);
            dir.take_net_answers()
        });
        for a in answers {
            assert!((1..=NODES).contains(&a.node), "answer for node {}", a.node);
            let l = self.link(a.node);
            if l.order.answer(a.token, a.frame) {
                l.release();
            }
        }
    }

    /// Bytes from `node` arrive on its connection.
    pub(super) fn push(&mut self, node: u32, bytes: &[u8]) {
        self.link(node).reader.push(bytes);
    }

    /// Serve the next complete frame of `node`'s connection, if any.
    pub(super) fn serve_one(&mut self, node: u32) -> Served {
        let l = &mut self.links[(node - 1) as usize];
        let next = budgeted(|| l.reader.next_frame());
        match next {
            Ok(None) => Served::Nothing,
            Err(e) => {
                log::info!("link to node {node}: {e}: connection dropped");
                l.reset();
                Served::Dropped
            }
            Ok(Some(f)) => {
                let token = l.order.push(None);
                let (dir, mem) = (&mut self.dir, &self.mem);
                let answer = budgeted(|| dir.serve_net(&**mem, node, &f, token));
                if let Some(a) = answer {
                    assert!(l.order.answer(token, a), "a fresh token");
                }
                l.release();
                Served::Frame(f)
            }
        }
    }

    /// Step until every request of every link is answered and the disk
    /// is idle.
    pub(super) fn drain(&mut self) {
        for _ in 0..STEPS {
            if self.links.iter().all(|l| l.order.is_empty()) && self.dir.io_pending() == 0 {
                return;
            }
            self.step();
        }
        panic!(
            "requests still unanswered after {STEPS} passes: {:?}",
            self.links.iter().map(|l| l.order.len()).collect::<Vec<_>>()
        );
    }

    pub(super) fn take_out(&mut self, node: u32) -> Vec<u8> {
        core::mem::take(&mut self.link(node).out)
    }

    pub(super) fn image(&self) -> Vec<u8> {
        self.disk.with_disk(|d| d.blocks().to_vec())
    }
}

/// The answers in `bytes`, which must be whole frames.
pub(super) fn answers(bytes: &[u8]) -> Vec<Frame> {
    let mut r = FrameReader::new();
    r.push(bytes);
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("the directory sends valid frames") {
        out.push(f);
    }
    assert_eq!(r.buffered(), 0, "the directory sends whole frames");
    out
}

/// Check `answer` against the request frame `req`: same opcode and tag,
/// a status that decodes, the payload its response announces. Its error,
/// if it is one.
pub(super) fn check_answer(req: &Frame, answer: &Frame) -> Result<Option<Errno>, TestCaseError> {
    let (q, a) = (Raw::decode(&req.desc), Raw::decode(&answer.desc));
    prop_assert_eq!((a.op, a.tag), (q.op, q.tag), "opcode and tag echoed");
    prop_assert!(answer.payload.len() <= MAX_PAYLOAD);
    let Some(op) = Op::from_u16(q.op) else {
        prop_assert_eq!(a.status, Errno::Invalid as u16, "unknown opcode");
        prop_assert!(answer.payload.is_empty());
        return Ok(Some(Errno::Invalid));
    };
    let resp = Response::decode(&answer.desc, op).map(|(_, r)| r);
    prop_assert!(resp.is_ok(), "answer {:?} to {:?} decodes", a, q);
    let resp = resp.unwrap();
    prop_assert_eq!(answer.payload.len(), answer_len(op, &resp), "{:?}", resp);
    if let Ok((
        _,
        Request::Data {
            op: Op::Read, len, ..
        },
    )) = Request::decode(&req.desc)
    {
        prop_assert!(answer.payload.len() <= len as usize, "no more than asked");
    }
    let err = match resp {
        Response::Err(e) => Some(e),
        _ => None,
    };
    // The disk never fails here: `Io` would be the server's own
    // inconsistency, not a clear answer.
    prop_assert!(err != Some(Errno::Io), "{:?} answered Io", q);
    // Each request's data travels in its own frame: no sub-slot offsets.
    if let Ok((_, Request::Path { at, .. } | Request::Data { at, .. })) = Request::decode(&req.desc)
    {
        prop_assert!(
            at == 0 || err == Some(Errno::Invalid),
            "{:?} at {} answered {:?}",
            op,
            at,
            err
        );
    }
    OUTCOMES.with(|o| {
        let mut o = o.borrow_mut();
        let e = o.entry(format!("{op:?}")).or_insert((0, 0));
        if err.is_none() {
            e.0 += 1
        } else {
            e.1 += 1
        }
    });
    Ok(err)
}

/// Node 2: a well-behaved node with the same client as the kernel's, its
/// own file.
pub(super) struct Honest {
    pub(super) client: NetClient,
    pub(super) ino: u64,
}

impl Honest {
    /// One round trip through the directory; the directory is drained
    /// (other links' answers wait in their links).
    pub(super) fn call(&mut self, net: &mut Net, req: &Request) -> Result<Response, Errno> {
        let bytes = self.client.request(req);
        net.push(HONEST, &bytes);
        while let Served::Frame(_) = net.serve_one(HONEST) {}
        for _ in 0..STEPS {
            let out = net.take_out(HONEST);
            if let Some(r) = self.client.feed(&out).expect("a valid answer") {
                return match r {
                    Response::Err(e) => Err(e),
                    r => Ok(r),
                };
            }
            net.step();
        }
        panic!("node 2's {req:?} unanswered");
    }

    pub(super) fn join(net: &mut Net) -> Honest {
        let mut h = Honest {
            client: NetClient::new(),
            ino: 0,
        };
        h.client.bulk_write(0, 0, b"/honest").unwrap();
        let create = Request::Path {
            op: Op::Create,
            slot: 0,
            at: 0,
            len: 7,
            exclusive: true,
        };
        match h.call(net, &create) {
            Ok(Response::Attr(a)) => h.ino = a.ino,
            r => panic!("create /honest: {r:?}"),
        }
        h
    }

    /// Write `len` bytes of `seed` at `offset` and read them back (the
    /// hostile node may change the file too, but not in between).
    pub(super) fn write_and_read(
        &mut self,
        net: &mut Net,
        offset: u64,
        len: usize,
        seed: u8,
    ) -> Result<(), TestCaseError> {
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
        self.client.bulk_write(2, 0, &data).unwrap();
        let w = Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino: self.ino,
            offset,
            len: len as u32,
        };
        let r = self.call(net, &w);
        prop_assert!(
            matches!(r, Ok(Response::Data { bytes, .. }) if bytes as usize == len),
            "node 2's write: {:?}",
            r
        );
        let r = Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino: self.ino,
            offset,
            len: len as u32,
        };
        let got = self.call(net, &r);
        prop_assert!(
            matches!(got, Ok(Response::Data { bytes, .. }) if bytes as usize == len),
            "node 2's read: {:?}",
            got
        );
        let mut buf = vec![0u8; len];
        self.client.bulk_read(1, &mut buf).unwrap();
        prop_assert!(buf == data, "node 2 reads what it wrote");
        Ok(())
    }
}

/// Files the hostile node knows (and aims at): created before it starts.
pub(super) struct Known {
    pub(super) file: u64,
    pub(super) dir: u64,
}

pub(super) fn setup(seed: u64) -> (Net, Honest, Known) {
    let mut net = Net::new(seed);
    let mut honest = Honest::join(&mut net);
    // A directory with a file in it, with data, through node 2's client.
    let mut make = |op, p: &str| {
        honest.client.bulk_write(0, 0, p.as_bytes()).unwrap();
        let r = honest.call(
            &mut net,
            &Request::Path {
                op,
                slot: 0,
                at: 0,
                len: p.len() as u32,
                exclusive: false,
            },
        );
        match r {
            Ok(Response::Attr(a)) => a.ino,
            r => panic!("{op:?} {p}: {r:?}"),
        }
    };
    let dir = make(Op::Mkdir, "/d");
    let file = make(Op::Create, "/d/f");
    honest.client.bulk_write(2, 0, &[0x5a; 6000]).unwrap();
    let w = Request::Data {
        gen: 0,
        op: Op::Write,
        slot: 2,
        at: 0,
        ino: file,
        offset: 0,
        len: 6000,
    };
    assert!(honest.call(&mut net, &w).is_ok());
    net.drain();
    (net, honest, Known { file, dir })
}
