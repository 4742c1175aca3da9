//! `net` mode in the host rig: a loopback "connection" between a node's
//! [`NetClient`] (the same client the kernel drives over TCP) and the
//! rig's directory ([`Directory::serve_net`]), with the connection's
//! answer order ([`AnswerOrder`]) as the kernel's directory link keeps
//! it. Bytes cross in whole writes (no segmentation or loss: the framing
//! is tested on its own in `fabric::netwire`). The directory reads a
//! connection only when its node waits (as the rig's directory serves the
//! rings only in a node's wait step): a call started is not answered
//! before then. An answer that waits for the disk comes from
//! [`Directory::take_net_answers`] after later directory passes, as in
//! the kernel. A wait advances the rig's clock by one step.
//!
//! [`Directory::serve_net`]: dirsvc::server::Directory::serve_net
//! [`Directory::take_net_answers`]: dirsvc::server::Directory::take_net_answers

use std::rc::Rc;
use std::vec::Vec;

use fabric::netorder::AnswerOrder;
use fabric::netwire::{encode_frame, Frame, FrameReader};
use fabric::proto::{Errno, Request, Response};

use super::Shared;
use crate::env::FileServer;
use crate::netclient::{NetClient, MAX_BATCH};

/// Steps a synchronous call waits before it gives up (`Unavailable`).
const CALL_STEPS: usize = 100_000;

/// One node's connection to the rig's directory.
pub struct RigNet {
    sh: Rc<Shared>,
    node: u32,
    client: NetClient,
    /// The directory's end: frames received, answers in request order.
    reader: FrameReader,
    order: AnswerOrder<Frame>,
    /// Bytes sent by the directory, not read by the node yet.
    inbox: Vec<u8>,
    /// Frames started with `start_later`, not sent yet.
    outbox: Vec<u8>,
}

impl RigNet {
    /// Node `node`'s connection.
    pub fn new(sh: Rc<Shared>, node: u32) -> RigNet {
        RigNet {
            sh,
            node,
            client: NetClient::new(),
            reader: FrameReader::default(),
            order: AnswerOrder::new(),
            inbox: Vec::new(),
            outbox: Vec::new(),
        }
    }

    /// The node's bytes reach the directory's end of the connection; it
    /// reads them at its next pass ([`RigNet::serve`]), as the kernel's
    /// directory reads its sockets in its loop.
    fn deliver(&mut self, bytes: &[u8]) {
        self.reader.push(bytes);
    }

    /// The directory's pass over this connection: each complete frame is
    /// served (answered now, or later with its token).
    fn serve(&mut self) {
        if !self.sh.dir_up.get() {
            return; // a hung directory reads nothing (the bytes wait)
        }
        while let Ok(Some(frame)) = self.reader.next_frame() {
            let token = self.order.push(None);
            let answer =
                self.sh
                    .dir
                    .borrow_mut()
                    .serve_net(&*self.sh.mem, self.node, &frame, token);
            if let Some(a) = answer {
                self.order.answer(token, a);
            }
        }
        self.release();
    }

    /// Answers that came later (this node's; other nodes' are kept for
    /// them), then whatever may go out in order.
    fn collect(&mut self) {
        let later = self.sh.dir.borrow_mut().take_net_answers();
        let mut mail = self.sh.net_mail.borrow_mut();
        mail.extend(later.into_iter().map(|a| (a.node, a.token, a.frame)));
        let node = self.node;
        let mine: Vec<(u32, u64, Frame)> = mail.extract_if(.., |(n, _, _)| *n == node).collect();
        drop(mail);
        for (_, token, frame) in mine {
            self.order.answer(token, frame);
        }
        self.release();
    }

    fn release(&mut self) {
        for f in self.order.release() {
            encode_frame(&f.desc, &f.payload, &mut self.inbox);
        }
    }

    /// One wait step: the directory reads this connection, the clock
    /// advances and the directory runs a pass.
    fn step(&mut self) {
        self.serve();
        self.sh.step(self.node, 1_000);
        self.collect();
    }

    fn send(&mut self, bytes: &[u8]) {
        let out = core::mem::take(&mut self.outbox);
        self.deliver(&out);
        self.deliver(bytes);
    }
}

impl FileServer for RigNet {
    fn call(&mut self, req: &Request) -> Result<Response, Errno> {
        let bytes = self.client.request(req);
        self.send(&bytes);
        for _ in 0..CALL_STEPS {
            self.collect();
            let inbox = core::mem::take(&mut self.inbox);
            // A refused request is its error, as the kernel's connection
            // returns it (`Response::Err` here would read as a malformed
            // answer: a missing file as an I/O error).
            match self.client.feed(&inbox)? {
                Some(Response::Err(e)) => return Err(e),
                Some(r) => return Ok(r),
                None => {}
            }
            self.step();
        }
        Err(Errno::Unavailable)
    }

    fn call_batch(&mut self, reqs: &[Request]) -> Result<Vec<(Response, Vec<u8>)>, Errno> {
        let mut out = Vec::with_capacity(reqs.len());
        for chunk in reqs.chunks(MAX_BATCH) {
            let bytes = self.client.request_batch(chunk)?;
            self.send(&bytes);
            let mut done = false;
            for _ in 0..CALL_STEPS {
                self.collect();
                let inbox = core::mem::take(&mut self.inbox);
                self.client.feed_batch(&inbox, &mut out)?;
                if self.client.batch_pending() == 0 {
                    done = true;
                    break;
                }
                self.step();
            }
            if !done {
                return Err(Errno::Unavailable);
            }
        }
        Ok(out)
    }

    fn bulk_cap(&self, slot: u32) -> Result<usize, Errno> {
        self.client.bulk_cap(slot).ok_or(Errno::Invalid)
    }

    fn bulk_write(&mut self, slot: u32, at: usize, data: &[u8]) -> Result<(), Errno> {
        self.client.bulk_write(slot, at, data)
    }

    fn bulk_read(&mut self, slot: u32, buf: &mut [u8]) -> Result<(), Errno> {
        self.client.bulk_read(slot, buf)
    }

    fn start(&mut self, req: &Request) -> Result<u32, Errno> {
        let (tag, bytes) = self.client.start(req);
        self.send(&bytes);
        Ok(tag)
    }

    fn start_later(&mut self, req: &Request) -> Result<u32, Errno> {
        let (tag, bytes) = self.client.start(req);
        self.outbox.extend_from_slice(&bytes);
        Ok(tag)
    }

    fn send_started(&mut self) {
        self.send(&[]);
    }

    fn pump(&mut self) {
        self.send(&[]);
        self.collect();
        let inbox = core::mem::take(&mut self.inbox);
        if self.client.feed_started(&inbox).is_err() {
            self.client.reset();
        }
    }

    fn take(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        if let Some(r) = self.client.take(tag) {
            return Some(r);
        }
        self.pump();
        self.client.take(tag)
    }

    fn take_kept(&mut self, tag: u32) -> Option<Result<Response, Errno>> {
        self.client.take(tag)
    }

    fn forget(&mut self, tag: u32) {
        self.client.forget(tag);
    }

    fn wait(&mut self) {
        self.send(&[]);
        self.step();
    }
}
