use super::*;

/// 128 KiB: Linux's default `read_ahead_kb`.
const MAX: u32 = 32;

/// A reader over a file of `eof` pages with a cache that holds every page
/// fetched (read or read ahead) unless evicted, and flags markers as the
/// data path does.
struct Reader {
    ra: FileReadahead,
    eof: u64,
    cached: std::collections::BTreeSet<u64>,
    markers: std::collections::BTreeSet<u64>,
    /// Pages fetched by readahead (beyond what reads asked for).
    ahead: u64,
    sync_windows: Vec<Window>,
    async_windows: Vec<Window>,
}

impl Reader {
    fn new(eof: u64, max: u32) -> Reader {
        Reader {
            ra: FileReadahead::new(max),
            eof,
            cached: Default::default(),
            markers: Default::default(),
            ahead: 0,
            sync_windows: Vec::new(),
            async_windows: Vec::new(),
        }
    }

    fn fetch(&mut self, w: Window) {
        for p in w.start..w.end() {
            if self.cached.insert(p) {
                self.ahead += 1;
            }
        }
        if let Some(m) = w.marker() {
            self.markers.insert(m);
        }
    }

    /// Read `pages` pages at `index`; returns the plan.
    fn read(&mut self, index: u64, pages: u32) -> Plan {
        let range = index..index + u64::from(pages);
        let first_miss = range.clone().find(|p| !self.cached.contains(p));
        let marker = range.clone().find(|p| self.markers.contains(p));
        if let Some(m) = marker {
            self.markers.remove(&m);
        }
        let plan = self.ra.on_read(Read {
            index,
            pages,
            first_miss,
            marker,
            eof_pages: self.eof,
        });
        // What the read itself fetches is not readahead.
        for p in range {
            if p < self.eof && self.cached.insert(p) && first_miss.is_none() {
                unreachable!("a page missed without a first miss");
            }
        }
        match plan {
            Plan::Sync(w) => {
                self.sync_windows.push(w);
                self.fetch(w);
            }
            Plan::Async(w) => {
                self.async_windows.push(w);
                self.fetch(w);
            }
            Plan::None => {}
        }
        plan
    }

    fn evict(&mut self, p: u64) {
        self.cached.remove(&p);
        self.markers.remove(&p);
        self.ra.evicted(p);
    }
}

#[test]
fn sizes_follow_linux() {
    // get_init_ra_size with max 32: 1 -> 4, 2 -> 4 (2 <= 32/4), 4 -> 8,
    // 8 -> 16, 9 -> 32 (16 > 8), 64 -> 32.
    assert_eq!(init_size(1, MAX), 4);
    assert_eq!(init_size(2, MAX), 4);
    assert_eq!(init_size(4, MAX), 8);
    assert_eq!(init_size(8, MAX), 16);
    assert_eq!(init_size(9, MAX), 32);
    assert_eq!(init_size(64, MAX), 32);
    // get_next_ra_size: 1 -> 4 (< 32/16), 4 -> 8, 16 -> 32, 32 -> 32.
    assert_eq!(next_size(1, MAX), 4);
    assert_eq!(next_size(4, MAX), 8);
    assert_eq!(next_size(16, MAX), 32);
    assert_eq!(next_size(32, MAX), 32);
    assert_eq!(pages_for_kb(0), 0);
    assert_eq!(pages_for_kb(128), 32);
    assert_eq!(pages_for_kb(2), 1);
}

#[test]
fn a_sequential_reader_gets_growing_windows_up_to_the_maximum() {
    let mut r = Reader::new(1 << 20, MAX);
    for p in 0..400 {
        r.read(p, 1);
    }
    // One synchronous window (the first read), then asynchronous ones.
    assert_eq!(r.sync_windows.len(), 1);
    assert_eq!(
        r.sync_windows[0],
        Window {
            start: 0,
            pages: 4,
            async_pages: 3
        }
    );
    let sizes: Vec<u32> = r.async_windows.iter().map(|w| w.pages).collect();
    assert_eq!(&sizes[..4], &[8, 16, 32, 32]);
    assert!(sizes.iter().all(|&s| s <= MAX));
    // Windows are contiguous: each starts where the last ended.
    let mut end = r.sync_windows[0].end();
    for w in &r.async_windows {
        assert_eq!(w.start, end);
        end = w.end();
    }
    // Every read after the first was a hit: the reader never waited.
    assert!(r.ahead >= 399);
}

#[test]
fn large_sequential_reads_start_with_a_larger_window() {
    let mut r = Reader::new(1 << 20, MAX);
    // 128 KiB reads (32 pages): the first window is the request itself
    // (the maximum), all of it asked for, so no marker...
    assert_eq!(
        r.read(0, 32),
        Plan::Sync(Window {
            start: 0,
            pages: 32,
            async_pages: 0
        })
    );
    // ...and the next read, right after it, continues the stream with a
    // full window, half of it ahead.
    match r.read(32, 16) {
        Plan::Sync(w) => assert_eq!((w.start, w.pages, w.async_pages), (32, 32, 16)),
        p => panic!("{p:?}"),
    }
}

#[test]
fn random_reads_get_no_readahead() {
    let mut r = Reader::new(1 << 20, MAX);
    let mut rng = fabric::rng::SplitMix64::new(7);
    for _ in 0..500 {
        let p = 1 + rng.below((1 << 20) - 1);
        r.read(p, 1);
    }
    assert_eq!(r.ahead, 0, "{:?}", r.sync_windows.first());
}

#[test]
fn strided_reads_get_no_readahead_after_the_first_window() {
    let mut r = Reader::new(1 << 20, MAX);
    for i in 0..200 {
        r.read(i * 8, 1);
    }
    // Only the read of page 0 starts a window.
    assert_eq!(r.sync_windows.len(), 1);
    assert!(r.async_windows.is_empty());
    assert_eq!(r.ahead, 3);
}

#[test]
fn two_interleaved_streams_keep_their_own_windows() {
    let mut r = Reader::new(1 << 20, MAX);
    let b0 = 100_000;
    for i in 0..300 {
        r.read(i, 1);
        r.read(b0 + i, 1);
    }
    // Each stream has one synchronous start (B's second read continues
    // its candidate) and then only asynchronous windows.
    assert_eq!(r.sync_windows.len(), 2, "{:?}", r.sync_windows);
    let a: Vec<_> = r.async_windows.iter().filter(|w| w.start < b0).collect();
    let b: Vec<_> = r.async_windows.iter().filter(|w| w.start >= b0).collect();
    assert!(a.len() >= 8 && b.len() >= 8, "{a:?} {b:?}");
    assert!(a.iter().chain(&b).any(|w| w.pages == MAX));
}

#[test]
fn more_streams_than_tracked_do_not_break_the_tracked_ones() {
    let mut r = Reader::new(1 << 30, MAX);
    let starts: Vec<u64> = (0..STREAMS as u64 + 2).map(|s| s * 1_000_000).collect();
    for i in 0..200 {
        for &s in &starts {
            r.read(s + i, 1);
        }
    }
    // Every read is answered; windows never exceed the maximum nor
    // overlap within a stream.
    for w in r.sync_windows.iter().chain(&r.async_windows) {
        assert!(w.pages >= 1 && w.pages <= MAX);
    }
}

#[test]
fn a_window_stops_at_the_end_of_the_file() {
    let mut r = Reader::new(6, MAX);
    for p in 0..6 {
        r.read(p, 1);
    }
    let all: Vec<_> = r.sync_windows.iter().chain(&r.async_windows).collect();
    assert!(all.iter().all(|w| w.end() <= 6), "{all:?}");
    // The window that reached the end has no marker: nothing more.
    assert_eq!(all.last().unwrap().marker(), None);
    assert_eq!(r.read(5, 1), Plan::None);
    assert_eq!(
        r.ra.on_read(Read {
            index: 6,
            pages: 1,
            first_miss: Some(6),
            marker: None,
            eof_pages: 6,
        }),
        Plan::None
    );
}

#[test]
fn an_evicted_window_page_cuts_the_window_and_the_stream_restarts_small() {
    let mut r = Reader::new(1 << 20, MAX);
    for p in 0..12 {
        r.read(p, 1);
    }
    let last = *r.async_windows.last().unwrap();
    assert!(last.pages >= 16, "{last:?}");
    // Thrashing: pages far ahead in the window go before they are read.
    let cut = last.start + 2;
    for p in cut..last.end() {
        r.evict(p);
    }
    let seen = r.sync_windows.len() + r.async_windows.len();
    for p in 12..cut + 1 {
        r.read(p, 1);
    }
    // The stream goes on past the cut with a small window again.
    let after: Vec<Window> = r
        .sync_windows
        .iter()
        .chain(&r.async_windows)
        .copied()
        .skip(seen)
        .collect();
    let first = after.first().copied().expect("a window after the cut");
    assert!(first.start <= cut && first.end() > cut, "{first:?}");
    assert!(first.pages < last.pages, "{first:?} after {last:?}");
    assert!(r.cached.contains(&cut));
}

#[test]
fn a_truncate_cuts_a_window_in_flight() {
    let mut r = Reader::new(1 << 20, MAX);
    for p in 0..5 {
        r.read(p, 1);
    }
    let w = *r.async_windows.last().unwrap();
    let new_eof = w.start + 2;
    r.ra.truncate(new_eof);
    r.eof = new_eof;
    for p in w.start + 2..w.end() {
        r.cached.remove(&p);
        r.markers.remove(&p);
    }
    // Reads up to the new end ask nothing past it.
    for p in 5..new_eof {
        match r.read(p, 1) {
            Plan::Sync(x) | Plan::Async(x) => assert!(x.end() <= new_eof, "{x:?}"),
            Plan::None => {}
        }
    }
    assert_eq!(
        r.ra.on_read(Read {
            index: new_eof,
            pages: 1,
            first_miss: Some(new_eof),
            marker: None,
            eof_pages: new_eof,
        }),
        Plan::None
    );
}

#[test]
fn readahead_off_fetches_nothing() {
    let mut r = Reader::new(1 << 20, 0);
    for p in 0..100 {
        assert_eq!(r.read(p, 1), Plan::None);
    }
    assert_eq!(r.ahead, 0);
}
