//! File commands: `ls`, `cat`, `write`, `append`, `fill`, `sum`, `stat`,
//! `truncate`, `rm`, `mkdir`, `rmdir`, `sync`, `mmap read`.

use alloc::format;
use alloc::string::String;
use alloc::vec;

use crate::os::{FileKind, OpenFlags};
use crate::pattern;

use super::{at, one_line, user_path, Args, Ctx, Error, IO_CHUNK};

/// Chunk size for `cat` reads (bounds the text printed at once).
const CAT_CHUNK: usize = 4096;

pub(super) fn cmd_ls(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = match args.get(0) {
        Some(p) => user_path(p)?,
        None => String::from("/"),
    };
    let attr = ctx.os.stat(&path).map_err(at(&path))?;
    if attr.kind == FileKind::File {
        ctx.println(&ls_line(attr.kind, attr.size, &path));
        return Ok(());
    }
    let entries = ctx.os.readdir(&path).map_err(at(&path))?;
    let mut out = String::new();
    for e in &entries {
        out.push_str(&ls_line(e.attr.kind, e.attr.size, &e.name));
        out.push('\n');
    }
    ctx.print(&out);
    Ok(())
}

/// One `ls` line: kind, size right-aligned, name (`/` after directories).
fn ls_line(kind: FileKind, size: u64, name: &str) -> String {
    let (k, slash) = match kind {
        FileKind::Dir => ('d', "/"),
        FileKind::File => ('-', ""),
    };
    format!("{} {:>10} {}{}", k, size, one_line(name), slash)
}

pub(super) fn cmd_cat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.with_file(&path, OpenFlags::default(), |ctx, fd| {
        ctx.read_all(fd, CAT_CHUNK, |ctx, data| {
            let text: String = data.iter().map(|&b| printable(b)).collect();
            ctx.print(&text);
        })
        .map_err(at(&path))
    })?;
    // The dispatcher ends an unterminated last line before the status.
    Ok(())
}

/// How `cat` shows one byte.
fn printable(b: u8) -> char {
    match b {
        b'\n' | b'\t' | 0x20..=0x7e => char::from(b),
        _ => '.',
    }
}

pub(super) fn cmd_write(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let flags = OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    };
    write_text(ctx, args, flags)
}

pub(super) fn cmd_append(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let flags = OpenFlags {
        create: true,
        append: true,
        ..OpenFlags::default()
    };
    write_text(ctx, args, flags)
}

/// `write` / `append`: the text after the path, plus a newline.
fn write_text(ctx: &mut Ctx<'_>, args: &Args<'_>, flags: OpenFlags) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut data = String::from(args.text_after(0)?);
    data.push('\n');
    ctx.with_file(&path, flags, |ctx, fd| {
        ctx.write_all(fd, data.as_bytes()).map_err(at(&path))
    })
}

pub(super) fn cmd_fill(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let size = args.size(1)?;
    let flags = OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    };
    let mut write_failed = false;
    let r = ctx.with_file(&path, flags, |ctx, fd| {
        let chunk = usize::try_from(size).map_or(IO_CHUNK, |s| s.min(IO_CHUNK));
        let mut buf = vec![0u8; chunk];
        let mut written = 0u64;
        while written < size {
            let n = usize::try_from(size - written).map_or(chunk, |r| r.min(chunk));
            let part = buf.get_mut(..n).ok_or(Error::Usage)?;
            pattern::fill(part, written);
            if let Err(e) = ctx.write_all_counted(fd, part, &mut written) {
                write_failed = true;
                return Err(Error::Msg(format!(
                    "{path}: {e} after writing {written} of {size} bytes"
                )));
            }
        }
        ctx.println(&format!("wrote {written} bytes"));
        Ok(())
    });
    match r {
        // A partial file (e.g. 66 MB of a fill that ran out of space) only
        // wastes the space: remove it, or say that it is still there.
        Err(Error::Msg(m)) if write_failed => Err(Error::Msg(match ctx.os.unlink(&path) {
            Ok(()) => format!("{m}; the partial file was removed"),
            Err(e) => format!("{m}; the partial file remains (removing it: {e})"),
        })),
        r => r,
    }
}

pub(super) fn cmd_sum(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let mut hasher = crc32fast::Hasher::new();
    let size = ctx.with_file(&path, OpenFlags::default(), |ctx, fd| {
        ctx.read_all(fd, IO_CHUNK, |_, data| hasher.update(data))
            .map_err(at(&path))
    })?;
    ctx.println(&format!("crc32={:08x} size={}", hasher.finalize(), size));
    Ok(())
}

pub(super) fn cmd_stat(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let a = ctx.os.stat(&path).map_err(at(&path))?;
    let kind = match a.kind {
        FileKind::File => "file",
        FileKind::Dir => "dir",
    };
    ctx.println(&format!(
        "ino={} kind={} size={} version={}",
        a.ino, kind, a.size, a.version
    ));
    Ok(())
}

pub(super) fn cmd_truncate(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let size = args.size(1)?;
    let flags = OpenFlags {
        create: true,
        ..OpenFlags::default()
    };
    ctx.with_file(&path, flags, |ctx, fd| {
        ctx.os.truncate(fd, size).map_err(at(&path))
    })
}

pub(super) fn cmd_rm(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.os.unlink(&path).map_err(at(&path))
}

pub(super) fn cmd_mkdir(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.os.mkdir(&path).map_err(at(&path))
}

pub(super) fn cmd_rmdir(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    ctx.os.rmdir(&path).map_err(at(&path))
}

pub(super) fn cmd_sync(ctx: &mut Ctx<'_>, _args: &Args<'_>) -> Result<(), Error> {
    ctx.os.sync().map_err(|e| Error::Msg(format!("{e}")))
}

pub(super) fn cmd_mmap_read(ctx: &mut Ctx<'_>, args: &Args<'_>) -> Result<(), Error> {
    let path = args.path(0)?;
    let (crc, size) = ctx.os.mmap_read(&path).map_err(at(&path))?;
    ctx.println(&format!("crc32={crc:08x} size={size}"));
    Ok(())
}
