//! What the cache commands share: `cache policy` and `cache config`
//! ([`super::control`]) and their group forms ([`super::groups`]) check
//! limits and name policies the same way.

use alloc::format;

use super::{quoted, Error};
use crate::os::{Errno, PolicyName};

/// Largest page limit `cache config limit=` accepts.
pub const MAX_LIMIT: u64 = 1 << 32;

/// An OS error as the shell prints it.
pub(super) fn os_err(e: Errno) -> Error {
    Error::Msg(format!("{e}"))
}

/// `NAME` is not an eviction policy.
pub(super) fn unknown_policy(name: &str) -> Error {
    Error::Msg(format!(
        "unknown policy '{}' (valid: {})",
        quoted(name),
        PolicyName::names()
    ))
}
