//! The mock's cache controls and benchmark hooks: settings recorded,
//! counters and samples made up for the shell's tests.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::*;

impl CacheControl for MockOs {
    fn cache_groups(&mut self) -> Result<Vec<CacheGroup>, Errno> {
        self.mock_cache_groups()
    }

    fn set_cache_group(&mut self, settings: &GroupSettings) -> Result<(), Errno> {
        self.mock_set_cache_group(settings)
    }

    fn set_task_group(&mut self, name: &str) -> Result<(), Errno> {
        self.mock_set_task_group(name)
    }

    fn cache_controls(&mut self) -> Result<CacheControls, Errno> {
        self.controls.ok_or(Errno::NotSupported)
    }

    fn set_cache_controls(&mut self, controls: CacheControls) -> Result<(), Errno> {
        let c = self.controls.as_mut().ok_or(Errno::NotSupported)?;
        *c = controls;
        Ok(())
    }

    fn locality(&mut self, path: &str) -> Result<Vec<LocalityRange>, Errno> {
        self.paths.push(path.to_string());
        self.locality.get(path).cloned().ok_or(Errno::NotFound)
    }

    fn cache_drop(&mut self) -> Result<String, Errno> {
        match self.miss_per_read {
            Some(_) => Ok("dropped".to_string()),
            None => Err(Errno::NotSupported),
        }
    }

    fn miss_counters(&mut self) -> Result<MissCounters, Errno> {
        let per = self.miss_per_read.ok_or(Errno::NotSupported)?;
        let k = self.reads;
        let scale = |m: MissStats| MissStats {
            count: m.count * k,
            lookup_ns: m.lookup_ns * k,
            disk_ns: m.disk_ns * k,
            fill_ns: m.fill_ns * k,
            reply_ns: m.reply_ns * k,
        };
        Ok(MissCounters {
            round_trip_ns: per.round_trip_ns * k,
            fill_ns: per.fill_ns * k,
            page_fills: scale(per.page_fills),
            file_reads: scale(per.file_reads),
        })
    }

    fn cluster(&mut self) -> ClusterInfo {
        self.cluster.clone()
    }
}

impl Benches for MockOs {
    fn bench_ring(&mut self, count: usize) -> Result<RingSamples, Errno> {
        self.check("bench_ring")?;
        if self.ring_samples.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .ring_samples
            .iter()
            .copied()
            .cycle()
            .take(count)
            .collect())
    }

    /// Doorbells: the ring samples when `doorbells` is set.
    fn bench_doorbell(&mut self, count: usize) -> Result<RingSamples, Errno> {
        self.check("bench_doorbell")?;
        if !self.doorbells {
            return Err(Errno::NotSupported);
        }
        Ok(self
            .ring_samples
            .iter()
            .copied()
            .cycle()
            .take(count)
            .collect())
    }

    /// One instance alone: every increment lands; 1 ns each.
    fn bench_atomics(&mut self, count: u64) -> Result<(u64, u64, u64), Errno> {
        self.check("bench_atomics")?;
        let before = self.atomic_probe;
        self.atomic_probe = if count == 0 { 0 } else { before + count };
        Ok((before, self.atomic_probe, count))
    }

    /// Two rounds; 1 ns a baseline iteration, 1.5 ns a call off, 20 ns on.
    fn bench_trace(&mut self, count: u64) -> Result<TraceBench, Errno> {
        self.check("bench_trace")?;
        let calls = count * 2;
        Ok(TraceBench {
            calls,
            base_ns: calls,
            off_ns: calls * 3 / 2,
            on_ns: calls * 20,
        })
    }

    fn bench_rpc(&mut self, count: usize) -> Result<(&'static str, RingSamples), Errno> {
        self.check("bench_rpc")?;
        let samples = self.ring_samples.iter().copied().cycle().take(count);
        Ok(("ring", samples.collect()))
    }
}
