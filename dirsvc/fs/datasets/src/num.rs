//! Sizes (`64k`, `1m`) and counts as the shell, the host tools and the
//! dataset specs write them (`userland::parse` re-exports them). Nothing
//! here panics, whatever the input.

use core::fmt;

/// Why a size or count could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumError {
    /// Nothing to parse.
    Empty,
    /// Not a number, or an unknown suffix.
    Invalid,
    /// Does not fit in 64 bits.
    Overflow,
}

impl fmt::Display for NumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NumError::Empty => "empty number",
            NumError::Invalid => "not a number",
            NumError::Overflow => "number too large",
        })
    }
}

/// Parse an unsigned decimal integer (ASCII digits only, no sign).
pub fn u64_dec(s: &str) -> Result<u64, NumError> {
    if s.is_empty() {
        return Err(NumError::Empty);
    }
    let mut v: u64 = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            return Err(NumError::Invalid);
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or(NumError::Overflow)?;
    }
    Ok(v)
}

/// Parse a size in bytes: a decimal number optionally followed by a unit
/// `k`, `m`, `g` or `t` (powers of 1024, case-insensitive), which may be
/// spelled `kb` or `kib` as well. A bare `b` means bytes.
///
/// `4096`, `64k`, `64KiB`, `1m`, `2G` are all accepted; `12q`, `k`, `1.5m`
/// and `-1` are not.
pub fn size(s: &str) -> Result<u64, NumError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(NumError::Empty);
    }
    let digits_end = s.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = s.split_at(digits_end);
    if num.is_empty() {
        return Err(NumError::Invalid);
    }
    let unit = unit.to_ascii_lowercase();
    let shift = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(NumError::Invalid),
    };
    let n = u64_dec(num)?;
    n.checked_mul(1u64 << shift).ok_or(NumError::Overflow)
}

/// A decimal or `0x` hexadecimal integer.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() => u64::from_str_radix(h, 16).ok(),
        _ => u64_dec(s).ok(),
    }
}
