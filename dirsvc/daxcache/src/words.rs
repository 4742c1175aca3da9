//! The shared words every structure lives in, and the pause of a wait.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::Error;

/// An array of shared 64-bit words. Every operation is sequentially
/// consistent (on x86 a locked instruction or a plain load/store, which
/// `--accel tcg-multi` makes atomic across instances) and checks its index:
/// an index outside the array is [`Error::OutOfBounds`].
pub trait Words {
    /// How many words.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn load(&self, i: usize) -> Result<u64, Error>;
    fn store(&self, i: usize, v: u64) -> Result<(), Error>;
    /// Compare-and-swap: `Ok(old)` if the word held `old` and now holds
    /// `new`, else `Err(actual)`.
    fn cas(&self, i: usize, old: u64, new: u64) -> Result<Result<u64, u64>, Error>;
    /// Atomic OR; returns the previous value.
    fn fetch_or(&self, i: usize, bits: u64) -> Result<u64, Error>;
    /// Atomic AND; returns the previous value.
    fn fetch_and(&self, i: usize, bits: u64) -> Result<u64, Error>;
}

impl Words for [AtomicU64] {
    fn len(&self) -> usize {
        <[AtomicU64]>::len(self)
    }
    fn load(&self, i: usize) -> Result<u64, Error> {
        Ok(self
            .get(i)
            .ok_or(Error::OutOfBounds)?
            .load(Ordering::SeqCst))
    }
    fn store(&self, i: usize, v: u64) -> Result<(), Error> {
        self.get(i)
            .ok_or(Error::OutOfBounds)?
            .store(v, Ordering::SeqCst);
        Ok(())
    }
    fn cas(&self, i: usize, old: u64, new: u64) -> Result<Result<u64, u64>, Error> {
        Ok(self.get(i).ok_or(Error::OutOfBounds)?.compare_exchange(
            old,
            new,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ))
    }
    fn fetch_or(&self, i: usize, bits: u64) -> Result<u64, Error> {
        Ok(self
            .get(i)
            .ok_or(Error::OutOfBounds)?
            .fetch_or(bits, Ordering::SeqCst))
    }
    fn fetch_and(&self, i: usize, bits: u64) -> Result<u64, Error> {
        Ok(self
            .get(i)
            .ok_or(Error::OutOfBounds)?
            .fetch_and(bits, Ordering::SeqCst))
    }
}

/// How a blocked step machine waits for another participant: `pause`
/// returns false once the wait has lasted too long (the caller then fails
/// with a clear error instead of hanging).
pub trait Waiter {
    fn pause(&mut self) -> bool;
}

/// A waiter that gives up after a number of pauses, each a spin hint; the
/// kernel uses a deadline on its clock instead.
pub struct SpinWaiter {
    pub left: u64,
}

impl Waiter for SpinWaiter {
    fn pause(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        core::hint::spin_loop();
        true
    }
}
