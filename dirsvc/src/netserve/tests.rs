use super::*;
use crate::server::Config;
use fabric::bulk::Bulk;
use fabric::layout::{Header, Layout, NodeState};
use fabric::netwire::*;
use fabric::proto::{Desc, Op, DESC_SIZE, DIRENT_SIZE};
use fabric::proto::{DirEntry, FileKind};
use fabric::proto::{PageKey, PageReq};
use fabric::rng::SplitMix64;
use fabric::shm::HeapShm;
use flatfs::{Fs, MemDisk};
use nodepath::netclient::{NetClient, MAX_BATCH};

const REGION: usize = 4 << 20;

/// Every opcode, notifications included, and a few unknown ones.
const FUZZ_OPS: [u16; 26] = [
    0, 1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 30, 31, 32, 33, 34, 35, 40, 41, 42, 2,
    99, 0xFFFF,
];

/// A directory with storage, one node's client, and the two ends of a
/// stream that delivers bytes in random chunks.
struct Rig {
    mem: HeapShm,
    dir: Directory<MemDisk>,
    client: NetClient,
    server_rx: FrameReader,
    rng: SplitMix64,
}

impl Rig {
    fn new(seed: u64) -> Rig {
        let mem = HeapShm::new(REGION);
        let layout = Layout::compute(REGION, 2).unwrap();
        layout.format(&*mem, 0);
        let fs = Fs::format(MemDisk::new(2048), 64).unwrap();
        let mut dir = Directory::new(&*mem, layout, Some(fs), Config::default());
        // The links are served for members only: node 1 joins.
        Header::new(&*mem, layout).set_node_state(1, NodeState::Joining);
        dir.membership(&*mem, 0);
        assert!(dir.is_member(1));
        Rig {
            mem,
            dir,
            client: NetClient::new(),
            server_rx: FrameReader::new(),
            rng: SplitMix64::new(seed),
        }
    }

    /// Split `bytes` into random chunks (sometimes empty, sometimes
    /// single bytes, sometimes large).
    fn chunks(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let n = match self.rng.below(4) {
                0 => 0,
                1 => 1,
                2 => self.rng.range(1, 100),
                _ => self.rng.range(1, 20_000),
            } as usize;
            let n = n.min(bytes.len() - i);
            out.push(bytes[i..i + n].to_vec());
            i += n;
        }
        out.push(Vec::new());
        out
    }

    /// Deliver `bytes` to the server's reader; the frames it yields.
    fn deliver_to_server(&mut self, bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
        let mut frames = Vec::new();
        for c in self.chunks(bytes) {
            self.server_rx.push(&c);
            while let Some(f) = self.server_rx.next_frame()? {
                frames.push(f);
            }
        }
        Ok(frames)
    }

    /// Deliver `bytes` to the client; the response it completes.
    fn deliver_to_client(&mut self, bytes: &[u8]) -> Result<Option<Response>, Errno> {
        let mut got = None;
        for c in self.chunks(bytes) {
            if let Some(r) = self.client.feed(&c)? {
                assert!(got.is_none(), "one response per request");
                got = Some(r);
            }
        }
        Ok(got)
    }

    /// Serve a request frame the way the kernel's server loop does.
    fn serve(&mut self, f: &Frame) -> Vec<u8> {
        self.now(1, f).to_bytes()
    }

    /// `node`'s request frame `f`, answered at once (the in-memory disk
    /// is synchronous: nothing waits for the device).
    fn now(&mut self, node: u32, f: &Frame) -> Frame {
        self.dir
            .serve_net(&*self.mem, node, f, 0)
            .expect("a synchronous disk answers at once")
    }

    /// One round trip; transport errors are test failures, errors of
    /// the file server come back as `Err`.
    fn call(&mut self, req: &Request) -> Result<Response, Errno> {
        let bytes = self.client.request(req);
        let frames = self.deliver_to_server(&bytes).unwrap();
        assert_eq!(frames.len(), 1);
        let answer = self.serve(&frames[0]);
        match self.deliver_to_client(&answer).unwrap() {
            Some(Response::Err(e)) => Err(e),
            Some(r) => Ok(r),
            None => panic!("no response"),
        }
    }

    fn path(&mut self, op: Op, p: &str) -> Result<Response, Errno> {
        self.client.bulk_write(0, 0, p.as_bytes()).unwrap();
        self.call(&Request::Path {
            op,
            slot: 0,
            at: 0,
            len: p.len() as u32,
            exclusive: false,
        })
    }

    fn create(&mut self, p: &str) -> u64 {
        match self.path(Op::Create, p) {
            Ok(Response::Attr(a)) => a.ino,
            r => panic!("create {p}: {r:?}"),
        }
    }

    fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<Response, Errno> {
        self.client.bulk_write(2, 0, data).unwrap();
        self.call(&Request::Data {
            gen: 0,
            op: Op::Write,
            slot: 2,
            at: 0,
            ino,
            offset,
            len: data.len() as u32,
        })
    }

    fn read(&mut self, ino: u64, offset: u64, len: u32) -> Result<Vec<u8>, Errno> {
        let r = self.call(&Request::Data {
            gen: 0,
            op: Op::Read,
            slot: 1,
            at: 0,
            ino,
            offset,
            len,
        })?;
        let Response::Data { bytes, .. } = r else {
            panic!("read answered {r:?}")
        };
        let mut buf = vec![0u8; bytes as usize];
        self.client.bulk_read(1, &mut buf).unwrap();
        Ok(buf)
    }

    /// Send a hand-made frame to the server and decode the answer for
    /// `op` without a client.
    fn raw(&mut self, desc: Desc, payload: &[u8], op: Op) -> (u32, Response, Vec<u8>) {
        let answer = self.now(
            1,
            &Frame {
                desc,
                payload: payload.to_vec(),
            },
        );
        let (tag, r) = Response::decode(&answer.desc, op).unwrap();
        (tag, r, answer.payload)
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ seed).collect()
}

mod calls;
mod framing;
mod malformed;
mod pipeline;
