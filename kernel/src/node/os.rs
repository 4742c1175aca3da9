//! [`Os`] for the shell: every call goes to the node (in `nodepath`); the
//! kernel adds the timing (rdtsc), the window loads and stores, the
//! membership view from the header, and the `net` mode's link counters.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use userland::stats::keys;

use fabric::layout::{DirState, Header};
use fabric::proto::{Errno, MissKind, Request, Response};
use userland::os::{
    AsyncIo, Attr, BatchIo, Benches, CacheControl, CacheControls, CacheGroup, ClusterInfo, Console,
    DirEntry, Fd, Files, GroupSettings, IoSpan, LocalityRange, MapSpan, MetaCall, MetaDone,
    MetaStart, MetaTicket, MissCounters, MmapIo, NodeInfo, OpenFlags, RingSamples, TraceBench,
};

use super::{with, SHM};
use crate::arch::{cpu, time};
use crate::klog;
use crate::mm::paging;

/// Everything the shell reaches through [`Os`].
pub struct NodeOs {
    id: u32,
    storage: String,
    cxl_ns: u64,
}

impl NodeOs {
    /// The shell's view of node `id`.
    pub fn new(id: u32, storage: String, cxl_ns: u64) -> NodeOs {
        NodeOs {
            id,
            storage,
            cxl_ns,
        }
    }

    /// Map the file through the mmap window (zero copy: page-table entries
    /// point at our frames or the owners' frames in BAR2) and read it
    /// through the mapping, without holding the node: page faults map
    /// each page on first access. Pages invalidated while the window was
    /// being built are mapped again.
    fn mmap_read_fd(&mut self, fd: Fd) -> Result<(u32, u64), Errno> {
        for _ in 0..100 {
            let misses0 = with(|n| Ok(n.fault_counts().1))?;
            let (base, pages, size) = with(|n| n.mmap_lazy(fd))?;
            let mut h = crc32fast::Hasher::new();
            let mut page = [0u8; 4096];
            for idx in 0..pages {
                let n = ((size - idx * 4096) as usize).min(4096);
                paging::window_read_faulting(base + idx * 4096, &mut page[..n])
                    .map_err(|_| Errno::Io)?;
                h.update(&page[..n]);
            }
            let misses = with(|n| {
                n.munmap();
                Ok(n.fault_counts().1)
            })?;
            if misses == misses0 {
                return Ok((h.finalize(), size));
            }
            // A page was invalidated between resolution and access: again.
        }
        Err(Errno::Io)
    }
}

impl Console for NodeOs {
    fn print(&mut self, s: &str) {
        klog::print_str(s);
    }

    fn uptime_ns(&self) -> u64 {
        time::now_ns()
    }
}

impl Files for NodeOs {
    fn open(&mut self, path: &str, flags: OpenFlags) -> Result<Fd, Errno> {
        with(|n| n.open(path, flags))
    }

    fn read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        with(|n| n.read(fd, buf))
    }

    fn write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        with(|n| n.write(fd, data))
    }

    fn truncate(&mut self, fd: Fd, size: u64) -> Result<(), Errno> {
        with(|n| n.truncate(fd, size))
    }

    fn fsync(&mut self, fd: Fd) -> Result<(), Errno> {
        with(|n| n.fsync(fd))
    }

    fn close(&mut self, fd: Fd) -> Result<(), Errno> {
        with(|n| n.close(fd))
    }

    fn stat(&mut self, path: &str) -> Result<Attr, Errno> {
        with(|n| n.stat(path))
    }

    fn readdir(&mut self, path: &str) -> Result<Vec<DirEntry>, Errno> {
        with(|n| n.readdir(path))
    }

    fn mkdir(&mut self, path: &str) -> Result<(), Errno> {
        with(|n| n.mkdir(path))
    }

    fn rmdir(&mut self, path: &str) -> Result<(), Errno> {
        with(|n| n.rmdir(path))
    }

    fn unlink(&mut self, path: &str) -> Result<(), Errno> {
        with(|n| n.unlink(path))
    }

    fn sync(&mut self) -> Result<(), Errno> {
        with(|n| n.sync())
    }

    fn seek(&mut self, fd: Fd, pos: u64) -> Result<(), Errno> {
        with(|n| n.seek(fd, pos))
    }
}

impl AsyncIo for NodeOs {
    fn meta_start(&mut self, call: MetaCall) -> MetaStart {
        with(|n| Ok(n.meta_start(call))).unwrap_or_else(|e| MetaStart::Done(Err(e)))
    }

    fn meta_poll(&mut self, ticket: MetaTicket) -> Option<Result<MetaDone, Errno>> {
        with(|n| Ok(n.meta_poll(ticket))).unwrap_or_else(|e| Some(Err(e)))
    }

    fn meta_wait(&mut self) {
        let _ = with(|n| {
            n.meta_wait();
            Ok(())
        });
    }

    fn io_batch(&mut self, ios: &mut [BatchIo<'_>]) -> Result<(), Errno> {
        // The batch's misses go out together; the reads are hits after.
        with(|n| n.prepare_batch(ios))?;
        for io in ios.iter_mut() {
            io.done = userland::os::positioned_io(self, io.fd, io.offset, io.write, io.buf);
        }
        Ok(())
    }

    fn io_start(&mut self, ios: &[IoSpan]) -> Result<Vec<Option<u64>>, Errno> {
        with(|n| n.io_start(ios))
    }

    fn mmap_start(&mut self, ios: &[MapSpan<'_>]) -> Result<Vec<Option<u64>>, Errno> {
        with(|n| n.mmap_start(ios))
    }

    fn io_poll(&mut self, ticket: u64) -> Option<Result<(), Errno>> {
        with(|n| Ok(n.io_poll(ticket))).unwrap_or_else(|e| Some(Err(e)))
    }

    fn io_progress(&mut self) -> bool {
        with(|n| Ok(n.io_progress())).unwrap_or(true)
    }

    fn io_cancel(&mut self, ticket: u64) {
        let _ = with(|n| {
            n.io_cancel(ticket);
            Ok(())
        });
    }

    fn io_wait(&mut self) {
        let _ = with(|n| {
            n.io_wait();
            Ok(())
        });
    }

    fn mmap_io(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
        write: bool,
        buf: &mut [u8],
    ) -> Result<(), Errno> {
        let mut access = |va: u64, bytes: &mut [u8], store: bool| {
            if store {
                paging::window_write(va, bytes)
            } else {
                paging::window_read(va, bytes)
            }
            .map_err(|_| Errno::Io)
        };
        with(|n| n.mmap_io(path, offset, len, write, buf, &mut access))
    }

    fn mmap_batch(&mut self, ios: &mut [MmapIo<'_>]) -> Result<(), Errno> {
        // The loads' misses go out together; the accesses are hits after.
        let mut access = |va: u64, bytes: &mut [u8], store: bool| {
            if store {
                paging::window_write(va, bytes)
            } else {
                paging::window_read(va, bytes)
            }
            .map_err(|_| Errno::Io)
        };
        with(|n| n.mmap_batch(ios, &mut access))
    }
}

impl CacheControl for NodeOs {
    fn cluster(&mut self) -> ClusterInfo {
        let id = self.id as u16;
        let layout = with(|n| n.link.layout().ok_or(Errno::Unavailable));
        let (Some(shm), Ok(layout)) = (SHM.get(), layout) else {
            return ClusterInfo {
                epoch: 0,
                self_id: id,
                nodes: Vec::new(),
            };
        };
        let h = Header::new(shm, layout);
        let dir_state = match h.dir_state() {
            Some(DirState::Booting) => "booting",
            Some(DirState::Up) => "up",
            Some(DirState::NoStorage) => "no-storage",
            Some(DirState::Down) => "down",
            None => "garbage",
        };
        // The header says what the directory last wrote; a dead directory
        // writes nothing, so say what this node sees: its heartbeat
        // standing still.
        let silence = with(|n| Ok(n.link.dir_silence_ns())).ok().flatten();
        let dir_state = match silence {
            Some(ns) if ns > nodepath::wait::DIR_SILENT_NS => format!(
                "silent {}.{}s (presumed failed; was {dir_state})",
                ns / 1_000_000_000,
                ns / 100_000_000 % 10
            ),
            _ => dir_state.to_string(),
        };
        let mut nodes = Vec::new();
        nodes.push(NodeInfo {
            id: 0,
            state: dir_state,
            heartbeat: h.dir_heartbeat(),
            epoch: 0,
        });
        for n in 1..=layout.max_nodes {
            nodes.push(NodeInfo {
                id: n as u16,
                state: h
                    .node_state(n)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|| String::from("garbage")),
                heartbeat: h.node_heartbeat(n),
                epoch: h.node_epoch(n),
            });
        }
        ClusterInfo {
            epoch: h.epoch(),
            self_id: id,
            nodes,
        }
    }

    fn cache_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        with(|n| {
            let mut v = n.cache_stats(&self.storage, self.cxl_ns)?;
            if let Some(net) = n.link.net() {
                let mut put = |k: &str, x: String| v.push((k.to_string(), x));
                let (rx, tx) = net.frames();
                put(keys::cache::NET_CONNECTION, net.state().to_string());
                put(keys::cache::NET_RPCS, format!("{}", net.calls));
                put(
                    keys::cache::NET_BYTES,
                    format!("{}/{}", net.bytes_out, net.bytes_in),
                );
                put(keys::cache::NET_FRAMES, format!("{tx}/{rx}"));
                put(
                    keys::cache::NET_WAKEUPS,
                    format!("{}", crate::arch::interrupts::device_irqs()),
                );
            }
            doorbell_stats(&mut v);
            v.push((
                keys::cache::KERNEL_HEAP.to_string(),
                format!(
                    "{}/{}/{}",
                    crate::mm::heap_in_use() >> 10,
                    crate::mm::heap_high() >> 10,
                    crate::mm::heap_bytes() >> 10
                ),
            ));
            Ok(v)
        })
    }

    fn readahead_kb(&mut self) -> Result<(u32, u32), Errno> {
        with(|n| Ok(n.readahead_kb()))
    }

    fn set_readahead_kb(&mut self, readahead_kb: u32, faultaround_kb: u32) -> Result<(), Errno> {
        with(|n| {
            n.set_readahead_kb(readahead_kb, faultaround_kb);
            Ok(())
        })
    }

    fn cache_controls(&mut self) -> Result<CacheControls, Errno> {
        let k = with(|n| n.cache_controls())?;
        Ok(CacheControls {
            policy: k.policy,
            limit: k.limit.map(|l| l as u64),
            ttl_s: k.ttl_ns / 1_000_000_000,
            promote: k.promotion.threshold,
            promote_window_ms: k.promotion.window_ns / 1_000_000,
        })
    }

    fn set_cache_controls(&mut self, k: CacheControls) -> Result<(), Errno> {
        let limit = match k.limit {
            Some(l) => Some(usize::try_from(l).map_err(|_| Errno::Invalid)?),
            None => None,
        };
        with(|n| {
            n.set_cache_controls(nodepath::control::Controls {
                policy: k.policy,
                limit,
                ttl_ns: k.ttl_s.saturating_mul(1_000_000_000),
                promotion: nodepath::pagecache::Promotion {
                    threshold: k.promote,
                    window_ns: k.promote_window_ms.saturating_mul(1_000_000),
                },
            })
        })
    }

    fn cache_groups(&mut self) -> Result<Vec<CacheGroup>, Errno> {
        let gs = with(|n| n.cache_groups())?;
        Ok(gs
            .into_iter()
            .map(|g| CacheGroup {
                settings: GroupSettings {
                    name: g.conf.name,
                    policy: g.conf.policy,
                    limit: g.conf.limit.map(|l| l as u64),
                },
                policy: g.policy,
                own_lists: g.own_lists,
                pages: g.pages as u64,
                hits: g.stats.hits,
                misses: g.stats.misses,
                evictions: g.stats.evictions,
            })
            .collect())
    }

    fn set_cache_group(&mut self, s: &GroupSettings) -> Result<(), Errno> {
        let limit = match s.limit {
            Some(l) => Some(usize::try_from(l).map_err(|_| Errno::Invalid)?),
            None => None,
        };
        let conf = nodepath::control::GroupConf {
            name: s.name.clone(),
            policy: s.policy,
            limit,
        };
        with(|n| n.set_cache_group(&conf))
    }

    fn set_task_group(&mut self, name: &str) -> Result<(), Errno> {
        with(|n| n.set_task_group(name))
    }

    fn locality(&mut self, path: &str) -> Result<Vec<LocalityRange>, Errno> {
        with(|n| n.locality(path))
    }

    fn cache_drop(&mut self) -> Result<String, Errno> {
        with(|n| n.cache_drop())
    }

    fn cache_hold(&mut self, path: &str, page: u64, pin: bool) -> Result<String, Errno> {
        let a = self.stat(path)?;
        with(|n| n.cache_hold(a.ino, page, pin))
    }

    fn mmap_read(&mut self, path: &str) -> Result<(u32, u64), Errno> {
        if !with(|n| Ok(n.has_windows()))? {
            return Err(Errno::NotSupported);
        }
        let fd = self.open(path, OpenFlags::default())?;
        let r = self.mmap_read_fd(fd);
        let _ = self.close(fd);
        r
    }

    fn miss_counters(&mut self) -> Result<MissCounters, Errno> {
        with(|n| n.miss_counters())
    }

    fn trace_clock(&mut self) -> Option<(u32, u64, u64)> {
        Some((self.id, time::tsc_hz(), cpu::rdtsc()))
    }

    fn dir_stats(&mut self) -> Result<Vec<(String, String)>, Errno> {
        let Response::Stats(s) = with(|n| n.ring_call(&Request::Stats))? else {
            return Err(Errno::Io);
        };
        let Response::PageStats(p) = with(|n| n.ring_call(&Request::PageStats))? else {
            return Err(Errno::Io);
        };
        let mut v: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, x: String| v.push((k.to_string(), x));
        put(keys::dir::PAGE_ENTRIES, format!("{}", p.entries));
        put(
            keys::dir::BYTES_PER_ENTRY,
            format!("{}", dirsvc::pagedir::BYTES_PER_ENTRY),
        );
        put(keys::dir::REQUESTS_SERVED, format!("{}", s.requests));
        put(keys::dir::PAGE_REQUESTS, format!("{}", p.page_requests));
        put(keys::dir::FILLS, format!("{}", p.fills));
        put(
            keys::dir::REMOTE_MAPPINGS_GRANTED,
            format!("{}", p.remote_maps),
        );
        put(keys::dir::INVALIDATIONS_SENT, format!("{}", p.dir_invs));
        let Response::InvStats(i) = with(|n| n.ring_call(&Request::InvStats))? else {
            return Err(Errno::Io);
        };
        put(
            keys::dir::INV_NOTICES,
            format!(
                "{} ({} + {})",
                i.dir_invs + i.range_invs,
                i.dir_invs,
                i.range_invs
            ),
        );
        put(
            keys::dir::INV_ACKS,
            format!("{} ({} + {})", i.acks + i.range_acks, i.acks, i.range_acks),
        );
        put(keys::dir::INV_RANGE_PAGES, format!("{}", i.range_pages));
        let Response::DelegStats(d) = with(|n| n.ring_call(&Request::DelegStats))? else {
            return Err(Errno::Io);
        };
        put(
            keys::dir::DELEGATIONS,
            format!(
                "granted {}, denied {}, recalled {}, returned {}, pages {}, parked {}",
                d.granted, d.denied, d.recalled, d.returned, d.pages, d.parked
            ),
        );
        put(keys::dir::WRITEBACKS, format!("{}", p.writebacks));
        put(keys::dir::LARGEST_BATCH, format!("{}", p.max_batch));
        put(keys::dir::DISK_BLOCKS_READ, format!("{}", s.disk_reads));
        put(keys::dir::DISK_BLOCKS_WRITTEN, format!("{}", s.disk_writes));
        put(
            keys::dir::INODES,
            format!("{}/{}", s.inodes_used, s.inodes_total),
        );
        put(
            keys::dir::BLOCKS,
            format!("{}/{}", s.blocks_used, s.blocks_total),
        );
        for (key, kind) in [
            (keys::dir::MISS_PAGE_FILLS, MissKind::PageFill),
            (keys::dir::MISS_FILE_READS, MissKind::FileRead),
        ] {
            let Response::MissStats(m) = with(|n| n.ring_call(&Request::MissStats { kind }))?
            else {
                return Err(Errno::Io);
            };
            put(key, userland::stats::miss::service_line(&m));
        }
        Ok(v)
    }

    fn run_env(&mut self) -> (u16, String, u32) {
        // This node and the directory's core are the busy instances.
        let mode = with(|n| Ok(n.mode().as_str().to_string())).unwrap_or_default();
        (self.id as u16, mode, 2)
    }
}

impl Benches for NodeOs {
    fn bench_read(&mut self, path: &str) -> Result<RingSamples, Errno> {
        let fd = self.open(path, OpenFlags::default())?;
        let mut out = Vec::new();
        let mut page = [0u8; 4096];
        let r = loop {
            let t0 = cpu::rdtsc();
            match self.read(fd, &mut page) {
                Ok(0) => break Ok(()),
                Ok(_) => out.push(time::cycles_to_ns(cpu::rdtsc() - t0)),
                Err(e) => break Err(e),
            }
        };
        let _ = self.close(fd);
        r.map(|_| out)
    }

    /// One page at a time: the protocol's synchronous invalidation, or in
    /// the private-cache modes dropping our own copy.
    fn bench_inv(&mut self, path: &str) -> Result<RingSamples, Errno> {
        let a = self.stat(path)?;
        let mut out = Vec::new();
        for idx in 0..a.size.div_ceil(4096) {
            let t0 = cpu::rdtsc();
            if with(|n| n.invalidate_page(a.ino, idx))? {
                out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
            }
        }
        Ok(out)
    }

    fn bench_dir(&mut self, path: &str, rounds: u32, batch: usize) -> Result<(u64, u64), Errno> {
        if !with(|n| Ok(n.has_windows()))? {
            return Err(Errno::NotSupported);
        }
        let a = self.stat(path)?;
        let t0 = cpu::rdtsc();
        let ops = with(|n| n.bench_dir(a.ino, a.size, rounds, batch))?;
        Ok((ops, time::cycles_to_ns(cpu::rdtsc() - t0)))
    }

    fn bench_atomics(&mut self, count: u64) -> Result<(u64, u64, u64), Errno> {
        let layout = with(|n| n.link.layout().ok_or(Errno::Unavailable))?;
        let shm = SHM.get().ok_or(Errno::Unavailable)?;
        let h = Header::new(shm, layout);
        let before = h.atomic_probe();
        if count == 0 {
            h.set_atomic_probe(0);
            return Ok((before, 0, 0));
        }
        let t0 = cpu::rdtsc();
        for _ in 0..count {
            h.atomic_probe_add();
        }
        let ns = time::cycles_to_ns(cpu::rdtsc() - t0);
        Ok((before, h.atomic_probe(), ns))
    }

    fn bench_trace(&mut self, count: u64) -> Result<TraceBench, Errno> {
        let t = fabric::trace::bench(count, fabric::trace::BENCH_ROUNDS).ok_or(Errno::Invalid)?;
        Ok(TraceBench {
            calls: t.calls,
            base_ns: time::cycles_to_ns(t.base),
            off_ns: time::cycles_to_ns(t.off),
            on_ns: time::cycles_to_ns(t.on),
        })
    }

    fn bench_pingpong(&mut self, count: usize) -> Result<RingSamples, Errno> {
        let layout = with(|n| n.link.layout().ok_or(Errno::Unavailable))?;
        let shm = SHM.get().ok_or(Errno::Unavailable)?;
        let h = Header::new(shm, layout);
        // Values unique to this node and run, so a stale echo never matches.
        let base = (cpu::rdtsc() & !0xFFFF_FFFF) | ((self.id as u64) << 24);
        let mut out = Vec::with_capacity(count);
        for i in 0..count as u64 + 16 {
            let v = base + i + 1;
            let t0 = cpu::rdtsc();
            h.set_ping(v);
            let bell = crate::drivers::ivshmem::doorbell();
            if let Some(d) = bell {
                // It may be halted: as a request does, ring at once if its
                // word says so, else owe the fenced check until the echo
                // is late.
                d.ring_deferred(fabric::doorbell::DIRECTORY, fabric::doorbell::VEC_REQUEST);
            }
            let mut spins = 0u64;
            while h.pong() != v {
                spins += 1;
                // The owed check is due after microseconds: look at the
                // clock every 64 spins, not on each.
                if let Some(d) = bell.filter(|_| spins.is_multiple_of(64)) {
                    d.settle(false, |_| h.pong() != v);
                }
                if spins > 200_000_000 {
                    return Err(Errno::Unavailable);
                }
            }
            if i >= 16 {
                out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
            }
        }
        Ok(out)
    }

    fn bench_rpc(&mut self, count: usize) -> Result<(&'static str, RingSamples), Errno> {
        let transport = with(|n| Ok(n.link.fs_kind()))?;
        let out = time_round_trips(count, || with(|n| n.fs_call(&Request::Nop)))?;
        Ok((transport, out))
    }

    fn bench_doorbell(&mut self, count: usize) -> Result<RingSamples, Errno> {
        let d = crate::drivers::ivshmem::doorbell().ok_or(Errno::NotSupported)?;
        d.echo_rounds(count as u32).map_err(|e| {
            log::warn!("bench doorbell: {e}");
            Errno::Unavailable
        })
    }

    fn bench_ring(&mut self, count: usize) -> Result<RingSamples, Errno> {
        time_round_trips(count, || with(|n| n.ring_call(&Request::Nop)))
    }
}

/// `cache stats`: the doorbell counters (or "off").
fn doorbell_stats(v: &mut Vec<(String, String)>) {
    use userland::stats::keys::cache as k;
    let mut put = |key: &str, x: String| v.push((key.to_string(), x));
    let Some(d) = crate::drivers::ivshmem::doorbell() else {
        put(k::DOORBELLS, "off".to_string());
        return;
    };
    let s = d.stats();
    put(k::DOORBELLS, format!("on (peer id {})", d.peer()));
    put(
        k::DOORBELL_RECEIVED_REQUEST,
        format!("{}", s.received[fabric::doorbell::VEC_REQUEST as usize]),
    );
    put(
        k::DOORBELL_RECEIVED_NOTIFY,
        format!("{}", s.received[fabric::doorbell::VEC_NOTIFY as usize]),
    );
    put(
        k::DOORBELL_RECEIVED_RESPONSE,
        format!("{}", s.received[fabric::doorbell::VEC_RESPONSE as usize]),
    );
    put(k::DOORBELL_RUNG, format!("{}", s.rung));
    put(k::DOORBELL_SUPPRESSED, format!("{}", s.suppressed));
    put(k::DOORBELL_FENCED_CHECKS, format!("{}", s.fenced_checks));
    put(k::DOORBELL_LATE_RINGS, format!("{}", s.late_rings));
    put(k::DOORBELL_NO_PEER, format!("{}", s.no_peer));
    put(k::DOORBELL_SLEEPS, format!("{}", s.sleeps));
    put(
        k::TIMER_INTERRUPTS,
        format!("{}", crate::arch::timer::fired()),
    );
}

/// Warm up with 16 calls (they wake a halted directory), then time
/// `count` calls of `call`, in nanoseconds.
fn time_round_trips(
    count: usize,
    mut call: impl FnMut() -> Result<Response, Errno>,
) -> Result<RingSamples, Errno> {
    for _ in 0..16 {
        call()?;
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let t0 = cpu::rdtsc();
        call()?;
        out.push(time::cycles_to_ns(cpu::rdtsc() - t0));
    }
    Ok(out)
}
