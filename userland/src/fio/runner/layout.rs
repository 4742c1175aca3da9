//! fio's layout phase (not timed): files extended to `size`, with the
//! pattern bytes when the jobs read.

use alloc::string::String;
use alloc::vec::Vec;

use super::{os_err, FioError, LAYOUT_CHUNK};
use crate::fio::options::JobSpec;
use crate::os::{Errno, Fd, FileKind, OpenFlags, Os};
use crate::pattern;

/// fio's layout phase (not timed): make every file at least `size`
/// bytes. Jobs that read get the userland test pattern appended; write-only
/// jobs just extend the file. Returns (files touched, bytes written).
pub(super) fn layout(
    os: &mut dyn Os,
    spec: &JobSpec,
    files: &[String],
) -> Result<(u32, u64), FioError> {
    let mut touched = 0u32;
    let mut written = 0u64;
    let mut chunk: Vec<u8> = Vec::new();
    for path in files {
        let cur = match os.stat(path) {
            Ok(a) if a.kind == FileKind::Dir => {
                return Err(os_err(path, "layout", Errno::IsDir));
            }
            Ok(a) => a.size,
            Err(Errno::NotFound) => 0,
            Err(e) => return Err(os_err(path, "layout", e)),
        };
        if cur >= spec.size {
            continue;
        }
        touched += 1;
        let flags = OpenFlags {
            create: true,
            append: spec.rw.reads(),
            ..OpenFlags::default()
        };
        let fd = os
            .open(path, flags)
            .map_err(|e| os_err(path, "layout", e))?;
        let r = if spec.rw.reads() {
            if chunk.is_empty() {
                chunk.resize(LAYOUT_CHUNK, 0);
            }
            append_pattern(os, fd, cur, spec.size, &mut chunk, &mut written)
        } else {
            os.truncate(fd, spec.size)
        };
        let closed = os.close(fd);
        r.map_err(|e| os_err(path, "layout", e))?;
        closed.map_err(|e| os_err(path, "layout", e))?;
    }
    Ok((touched, written))
}

/// Append the pattern for `[from, to)` to a file opened for appending.
fn append_pattern(
    os: &mut dyn Os,
    fd: Fd,
    from: u64,
    to: u64,
    chunk: &mut [u8],
    written: &mut u64,
) -> Result<(), Errno> {
    let mut off = from;
    while off < to {
        let n = usize::try_from(to - off).map_or(chunk.len(), |r| r.min(chunk.len()));
        let part = chunk.get_mut(..n).ok_or(Errno::Io)?;
        pattern::fill(part, off);
        let mut done = 0;
        while done < n {
            let k = os.write(fd, part.get(done..).ok_or(Errno::Io)?)?;
            if k == 0 {
                return Err(Errno::Io);
            }
            done += k;
        }
        off += n as u64;
        *written = written.saturating_add(n as u64);
    }
    Ok(())
}
