//! File commands: `ls`, `cat`, `write`, `append`, `fill`, `sum`, `stat`, `truncate`, `rm`, `mkdir`, `rmdir`, `sync`.

use super::*;

// --- ls ------------------------------------------------------------------

#[test]
fn ls_root_and_dirs() {
    let mut os = os_with(&[("/b.txt", b"12345"), ("/a/x", b""), ("/a/y", b"")]);
    assert_eq!(ok(&mut os, "ls"), "d          2 a/\n-          5 b.txt\n");
    assert_eq!(ok(&mut os, "ls /"), ok(&mut os, "ls"));
    assert_eq!(ok(&mut os, "ls a"), "-          0 x\n-          0 y\n");
    ok(&mut os, "mkdir /e");
    assert_eq!(ok(&mut os, "ls /e"), "");
}

#[test]
fn ls_file_lists_just_that_file() {
    let mut os = os_with(&[("/d/big", &[0u8; 123_456])]);
    assert_eq!(ok(&mut os, "ls d/big"), "-     123456 /d/big\n");
}

#[test]
fn ls_errors() {
    let mut os = os_with(&[("/f", b"x")]);
    assert_eq!(err(&mut os, "ls /nope"), "ls: /nope: not found");
    assert_eq!(err(&mut os, "ls /f/g"), "ls: /f/g: not a directory");
    os.fail("readdir", 0, Errno::Unavailable);
    assert_eq!(err(&mut os, "ls"), "ls: /: directory unavailable");
}

// --- cat -----------------------------------------------------------------

#[test]
fn cat_prints_text() {
    let mut os = os_with(&[("/f", b"line 1\n\tline 2\n")]);
    assert_eq!(ok(&mut os, "cat /f"), "line 1\n\tline 2\n");
}

#[test]
fn cat_replaces_unprintable_bytes() {
    let mut os = os_with(&[("/bin", b"a\x00b\r\xffc\x7f\n")]);
    assert_eq!(ok(&mut os, "cat bin"), "a.b..c.\n");
}

#[test]
fn cat_empty_file_prints_nothing() {
    let mut os = os_with(&[("/e", b"")]);
    assert_eq!(run(&mut os, "cat /e"), "ok\n");
}

#[test]
fn cat_large_file_with_short_reads() {
    let text: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut os = os_with(&[("/big", &text)]);
    os.max_io = 1000;
    let out = ok(&mut os, "cat /big");
    assert_eq!(out.len(), text.len() + 1);
    assert_eq!(&out.as_bytes()[..text.len()], &text[..]);
}

#[test]
fn cat_errors() {
    let mut os = os_with(&[("/f", b"x"), ("/d/g", b"y")]);
    assert_eq!(err(&mut os, "cat /x"), "cat: /x: not found");
    assert_eq!(err(&mut os, "cat /d"), "cat: /d: is a directory");
    assert_eq!(err(&mut os, "cat /f/x"), "cat: /f/x: not a directory");
    os.fail("open", 0, Errno::TooManyFiles);
    assert_eq!(err(&mut os, "cat /f"), "cat: /f: too many open files");
}

#[test]
fn cat_read_error_midway_keeps_one_status_line() {
    let mut os = os_with(&[("/f", b"abcdefghij")]);
    os.max_io = 4;
    os.fail("read", 1, Errno::Io);
    assert_eq!(run(&mut os, "cat /f"), "abcd\nerror: cat: /f: I/O error\n");
}

#[test]
fn cat_close_error_is_reported() {
    let mut os = os_with(&[("/f", b"abc\n")]);
    os.fail("close", 0, Errno::Io);
    assert_eq!(run(&mut os, "cat /f"), "abc\nerror: cat: /f: I/O error\n");
}

// --- write / append ------------------------------------------------------

#[test]
fn write_creates_and_truncates() {
    let mut os = MockOs::new();
    assert_eq!(run(&mut os, "write /f hello world"), "ok\n");
    assert_eq!(os.file("/f"), Some(&b"hello world\n"[..]));
    ok(&mut os, "write f bye");
    assert_eq!(os.file("/f"), Some(&b"bye\n"[..]));
}

#[test]
fn write_text_is_verbatim() {
    let mut os = MockOs::new();
    ok(&mut os, "write /f   a  b\t\"c\"   ");
    assert_eq!(os.file("/f"), Some(&b"a  b\t\"c\"\n"[..]));
    ok(&mut os, r#"write /f "  quoted  text ""#);
    assert_eq!(os.file("/f"), Some(&b"  quoted  text \n"[..]));
    ok(&mut os, r#"write /f """#);
    assert_eq!(os.file("/f"), Some(&b"\n"[..]));
    ok(&mut os, r#"write "/a file" "x" "y""#);
    assert_eq!(os.file("/a file"), Some(&b"\"x\" \"y\"\n"[..]));
    ok(&mut os, r#"write /g say "hi"#);
    assert_eq!(os.file("/g"), Some(&b"say \"hi\n"[..]));
}

#[test]
fn append_creates_and_appends() {
    let mut os = MockOs::new();
    ok(&mut os, "append /log one");
    ok(&mut os, "append /log two  words");
    assert_eq!(os.file("/log"), Some(&b"one\ntwo  words\n"[..]));
    assert_eq!(ok(&mut os, "cat /log"), "one\ntwo  words\n");
}

#[test]
fn write_with_short_writes() {
    let mut os = MockOs::new();
    os.max_io = 3;
    ok(&mut os, "write /f 0123456789");
    assert_eq!(os.file("/f"), Some(&b"0123456789\n"[..]));
}

#[test]
fn write_errors() {
    let mut os = os_with(&[("/f", b"x")]);
    ok(&mut os, "mkdir /d");
    assert_eq!(err(&mut os, "write /d x"), "write: /d: is a directory");
    assert_eq!(err(&mut os, "write /no/f x"), "write: /no/f: not found");
    assert_eq!(
        err(&mut os, "append /f/g x"),
        "append: /f/g: not a directory"
    );
    let long = "n".repeat(60);
    assert_eq!(
        err(&mut os, &format!("write /{long} x")),
        format!("write: /{long}: name too long")
    );
    os.capacity = 3;
    assert_eq!(err(&mut os, "write /g hello"), "write: /g: no space left");
    os.capacity = 1 << 20;
    os.fail("write", 0, Errno::Refused);
    assert_eq!(err(&mut os, "append /f x"), "append: /f: refused");
}

// --- fill / sum ----------------------------------------------------------

#[test]
fn fill_writes_the_pattern_in_64k_chunks() {
    let mut os = MockOs::new();
    assert_eq!(ok(&mut os, "fill /p 200k"), "wrote 204800 bytes\n");
    let data = os.file("/p").unwrap();
    assert_eq!(data.len(), 204_800);
    assert_eq!(pattern::first_mismatch(data, 0), None);
    assert_eq!(os.write_sizes, [65536, 65536, 65536, 8192]);
}

#[test]
fn fill_sizes() {
    let mut os = MockOs::new();
    assert_eq!(ok(&mut os, "fill /p 0"), "wrote 0 bytes\n");
    assert_eq!(os.file("/p"), Some(&[][..]));
    assert_eq!(ok(&mut os, "fill /p 1"), "wrote 1 bytes\n");
    assert_eq!(ok(&mut os, "fill /p 1M"), "wrote 1048576 bytes\n");
    assert_eq!(ok(&mut os, "fill /p 4097"), "wrote 4097 bytes\n");
    // Truncates what was there.
    assert_eq!(os.file("/p").map(<[u8]>::len), Some(4097));
}

#[test]
fn fill_with_short_writes_is_still_the_pattern() {
    let mut os = MockOs::new();
    os.max_io = 1000;
    ok(&mut os, "fill /p 70000");
    assert_eq!(pattern::first_mismatch(os.file("/p").unwrap(), 0), None);
}

#[test]
fn fill_errors() {
    let mut os = MockOs::new();
    assert_eq!(
        run(&mut os, "fill /p 12q"),
        "error: fill: bad size '12q' (examples: 4096, 64k, 1m)\n"
    );
    assert_eq!(os.file("/p"), None, "bad size must not create the file");
    assert_eq!(
        err(&mut os, "fill /p 99999999999t"),
        "fill: bad size '99999999999t' (examples: 4096, 64k, 1m)"
    );
    os.capacity = 100_000;
    assert_eq!(
        err(&mut os, "fill /p 1m"),
        "fill: /p: no space left after writing 100000 of 1048576 bytes; the partial file was removed"
    );
    assert_eq!(os.file("/p"), None, "the partial file is gone");
    ok(&mut os, "fill /p 4k");
    // If it cannot be removed, the message says it is still there.
    os.fail("unlink", 0, Errno::Io);
    assert_eq!(
        err(&mut os, "fill /p 1m"),
        "fill: /p: no space left after writing 100000 of 1048576 bytes; the partial file remains (removing it: I/O error)"
    );
    assert_eq!(os.file("/p").map(<[u8]>::len), Some(100_000));
    assert_eq!(err(&mut os, "fill / 1"), "fill: /: is a directory");
}

#[test]
fn sum_prints_crc_and_size() {
    let mut os = os_with(&[("/c", b"123456789"), ("/e", b"")]);
    assert_eq!(ok(&mut os, "sum /c"), "crc32=cbf43926 size=9\n");
    assert_eq!(ok(&mut os, "sum /e"), "crc32=00000000 size=0\n");
    ok(&mut os, "fill /p 300k");
    let expected = crc32fast::hash(os.file("/p").unwrap());
    assert_eq!(
        ok(&mut os, "sum p"),
        format!("crc32={expected:08x} size=307200\n")
    );
}

#[test]
fn sum_errors() {
    let mut os = os_with(&[("/c", b"123456789")]);
    assert_eq!(err(&mut os, "sum /x"), "sum: /x: not found");
    os.fail("read", 0, Errno::Io);
    assert_eq!(run(&mut os, "sum /c"), "error: sum: /c: I/O error\n");
}

// --- stat / truncate / rm / mkdir / rmdir / sync ---------------------------

#[test]
fn stat_file_and_dir() {
    let mut os = os_with(&[("/d/f", b"abc")]);
    assert_eq!(
        ok(&mut os, "stat /d/f"),
        "ino=3 kind=file size=3 version=1\n"
    );
    assert_eq!(ok(&mut os, "stat d"), "ino=2 kind=dir size=1 version=1\n");
    assert_eq!(ok(&mut os, "stat /"), "ino=1 kind=dir size=1 version=1\n");
    assert_eq!(err(&mut os, "stat /d/x"), "stat: /d/x: not found");
}

#[test]
fn truncate_grows_shrinks_and_creates() {
    let mut os = os_with(&[("/f", b"abcdef")]);
    ok(&mut os, "truncate /f 2");
    assert_eq!(os.file("/f"), Some(&b"ab"[..]));
    ok(&mut os, "truncate /f 4");
    assert_eq!(os.file("/f"), Some(&b"ab\0\0"[..]));
    ok(&mut os, "truncate /new 1k");
    assert_eq!(os.file("/new").map(<[u8]>::len), Some(1024));
}

#[test]
fn truncate_errors() {
    let mut os = os_with(&[("/f", b"abcdef")]);
    assert_eq!(
        err(&mut os, "truncate /f x"),
        "truncate: bad size 'x' (examples: 4096, 64k, 1m)"
    );
    assert_eq!(err(&mut os, "truncate / 0"), "truncate: /: is a directory");
    assert_eq!(
        err(&mut os, "truncate /f 1g"),
        "truncate: /f: no space left"
    );
    assert_eq!(os.file("/f"), Some(&b"abcdef"[..]));
}

#[test]
fn rm_mkdir_rmdir() {
    let mut os = os_with(&[("/f", b"x")]);
    ok(&mut os, "mkdir /d");
    ok(&mut os, "mkdir /d/e");
    assert_eq!(err(&mut os, "mkdir /d"), "mkdir: /d: already exists");
    assert_eq!(err(&mut os, "mkdir /x/y"), "mkdir: /x/y: not found");
    assert_eq!(err(&mut os, "rmdir /d"), "rmdir: /d: directory not empty");
    assert_eq!(err(&mut os, "rmdir /f"), "rmdir: /f: not a directory");
    assert_eq!(err(&mut os, "rm /d"), "rm: /d: is a directory");
    assert_eq!(err(&mut os, "rm /nope"), "rm: /nope: not found");
    ok(&mut os, "rmdir d/e");
    ok(&mut os, "rmdir d");
    ok(&mut os, "rm f");
    assert_eq!(ok(&mut os, "ls"), "");
}

#[test]
fn sync_ok_and_error() {
    let mut os = MockOs::new();
    ok(&mut os, "sync");
    assert_eq!(os.syncs, 1);
    os.fail("sync", 0, Errno::Unavailable);
    assert_eq!(run(&mut os, "sync"), "error: sync: directory unavailable\n");
}
