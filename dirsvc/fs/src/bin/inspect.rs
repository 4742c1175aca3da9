//! `inspect`: validate a onecopy disk image and list it, or print one file.
//!
//! ```text
//! inspect IMAGE              summary line + tree (path, kind, size, version)
//! inspect IMAGE --check      validate the metadata and every data block
//! inspect IMAGE --cat PATH   write the file's bytes to stdout
//! inspect IMAGE --blocks PATH  where the file's blocks are on the image
//! ```
//!
//! The image is opened read-only and mounted with the same validation the
//! directory kernel runs. Exit status: 0 ok, 1 bad image / bad data block /
//! missing path / I/O error, 2 bad arguments.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use common::FileDisk;
use fabric::proto::{Attr, FileKind};
use flatfs::{Fs, BLOCK_SIZE, ROOT_INO, VERSION};

const USAGE: &str = "\
usage: inspect IMAGE [--check | --cat PATH | --blocks PATH]

Validate a onecopy disk image (read-only) and list its tree: one line per
inode with path, kind, size (bytes; entries for a directory) and version.

options:
  --check       validate the metadata, then read every data block of every
                file and check it against its checksum: print \"IMAGE: ok
                (...)\", or the problem, or one line per bad data block
                (inode, path, block, device block) and a count (exit 1)
  --cat PATH    write the bytes of file PATH to stdout
  --blocks PATH one line per block of file PATH: block index, device
                block, byte offset in the image
  -h, --help    print this help";

enum Mode {
    List,
    Check,
    Cat(String),
    Blocks(String),
}

fn usage_error(msg: &str) -> ExitCode {
    eprintln!("inspect: {msg}\n{USAGE}");
    ExitCode::from(2)
}

fn parse_args(argv: &[String]) -> Result<Option<(PathBuf, Mode)>, String> {
    let mut image = None;
    let mut mode = None;
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        i += 1;
        let set = |mode: &mut Option<Mode>, m: Mode| {
            if mode.is_some() {
                return Err(String::from("--check, --cat and --blocks are exclusive"));
            }
            *mode = Some(m);
            Ok(())
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--check" => set(&mut mode, Mode::Check)?,
            "--cat" => {
                let p = argv.get(i).ok_or("--cat needs a PATH")?;
                i += 1;
                set(&mut mode, Mode::Cat(p.clone()))?;
            }
            a if a.starts_with("--cat=") => set(&mut mode, Mode::Cat(a[6..].to_string()))?,
            "--blocks" => {
                let p = argv.get(i).ok_or("--blocks needs a PATH")?;
                i += 1;
                set(&mut mode, Mode::Blocks(p.clone()))?;
            }
            a if a.starts_with("--blocks=") => set(&mut mode, Mode::Blocks(a[9..].to_string()))?,
            a if a.starts_with('-') && a.len() > 1 => {
                return Err(format!("unknown option {a}"));
            }
            a => {
                if image.is_some() {
                    return Err(format!("unexpected argument {a:?}"));
                }
                image = Some(PathBuf::from(a));
            }
        }
    }
    let image = image.ok_or("missing IMAGE")?;
    Ok(Some((image, mode.unwrap_or(Mode::List))))
}

/// Every inode under `dir`, depth first, entries sorted by name.
fn walk(
    fs: &mut Fs<FileDisk>,
    dir: u64,
    prefix: &str,
    out: &mut Vec<(String, Attr)>,
) -> Result<(), String> {
    let mut entries = Vec::new();
    let mut cookie = 0;
    loop {
        let (page, next) = fs
            .readdir(dir, cookie, 256)
            .map_err(|e| format!("readdir {prefix}/: {e}"))?;
        entries.extend(page);
        if next == 0 {
            break;
        }
        cookie = next;
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let path = format!("{prefix}/{}", e.name);
        out.push((path.clone(), e.attr));
        if e.attr.kind == FileKind::Dir {
            walk(fs, e.attr.ino, &path, out)?;
        }
    }
    Ok(())
}

fn list(fs: &mut Fs<FileDisk>, image: &str) -> Result<(), String> {
    let g = fs.geometry();
    let st = fs.stats();
    let bytes = g.total_blocks * BLOCK_SIZE as u64;
    let size = if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    };
    println!(
        "{image}: onecopy v{VERSION}, {size} ({} blocks), {}/{} inodes used, {}/{} data blocks used",
        g.total_blocks,
        st.inodes_used,
        st.inodes_total,
        st.blocks_used,
        st.blocks_total
    );
    let root = fs.getattr(ROOT_INO).map_err(|e| format!("root: {e}"))?;
    let mut rows = vec![(String::from("/"), root)];
    walk(fs, ROOT_INO, "", &mut rows)?;
    let width = rows.iter().map(|(p, _)| p.len()).max().unwrap_or(1);
    let mut out = std::io::stdout().lock();
    for (path, a) in rows {
        let kind = match a.kind {
            FileKind::File => "file",
            FileKind::Dir => "dir",
        };
        let line = format!("{path:<width$}  {kind:<4}  {:>12}  v{}", a.size, a.version);
        if writeln!(out, "{line}").is_err() {
            break; // stdout closed (e.g. piped into head)
        }
    }
    Ok(())
}

fn cat(fs: &mut Fs<FileDisk>, path: &str) -> Result<(), String> {
    let a = fs.lookup(path).map_err(|e| format!("{path}: {e}"))?;
    if a.kind == FileKind::Dir {
        return Err(format!("{path}: is a directory"));
    }
    let mut out = std::io::stdout().lock();
    let mut buf = vec![0u8; 256 * BLOCK_SIZE];
    let mut off = 0u64;
    while off < a.size {
        let n = fs
            .read(a.ino, off, &mut buf)
            .map_err(|e| format!("{path}: read at {off}: {e}"))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])
            .map_err(|e| format!("{path}: stdout: {e}"))?;
        off += n as u64;
    }
    out.flush().map_err(|e| format!("{path}: stdout: {e}"))
}

fn blocks(fs: &mut Fs<FileDisk>, path: &str) -> Result<(), String> {
    let a = fs.lookup(path).map_err(|e| format!("{path}: {e}"))?;
    let lbas = fs.file_blocks(a.ino).map_err(|e| format!("{path}: {e}"))?;
    let mut out = std::io::stdout().lock();
    for (i, lba) in lbas.into_iter().enumerate() {
        let off = lba * BLOCK_SIZE as u64;
        writeln!(out, "{i} {lba} {off}").map_err(|e| format!("{path}: stdout: {e}"))?;
    }
    Ok(())
}

/// `--check`: the mount has validated the metadata; read every data block.
fn check(fs: &mut Fs<FileDisk>, image: &str) -> Result<(), String> {
    let bad = fs
        .check_data()
        .map_err(|e| format!("reading data blocks: {e}"))?;
    let st = fs.stats();
    if bad.is_empty() {
        println!(
            "{image}: ok ({} inodes used, {} blocks used, every data block matches its checksum)",
            st.inodes_used, st.blocks_used
        );
        return Ok(());
    }
    let mut paths = Vec::new();
    walk(fs, ROOT_INO, "", &mut paths)?;
    for b in &bad {
        let path = paths
            .iter()
            .find(|(_, a)| a.ino == b.ino)
            .map_or("?", |(p, _)| p.as_str());
        println!(
            "{image}: inode {} ({path}) block {} (device block {}): data checksum mismatch",
            b.ino, b.block, b.lba
        );
    }
    Err(format!("{} bad data block(s)", bad.len()))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let (image_path, mode) = match parse_args(&argv) {
        Ok(Some(x)) => x,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => return usage_error(&msg),
    };
    let image = image_path.display().to_string();
    let disk = match FileDisk::open_read_only(&image_path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("inspect: {image}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut fs = match Fs::mount(disk) {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("inspect: {image}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match mode {
        Mode::Check => check(&mut fs, &image),
        Mode::List => list(&mut fs, &image),
        Mode::Cat(path) => cat(&mut fs, &path),
        Mode::Blocks(path) => blocks(&mut fs, &path),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("inspect: {image}: {msg}");
            ExitCode::FAILURE
        }
    }
}
