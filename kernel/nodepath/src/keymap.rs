//! Hash maps and sets keyed by [`PageKey`] for the hot paths that need
//! no order (a hit's policy bookkeeping, misses in flight).
//!
//! Measured on this host under TCG (temporary timers in a local hit): a `BTreeMap` lookup of a page cost about 0.25-0.45 us and
//! a hit made about six (the slot, then the policy's lists and groups);
//! with these maps the median `bench read` hit went from 2.4 to 2.25 us
//! (`private`'s: 1.4 us). The hasher is rustc's Fx
//! hash with no random state, so iteration order (never relied on by
//! these maps' users) is the same on every run: simulations stay
//! replayable. Maps that need ranges or key order (a file's pages, the
//! write-back order) stay `BTreeMap`s.

use core::hash::BuildHasherDefault;

use fabric::proto::PageKey;
use rustc_hash::FxHasher;

/// The hasher of every map here (deterministic).
pub type Fx = BuildHasherDefault<FxHasher>;

/// A map from pages to `V`, unordered.
pub type KeyMap<V> = hashbrown::HashMap<PageKey, V, Fx>;

/// A set of pages, unordered.
pub type KeySet = hashbrown::HashSet<PageKey, Fx>;
