//! Readahead windows, as Linux's page cache computes them (on-demand
//! readahead, `mm/readahead.c`): pure logic, no I/O. The data path asks
//! [`FileReadahead::on_read`] after looking a read up in its cache and
//! fetches the window it returns; it flags the window's marker page and
//! reports a read of it, which starts the next window asynchronously.
//!
//! * A miss that continues a sequential stream (the read starts where the
//!   stream's last read ended, at its window's marker or end, or at the
//!   file's first page) starts a window at the miss: the request rounded
//!   up to a power of two, times four when it is small against the
//!   maximum, times two when it is medium (`get_init_ra_size`). The pages
//!   past the request are the window's asynchronous part; its first page
//!   is the marker.
//! * A read of a marker starts the next window right after the current
//!   one, four times larger while small, then twice, up to the maximum
//!   (`get_next_ra_size`), all of it asynchronous.
//! * A random read gets no readahead: it only leaves a stream candidate,
//!   so a read right after it counts as sequential.
//! * Up to [`STREAMS`] streams per file are tracked at once (two readers
//!   interleaving their sequential reads of one file each keep their own
//!   window); the least recently used is replaced.
//! * Windows stop at the end of the file; a truncate cuts them; a page of
//!   a window evicted before it was read cuts the window there, so the
//!   stream's next window grows from the cut one: it restarts small (the
//!   cache is thrashing).

/// Streams tracked per open file.
pub const STREAMS: usize = 4;

/// Pages in `kb` KiB of readahead (a boot option's value), at least one
/// page unless `kb` is 0 (readahead off).
pub fn pages_for_kb(kb: u32) -> u32 {
    if kb == 0 {
        0
    } else {
        (kb / 4).max(1)
    }
}

/// A window of pages to fetch: `[start, start + pages)`, of which the last
/// `async_pages` are ahead of the reader (the first of those is the
/// marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First page.
    pub start: u64,
    /// Pages in the window (at least one).
    pub pages: u32,
    /// Pages of the window ahead of the request that started it.
    pub async_pages: u32,
}

impl Window {
    /// One past the last page.
    pub fn end(&self) -> u64 {
        self.start + u64::from(self.pages)
    }

    /// The page whose read starts the next window (`None`: no next window,
    /// e.g. the window reached the end of the file).
    pub fn marker(&self) -> Option<u64> {
        (self.async_pages > 0 && self.async_pages <= self.pages)
            .then(|| self.end() - u64::from(self.async_pages))
    }

    fn contains(&self, index: u64) -> bool {
        (self.start..self.end()).contains(&index)
    }
}

/// What the data path should fetch beyond the read itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Nothing (all hits, a random read, readahead off, past the end).
    None,
    /// Fetch the window together with the read's misses (the window starts
    /// at the first miss), in one batch.
    Sync(Window),
    /// Start fetching the window; the read does not wait for it.
    Async(Window),
}

/// One read, as the data path saw it in its cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// First page read.
    pub index: u64,
    /// Pages read (at least one).
    pub pages: u32,
    /// The first page that was not cached, if any.
    pub first_miss: Option<u64>,
    /// A marker page the read touched, if any (flagged by the data path
    /// when it fetched a window; the flag is cleared by this read).
    pub marker: Option<u64>,
    /// Pages in the file now.
    pub eof_pages: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    /// The page after the stream's last read.
    next: u64,
    /// Its current window, if it has one.
    win: Option<Window>,
    /// Recency (a per-file clock).
    used: u64,
    live: bool,
}

/// A file's readahead state (one per open file, as Linux's
/// `file_ra_state`, with room for several streams).
#[derive(Debug, Clone)]
pub struct FileReadahead {
    max: u32,
    streams: [Stream; STREAMS],
    clock: u64,
}

impl FileReadahead {
    /// Windows of at most `max_pages` pages (0: readahead off).
    pub fn new(max_pages: u32) -> FileReadahead {
        FileReadahead {
            max: max_pages,
            streams: [Stream::default(); STREAMS],
            clock: 0,
        }
    }

    /// The largest window.
    pub fn max_pages(&self) -> u32 {
        self.max
    }

    /// Account one read and say what to fetch beyond it.
    pub fn on_read(&mut self, r: Read) -> Plan {
        if self.max == 0 || r.pages == 0 {
            return Plan::None;
        }
        self.clock += 1;
        let end = r.index.saturating_add(u64::from(r.pages));
        if let Some(m) = r.marker {
            return self.on_marker(m, end, r.eof_pages);
        }
        let Some(miss) = r.first_miss else {
            // All hits: a stream the read continues keeps its place.
            if let Some(i) = self.continued_by(r.index) {
                self.touch(i, end);
            }
            return Plan::None;
        };
        match self.continued_by(r.index) {
            Some(i) => {
                let s = self.streams[i];
                let size = match s.win {
                    Some(w) if r.index == w.end() || Some(r.index) == w.marker() => {
                        next_size(w.pages, self.max)
                    }
                    _ => init_size(pages_from(miss, end), self.max),
                };
                self.start_sync(i, miss, end, size, r.eof_pages)
            }
            None if r.index == 0 => {
                let i = self.victim();
                self.start_sync(
                    i,
                    miss,
                    end,
                    init_size(pages_from(miss, end), self.max),
                    r.eof_pages,
                )
            }
            None => {
                // Random: no window, only a candidate stream.
                let i = self.victim();
                self.streams[i] = Stream {
                    next: end,
                    win: None,
                    used: self.clock,
                    live: true,
                };
                Plan::None
            }
        }
    }

    /// The file shrank to `eof_pages`: windows stop there.
    pub fn truncate(&mut self, eof_pages: u64) {
        for s in self.streams.iter_mut().filter(|s| s.live) {
            if let Some(w) = s.win {
                s.win = clip(w, eof_pages);
            }
            s.next = s.next.min(eof_pages);
        }
    }

    /// Page `index`, fetched by a window and not read yet, was evicted:
    /// the window ends before it, so the next one grows from there.
    pub fn evicted(&mut self, index: u64) {
        for s in self.streams.iter_mut().filter(|s| s.live) {
            if let Some(w) = s.win.filter(|w| w.contains(index) && index >= s.next) {
                let pages = (index - w.start) as u32;
                // A marker before the cut stays (its page keeps its flag):
                // reaching it starts a small window.
                let async_pages = match w.marker() {
                    Some(m) if m < index => (index - m) as u32,
                    _ => 0,
                };
                s.win = (pages > 0).then_some(Window {
                    start: w.start,
                    pages,
                    async_pages,
                });
            }
        }
    }

    fn on_marker(&mut self, m: u64, end: u64, eof: u64) -> Plan {
        let i = match self
            .streams
            .iter()
            .position(|s| s.live && s.win.and_then(|w| w.marker()) == Some(m))
        {
            Some(i) => i,
            // A marker whose stream was replaced: continue from the page
            // after the read, as a new stream.
            None => {
                let i = self.victim();
                self.streams[i] = Stream {
                    next: end,
                    win: Some(Window {
                        start: end,
                        pages: 0,
                        async_pages: 0,
                    }),
                    used: self.clock,
                    live: true,
                };
                let size = init_size(1, self.max);
                return self.start_async(i, end, size, eof);
            }
        };
        let w = self.streams[i]
            .win
            .expect("a stream with a marker has a window");
        self.streams[i].next = end.max(self.streams[i].next);
        let size = next_size(w.pages, self.max);
        self.start_async(i, w.end(), size, eof)
    }

    fn start_sync(&mut self, i: usize, miss: u64, end: u64, size: u32, eof: u64) -> Plan {
        let req = pages_from(miss, end);
        let size = size.max(req);
        let win = clip(
            Window {
                start: miss,
                pages: size,
                async_pages: size - req,
            },
            eof,
        );
        self.set(i, end, win);
        win.map_or(Plan::None, Plan::Sync)
    }

    fn start_async(&mut self, i: usize, start: u64, size: u32, eof: u64) -> Plan {
        let win = clip(
            Window {
                start,
                pages: size,
                async_pages: size,
            },
            eof,
        );
        let next = self.streams[i].next;
        match win {
            Some(w) => {
                self.set(i, next, Some(w));
                Plan::Async(w)
            }
            // Past the end: the stream keeps its last window without a
            // marker.
            None => {
                if let Some(w) = self.streams[i].win.as_mut() {
                    w.async_pages = 0;
                }
                Plan::None
            }
        }
    }

    fn set(&mut self, i: usize, next: u64, win: Option<Window>) {
        self.streams[i] = Stream {
            next,
            win,
            used: self.clock,
            live: true,
        };
    }

    fn touch(&mut self, i: usize, end: u64) {
        let s = &mut self.streams[i];
        s.next = s.next.max(end);
        s.used = self.clock;
    }

    /// The stream a read starting at `index` continues: it starts where
    /// the stream's last read ended or inside its window.
    fn continued_by(&self, index: u64) -> Option<usize> {
        self.streams.iter().position(|s| {
            s.live
                && (s.next == index || s.win.is_some_and(|w| w.contains(index) || w.end() == index))
        })
    }

    fn victim(&self) -> usize {
        self.streams
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| if s.live { s.used + 1 } else { 0 })
            .map_or(0, |(i, _)| i)
    }
}

fn pages_from(miss: u64, end: u64) -> u32 {
    u32::try_from(end.saturating_sub(miss))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// The first window of a stream for a request of `req` pages.
fn init_size(req: u32, max: u32) -> u32 {
    let size = req.checked_next_power_of_two().unwrap_or(max);
    let size = if size <= max / 32 {
        size * 4
    } else if size <= max / 4 {
        size * 2
    } else {
        max
    };
    size.min(max).max(1)
}

/// The window after one of `cur` pages.
fn next_size(cur: u32, max: u32) -> u32 {
    let size = if cur < max / 16 {
        cur.saturating_mul(4)
    } else if cur <= max / 2 {
        cur.saturating_mul(2)
    } else {
        max
    };
    size.clamp(1, max.max(1))
}

/// `w` cut at the end of the file (`None`: nothing of it is inside). A
/// cut window has no marker: there is nothing past it to read ahead.
fn clip(w: Window, eof: u64) -> Option<Window> {
    if w.start >= eof || w.pages == 0 {
        return None;
    }
    if w.end() <= eof {
        return Some(w);
    }
    let pages = (eof - w.start) as u32;
    Some(Window {
        start: w.start,
        pages,
        async_pages: 0,
    })
}

#[cfg(test)]
mod tests;
