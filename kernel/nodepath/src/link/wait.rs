//! The one wait routine of the node: every wait for the directory (a call
//! on the rings, a batch of page requests, a join) steps a [`Waiter`],
//! which gives up when the wait exceeds its timeout or the directory's
//! heartbeat (in the region's header) stops moving for [`DIR_SILENT_NS`].
//! [`crate::link::Link`] services invalidations before every step.

/// The directory is considered gone when its heartbeat stops this long.
pub const DIR_SILENT_NS: u64 = 1_500_000_000;
/// Spin this long before halting while waiting for an answer (without
/// doorbells: a halt then lasts until the next timer tick). With doorbells
/// the kernel picks a shorter spin ([`crate::env::Doorbell::spin_ns`]).
pub const SPIN_NS: u64 = 200_000;

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Keep waiting, spinning (the answer usually comes soon).
    Spin,
    /// Keep waiting, halting between interrupts.
    Halt,
    /// Give up: timeout, or the directory's heartbeat stopped.
    GiveUp,
}

/// Progress of one wait. Its clock starts at the first step, so making one
/// costs nothing on calls answered before any wait.
#[derive(Debug, Clone, Copy)]
pub struct Waiter {
    timeout_ns: u64,
    spin_ns: u64,
    /// (start, last heartbeat seen, when it last changed)
    state: Option<(u64, u64, u64)>,
}

impl Waiter {
    /// A wait that gives up after `timeout_ns`.
    pub fn new(timeout_ns: u64) -> Waiter {
        Waiter {
            timeout_ns,
            spin_ns: SPIN_NS,
            state: None,
        }
    }

    /// The same wait, spinning `spin_ns` before it halts.
    pub fn spinning(mut self, spin_ns: u64) -> Waiter {
        self.spin_ns = spin_ns;
        self
    }

    /// Start over (progress was made).
    pub fn reset(&mut self) {
        self.state = None;
    }

    /// The earliest time a step could give up (a sleeper's deadline):
    /// the timeout or the directory falling silent, whichever is first.
    /// `u64::MAX` before the first step.
    pub fn deadline(&self) -> u64 {
        match self.state {
            None => u64::MAX,
            Some((start, _, last_change)) => (start.saturating_add(self.timeout_ns))
                .min(last_change.saturating_add(DIR_SILENT_NS))
                .saturating_add(1),
        }
    }

    /// One step at time `now` with the directory's heartbeat `hb`.
    pub fn step(&mut self, now: u64, hb: u64) -> Step {
        let (start, last_hb, last_change) = self.state.get_or_insert((now, hb, now));
        if hb != *last_hb {
            *last_hb = hb;
            *last_change = now;
        }
        let elapsed = now.saturating_sub(*start);
        if elapsed > self.timeout_ns || now.saturating_sub(*last_change) > DIR_SILENT_NS {
            self.state = None;
            return Step::GiveUp;
        }
        if elapsed < self.spin_ns {
            Step::Spin
        } else {
            Step::Halt
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_then_halts_then_times_out() {
        let mut w = Waiter::new(10_000_000);
        assert_eq!(w.step(1_000, 7), Step::Spin);
        assert_eq!(w.step(1_000 + SPIN_NS - 1, 8), Step::Spin);
        assert_eq!(w.step(1_000 + SPIN_NS, 9), Step::Halt);
        assert_eq!(w.step(1_000 + 10_000_000, 10), Step::Halt);
        assert_eq!(w.step(1_001 + 10_000_000, 11), Step::GiveUp);
        // A give-up starts over.
        assert_eq!(w.step(50_000_000, 11), Step::Spin);
    }

    #[test]
    fn a_silent_directory_is_given_up_before_the_timeout() {
        let mut w = Waiter::new(60_000_000_000);
        assert_eq!(w.step(0, 5), Step::Spin);
        assert_eq!(w.step(DIR_SILENT_NS, 5), Step::Halt);
        assert_eq!(w.step(DIR_SILENT_NS + 1, 5), Step::GiveUp);
        // A beating directory is waited for.
        let mut w = Waiter::new(60_000_000_000);
        for i in 0..10 {
            assert_ne!(w.step(i * DIR_SILENT_NS, i), Step::GiveUp);
        }
    }

    #[test]
    fn the_deadline_is_the_first_give_up() {
        let mut w = Waiter::new(10 * DIR_SILENT_NS);
        assert_eq!(w.deadline(), u64::MAX);
        assert_eq!(w.step(100, 1), Step::Spin);
        // The directory's silence comes first...
        assert_eq!(w.deadline(), 100 + DIR_SILENT_NS + 1);
        assert_eq!(w.step(w.deadline() - 1, 1), Step::Halt);
        // ...until it beats; then the timeout.
        assert_eq!(w.step(DIR_SILENT_NS, 2), Step::Halt);
        assert_eq!(w.deadline(), 2 * DIR_SILENT_NS + 1);
        let mut w = Waiter::new(1_000);
        w.step(0, 0);
        assert_eq!(w.deadline(), 1_001);
        assert_ne!(w.step(1_000, 0), Step::GiveUp);
        assert_eq!(w.step(w.deadline(), 0), Step::GiveUp);
    }

    #[test]
    fn the_spin_is_configurable() {
        let mut w = Waiter::new(1_000_000).spinning(20_000);
        assert_eq!(w.step(0, 0), Step::Spin);
        assert_eq!(w.step(19_999, 0), Step::Spin);
        assert_eq!(w.step(20_000, 0), Step::Halt);
        let mut w = Waiter::new(1_000_000).spinning(0);
        assert_eq!(w.step(5, 0), Step::Halt);
    }

    #[test]
    fn reset_restarts_the_clock() {
        let mut w = Waiter::new(1_000);
        assert_eq!(w.step(0, 0), Step::Spin);
        w.reset();
        assert_eq!(w.step(900, 0), Step::Spin);
        assert_eq!(w.step(1_900, 0), Step::Spin);
        assert_eq!(w.step(1_901, 0), Step::GiveUp);
    }
}
