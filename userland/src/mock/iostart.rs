//! [`MockOs`]'s [`Os::io_start`] (and `mmap_start`): reads whose pages take a given number of
//! [`Os::io_progress`] rounds to come in (off by default: `NotSupported`,
//! every flush is one `io_batch`).
//!
//! [`Os::io_start`]: crate::os::Os::io_start
//! [`Os::io_progress`]: crate::os::Os::io_progress

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::MockOs;
use crate::os::{Errno, IoSpan, MapSpan};

/// How `io_start` behaves (see the module).
#[derive(Debug, Default, Clone)]
pub struct IoStartSplit {
    /// Supported at all (off: `NotSupported`).
    pub on: bool,
    /// [`Os::mmap_start`] too (with `on`; off: `NotSupported`, every flush
    /// of mapped I/Os is one `mmap_batch`).
    ///
    /// [`Os::mmap_start`]: crate::os::Os::mmap_start
    pub maps: bool,
    /// Rounds of `io_progress` before a read at this offset can run; a
    /// read at an offset not listed runs at once (`None` from
    /// `io_start`), as do writes.
    pub delay: BTreeMap<u64, u32>,
    /// A read at this offset fails with this error once its delay is over.
    pub fail: BTreeMap<u64, Errno>,
    /// Every event in order: `start OFFSET -> T`, `ready T`, `cancel T`.
    pub events: Vec<String>,
    tickets: BTreeMap<u64, (u32, Result<(), Errno>)>,
    next: u64,
}

impl IoStartSplit {
    /// Tickets not collected yet.
    pub fn open_tickets(&self) -> usize {
        self.tickets.len()
    }
}

impl MockOs {
    pub(super) fn split_io_start(&mut self, ios: &[IoSpan]) -> Result<Vec<Option<u64>>, Errno> {
        let spans: Vec<(u64, bool)> = ios.iter().map(|io| (io.offset, io.write)).collect();
        self.split_spans(&spans)
    }

    pub(super) fn split_mmap_start(
        &mut self,
        ios: &[MapSpan<'_>],
    ) -> Result<Vec<Option<u64>>, Errno> {
        if !self.io_start.maps {
            return Err(Errno::NotSupported);
        }
        let spans: Vec<(u64, bool)> = ios.iter().map(|io| (io.offset, io.write)).collect();
        self.split_spans(&spans)
    }

    /// Tickets for I/Os given as (offset, write).
    fn split_spans(&mut self, ios: &[(u64, bool)]) -> Result<Vec<Option<u64>>, Errno> {
        let s = &mut self.io_start;
        if !s.on {
            return Err(Errno::NotSupported);
        }
        let mut out = Vec::with_capacity(ios.len());
        for &(offset, write) in ios {
            let d = match s.delay.get(&offset) {
                Some(&d) if !write => d,
                _ => {
                    out.push(None);
                    continue;
                }
            };
            s.next += 1;
            let t = s.next;
            let r = s.fail.get(&offset).map_or(Ok(()), |&e| Err(e));
            s.tickets.insert(t, (d, r));
            s.events.push(format!("start {offset} -> {t}"));
            out.push(Some(t));
        }
        Ok(out)
    }

    pub(super) fn split_io_progress(&mut self) -> bool {
        for (n, _) in self.io_start.tickets.values_mut() {
            *n = n.saturating_sub(1);
        }
        true
    }

    pub(super) fn split_io_poll(&mut self, t: u64) -> Option<Result<(), Errno>> {
        let s = &mut self.io_start;
        match s.tickets.get(&t) {
            None => Some(Err(Errno::Invalid)),
            Some((0, r)) => {
                let r = *r;
                s.tickets.remove(&t);
                s.events.push(format!("ready {t}"));
                Some(r)
            }
            Some(_) => None,
        }
    }

    pub(super) fn split_io_cancel(&mut self, t: u64) {
        if self.io_start.tickets.remove(&t).is_some() {
            self.io_start.events.push(format!("cancel {t}"));
        }
    }
}
