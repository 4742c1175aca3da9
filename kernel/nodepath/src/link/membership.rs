//! Membership: the region's layout, join and rejoin (taking an admission
//! that came after its wait gave up), the membership check, the guard
//! before every I/O (fenced, or the directory silent past its timeout),
//! and leaving the shared cache when the directory falls silent.

use alloc::format;

use fabric::layout::{DirState, Header, Layout, LayoutError, NodeState};
use fabric::proto::Errno;

use super::{wait_once, Link, Session};
use crate::client::Client;
use crate::env::Env;
use crate::wait::{Waiter, DIR_SILENT_NS};

impl<E: Env> Link<E> {
    pub(super) fn unavailable(&mut self, why: &str, svc: &mut dyn Session<E>) -> Errno {
        if !self.reported {
            log::warn!("directory unavailable: {why}");
            self.reported = true;
        }
        self.disconnect_if_dir_silent(svc);
        Errno::Unavailable
    }

    /// A directory whose heartbeat stopped is gone: leave the shared cache
    /// (no remote mapping survives) until a later join succeeds.
    fn disconnect_if_dir_silent(&mut self, svc: &mut dyn Session<E>) {
        let Some(layout) = self.layout else { return };
        let hb = Header::new(self.env.mem(), layout).dir_heartbeat();
        let now = self.env.now_ns();
        if hb != self.dir_hb.0 {
            self.dir_hb = (hb, now);
        } else if now.saturating_sub(self.dir_hb.1) > DIR_SILENT_NS && self.client.is_some() {
            log::warn!("directory silent: disconnecting from the shared cache, unmapping every remote page");
            self.client = None;
            svc.disconnect(&self.env);
        }
    }

    /// Presume the directory dead once its heartbeat stood still for
    /// `ns` (at most [`DIR_SILENT_NS`], what every wait allows).
    pub fn set_dir_timeout(&mut self, ns: u64) {
        self.dir_timeout_ns = ns.clamp(1, DIR_SILENT_NS);
    }

    /// Before every I/O, and before anything else: may this node touch the
    /// shared region? No if the directory declared it failed or its
    /// session is stale: it drops every mapping (no store reaches a frame
    /// again) and the I/O fails with `Fenced`; the next one rejoins. No if
    /// the directory's heartbeat stood still past the timeout: the node
    /// leaves the shared cache and every I/O fails with `Unavailable`
    /// until the directory beats again. Two loads and a clock read.
    pub fn guard(&mut self, svc: &mut dyn Session<E>) -> Result<(), Errno> {
        let Some(layout) = self.layout else {
            return Ok(()); // never joined: the I/O's own call fails
        };
        let h = Header::new(self.env.mem(), layout);
        let hb = h.dir_heartbeat();
        let now = self.env.now_ns();
        if hb != self.dir_hb.0 || self.dir_hb.1 == 0 {
            self.dir_hb = (hb, now);
        }
        let silent = now.saturating_sub(self.dir_hb.1);
        if silent > self.dir_timeout_ns {
            if self.client.is_some() {
                log::error!(
                    "directory silent for {} ms (timeout {} ms): presumed dead; left the shared cache, unmapped every remote page; writes and fsyncs fail until it is back",
                    silent / 1_000_000,
                    self.dir_timeout_ns / 1_000_000
                );
                self.client = None;
                svc.disconnect(&self.env);
            }
            self.reported = true;
            return Err(Errno::Unavailable);
        }
        let Some(c) = self.client.as_ref() else {
            return Ok(()); // not joined: the I/O's own call joins or fails
        };
        let epoch = c.epoch();
        match fabric::fence::standing(&h, self.id, epoch) {
            fabric::fence::Standing::Member => Ok(()),
            s => {
                self.client = None;
                svc.disconnect(&self.env);
                log::error!(
                    "fenced: {} (session epoch {epoch}); stopped every store and dropped every mapping; this I/O fails, the next one rejoins",
                    if s == fabric::fence::Standing::Failed {
                        "the directory declared this node failed"
                    } else {
                        "this node's session is stale"
                    }
                );
                Err(Errno::Fenced)
            }
        }
    }

    /// How long the directory's heartbeat has stood still, as far as this
    /// node has watched it (the clock starts at the first look, so a
    /// directory that died before it shows 0 on that first look).
    pub fn dir_silence_ns(&mut self) -> Option<u64> {
        let layout = self.layout?;
        let hb = Header::new(self.env.mem(), layout).dir_heartbeat();
        let now = self.env.now_ns();
        if hb != self.dir_hb.0 || self.dir_hb.1 == 0 {
            self.dir_hb = (hb, now);
        }
        Some(now.saturating_sub(self.dir_hb.1))
    }

    /// Read and validate the header, waiting up to `wait_ns` for the
    /// directory to format it.
    fn read_layout(&mut self, wait_ns: u64, svc: &mut dyn Session<E>) -> Result<Layout, Errno> {
        if let Some(l) = self.layout {
            return Ok(l);
        }
        let start = self.env.now_ns();
        loop {
            match Layout::read(self.env.mem()) {
                Ok(l) => {
                    if !l.valid_node(self.id) {
                        let why = format!(
                            "node id {} outside the region's 1..={}",
                            self.id, l.max_nodes
                        );
                        return Err(self.unavailable(&why, svc));
                    }
                    self.layout = Some(l);
                    self.env.layout_known(&l, self.id);
                    return Ok(l);
                }
                Err(LayoutError::BadMagic(_))
                    if self.env.now_ns().saturating_sub(start) < wait_ns =>
                {
                    self.env.wait_step(false);
                }
                Err(e) => return Err(self.unavailable(&format!("{e}"), svc)),
            }
        }
    }

    /// Join (or rejoin) the cluster, waiting up to `wait_ns` for the
    /// directory to format the region.
    pub fn join(&mut self, wait_ns: u64, svc: &mut dyn Session<E>) -> Result<(), Errno> {
        let layout = self.read_layout(wait_ns, svc)?;
        // A join asked for earlier and admitted (or still waiting) since
        // its wait gave up: take that admission rather than ask again,
        // which would make the directory tear the new session down.
        let state = Header::new(self.env.mem(), layout).node_state(self.id);
        let ask =
            !(self.join_pending && matches!(state, Some(NodeState::Up) | Some(NodeState::Joining)));
        let nonce = self.env.nonce();
        let mut w = Waiter::new(wait_ns.max(1_000_000_000)).spinning(self.env.spin_ns());
        let env = &self.env;
        let id = self.id;
        let mut rung = false;
        let mut wait = || {
            if !rung {
                // The directory may sleep: tell it a node is joining.
                rung = true;
                env.ring_directory();
            }
            wait_once(env, layout, id, true, &mut w, svc)
        };
        let joined = if ask {
            Client::join(env.mem(), layout, self.id, nonce, &mut wait)
        } else {
            Client::admitted(env.mem(), layout, self.id, &mut wait)
        };
        match joined {
            Ok(c) => {
                self.join_pending = false;
                log::info!(
                    "node {} joined cluster epoch {} (mode {})",
                    self.id,
                    c.epoch(),
                    self.mode.as_str()
                );
                svc.joined(&self.env, layout, self.id);
                if Header::new(self.env.mem(), layout).dir_state() == Some(DirState::NoStorage) {
                    log::warn!(
                        "directory unavailable: the directory has no storage (see its log); \
                         file operations will fail"
                    );
                }
                self.client = Some(c);
                self.reported = false;
                Ok(())
            }
            Err(_) => {
                self.join_pending = true;
                Err(self.unavailable("no answer to join", svc))
            }
        }
    }

    /// Check membership; rejoin if the directory declared us failed.
    pub fn check(&mut self, svc: &mut dyn Session<E>) {
        self.disconnect_if_dir_silent(svc);
        let Some(layout) = self.layout else { return };
        let h = Header::new(self.env.mem(), layout);
        // Failed: declared so; anything but Up: a restarted directory
        // formatted the region and no longer knows this node.
        let gone = h.node_state(self.id) != Some(NodeState::Up);
        if self.client.is_some() && (gone || svc.broken()) {
            log::warn!("the directory declared this node failed, restarted, or the session broke; rejoining with a new epoch");
            svc.disconnect(&self.env);
            self.client = None;
            let _ = self.join(1_000_000_000, svc);
        } else if self.client.is_none() && self.join_pending {
            match h.node_state(self.id) {
                // Still waiting for the directory: look again next time.
                Some(NodeState::Joining) => {}
                // Admitted since (taken at once), or refused: ask again.
                _ => {
                    let _ = self.join(1_000_000_000, svc);
                }
            }
        }
    }

    pub(super) fn ensure_joined(&mut self, svc: &mut dyn Session<E>) -> Result<Layout, Errno> {
        if self.client.is_some() && svc.broken() && !self.recovering {
            // Not here, in the middle of an operation whose misses belong
            // to the old session: the next membership check rejoins.
            return Err(self.unavailable("session broken (corrupt notify ring)", svc));
        }
        if self.client.is_none() {
            // Not joined (yet): try once more, briefly.
            self.join(500_000_000, svc)?;
        }
        let layout = self.layout.ok_or(Errno::Unavailable)?;
        if Header::new(self.env.mem(), layout).node_state(self.id) == Some(NodeState::Failed) {
            self.check(svc);
        }
        Ok(layout)
    }
}
