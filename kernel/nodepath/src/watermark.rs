//! Reclaim ahead of need: a node keeps its free frames between a low and
//! a high watermark (boot options `reclaim_low` / `reclaim_high`, percent
//! of its frames), as Linux's kswapd does. When free frames drop under the
//! low mark, reclaim runs between operations and at idle, in batches,
//! until the high mark is free; a miss then finds a frame and waits for no
//! eviction. A miss waits for reclaim only when the pool is exhausted
//! anyway (a burst faster than the background keeps up with).

/// The two watermarks, in percent of a node's frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    low_pct: u32,
    high_pct: u32,
}

impl Default for Watermarks {
    fn default() -> Self {
        Watermarks::new(
            fabric::config::DEFAULT_RECLAIM_LOW,
            fabric::config::DEFAULT_RECLAIM_HIGH,
        )
    }
}

impl Watermarks {
    /// No reclaim ahead of need: a miss reclaims when it finds no frame.
    pub const OFF: Watermarks = Watermarks {
        low_pct: 0,
        high_pct: 0,
    };

    /// Low and high marks in percent (the boot options, validated there;
    /// out-of-range values are clamped: high at most 90 and above low).
    pub fn new(low_pct: u32, high_pct: u32) -> Watermarks {
        let low_pct = low_pct.min(50);
        Watermarks {
            low_pct,
            high_pct: high_pct.clamp(low_pct.saturating_add(1), 90),
        }
    }

    /// Off (`reclaim_low=0`)?
    pub fn off(&self) -> bool {
        self.low_pct == 0
    }

    /// The low and high marks in frames for a node of `total` frames:
    /// the low mark at least one frame, the high one above it.
    pub fn frames(&self, total: usize) -> (usize, usize) {
        if self.off() || total == 0 {
            return (0, 0);
        }
        let pct = |p: u32| total.saturating_mul(p as usize) / 100;
        let low = pct(self.low_pct).max(1);
        let high = pct(self.high_pct).max(low + 1).min(total);
        (low, high)
    }

    /// Frames to reclaim now for a node of `total` frames with `free`
    /// free and `coming` on their way back (evictions in flight): none
    /// while at or above the low mark, else up to the high mark.
    pub fn wanted(&self, total: usize, free: usize, coming: usize) -> usize {
        let (low, high) = self.frames(total);
        let have = free.saturating_add(coming);
        if have >= low {
            return 0;
        }
        high.saturating_sub(have)
    }

    /// Frames still to reclaim to reach the high mark (a round of
    /// reclaim started under the low mark goes on up to it).
    pub fn to_high(&self, total: usize, free: usize, coming: usize) -> usize {
        let (_, high) = self.frames(total);
        high.saturating_sub(free.saturating_add(coming))
    }
}

/// What reclaim ahead of need did, for `cache stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReclaimCounts {
    /// Pages reclaimed ahead of need (before any miss wanted their frame).
    pub ahead: u64,
    /// Misses that found no free frame and waited for reclaim.
    pub waited: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_wanted_at_or_above_the_low_mark() {
        let w = Watermarks::new(10, 20);
        assert_eq!(w.frames(1000), (100, 200));
        assert_eq!(w.wanted(1000, 100, 0), 0);
        assert_eq!(w.wanted(1000, 500, 0), 0);
        assert_eq!(w.wanted(1000, 60, 40), 0, "frames coming back count");
    }

    #[test]
    fn under_the_low_mark_reclaim_goes_up_to_the_high_mark() {
        let w = Watermarks::new(10, 20);
        assert_eq!(w.wanted(1000, 99, 0), 101);
        assert_eq!(w.wanted(1000, 0, 0), 200);
        assert_eq!(w.wanted(1000, 50, 30), 120);
        assert_eq!(w.to_high(1000, 150, 0), 50, "a round goes on above low");
        assert_eq!(w.to_high(1000, 250, 0), 0);
    }

    #[test]
    fn small_pools_keep_a_frame_and_off_wants_nothing() {
        let w = Watermarks::new(1, 2);
        assert_eq!(w.frames(10), (1, 2));
        assert_eq!(w.wanted(10, 0, 0), 2);
        assert_eq!(Watermarks::OFF.wanted(10, 0, 0), 0);
        assert_eq!(Watermarks::new(0, 8).wanted(1000, 0, 0), 0);
        assert_eq!(Watermarks::new(50, 10).frames(100), (50, 51));
    }
}
