//! The directory's log lines about its asynchronous disk.

/// Log lines about the asynchronous disk: each new high of reads or writes
/// in flight, and the first page request answered while reads, or writes,
/// were in flight.
#[derive(Default)]
pub(super) struct DiskLog {
    max_in_flight: u64,
    max_writes: u64,
    answered: bool,
    answered_writing: bool,
    /// Barrier jobs, synchronous drains and stale fills seen so far.
    barrier_jobs: u64,
    stale: u64,
    drains: u64,
    /// Device write requests seen so far.
    write_ios: u64,
    /// Halts for the disk its completion interrupt ended.
    irq_wakes: u64,
    /// Fsyncs answered after an asynchronous device flush.
    flushes: u64,
    /// `net` mode requests answered after their disk I/O.
    net_later: u64,
    /// Passes that took no new request because the write queue was full.
    throttled: u64,
    /// The heap's high mark logged so far (MiB).
    heap_mib: usize,
}

impl DiskLog {
    /// A halt for the disk ended (`by_irq`: its completion interrupt came).
    pub(super) fn slept(&mut self, by_irq: bool) {
        if by_irq {
            self.irq_wakes += 1;
            if self.irq_wakes == 1 {
                log::info!("disk: completion interrupt woke the directory (first time)");
            }
        }
    }

    /// Fsyncs answered after an asynchronous flush: the first, then at
    /// each power of two.
    pub(super) fn flushed(&mut self, n: u64) {
        if new_power_of_two(&mut self.flushes, n) {
            log::info!("disk: {n} fsyncs answered after a flush that did not block the loop");
        }
    }

    /// `net` mode requests answered after their disk I/O (the loop served
    /// others meanwhile): the first, then at each power of two.
    pub(super) fn net_later(&mut self, n: u64) {
        if new_power_of_two(&mut self.net_later, n) {
            log::info!("net: {n} requests answered after their disk I/O (the loop served others meanwhile)");
        }
    }

    /// The heap in use reached a new high, in steps of 2 MiB past 4 MiB:
    /// log it with the directory's queue lengths (what grows).
    pub(super) fn heap<D: flatfs::BlockDevice>(&mut self, dir: &dirsvc::server::Directory<D>) {
        let mib = crate::mm::heap_in_use() >> 20;
        if mib < 4 || mib < self.heap_mib + 2 {
            return;
        }
        self.heap_mib = mib;
        log::info!(
            "memory: {mib} MiB of the {} MiB heap in use: {:?}",
            crate::mm::heap_bytes() >> 20,
            dir.queue_lengths()
        );
    }

    pub(super) fn note(&mut self, s: &dirsvc::diskq::QueueStats, w: &dirsvc::writeq::WriteStats) {
        if s.max_in_flight > self.max_in_flight {
            self.max_in_flight = s.max_in_flight;
            log::info!("disk: {} page fills in flight", s.max_in_flight);
        }
        if w.max_in_flight > self.max_writes {
            self.max_writes = w.max_in_flight;
            log::info!("disk: {} block writes in flight", w.max_in_flight);
        }
        if !self.answered && s.answered_while_busy > 0 {
            self.answered = true;
            log::info!("disk: page request answered while page fills were in flight");
        }
        if !self.answered_writing && w.answered_while_busy > 0 {
            self.answered_writing = true;
            log::info!("disk: page request answered while writes were in flight");
        }
        if new_power_of_two(&mut self.stale, s.stale) {
            log::info!(
                "disk: {} page fills went stale (their file changed while they flew; the readers retry)",
                s.stale
            );
        }
        if new_power_of_two(&mut self.write_ios, w.write_ios) {
            log::info!(
                "disk: {} block writes in {} device write requests (contiguous blocks go as one)",
                w.submitted,
                w.write_ios
            );
        }
        if new_power_of_two(&mut self.barrier_jobs, w.barrier_jobs) {
            log::info!(
                "disk: {} namespace changes or truncations queued as barrier jobs ({} waited synchronously for writes in flight)",
                w.barrier_jobs,
                w.barriers
            );
        }
        if new_power_of_two(&mut self.throttled, w.throttled) {
            log::info!(
                "disk: new requests held back {} times while the write queue was full (most block writes held at once: {})",
                w.throttled,
                w.max_held
            );
        }
        if new_power_of_two(&mut self.drains, w.barriers) {
            log::info!(
                "disk: {} requests waited synchronously for writes in flight",
                w.barriers
            );
        }
    }
}

/// A counter's log cadence: true when `now` grew past `*seen` to a power
/// of two (the first, then ever more rarely); `*seen` becomes `now`.
pub(super) fn new_power_of_two(seen: &mut u64, now: u64) -> bool {
    let log = now > *seen && now.is_power_of_two();
    *seen = now;
    log
}
