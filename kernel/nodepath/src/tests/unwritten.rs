//! A write-back that fails (here a disk error under the file server) in
//! relaxed, `private` and `net` mode loses exactly what its node could
//! not write, which its close reports: never another node's completed
//! writes, which read neither as zeros nor as the failed node's bytes, on
//! any node or on the disk.

use super::*;

fn append_flags() -> OpenFlags {
    OpenFlags {
        create: true,
        append: true,
        ..OpenFlags::default()
    }
}

/// A line of `tag` (no zero byte, ends in a newline).
fn line(tag: &str) -> Vec<u8> {
    format!("{tag} {}\n", "x".repeat(40)).into_bytes()
}

/// Append `l` on node `k`: open, write, close (the close's result).
fn append(rig: &Rig, k: u32, l: &[u8]) -> Result<(), Errno> {
    let mut n = rig.node(k);
    let fd = n.open("/log", append_flags())?;
    assert_eq!(n.write(fd, l), Ok(l.len()));
    n.close(fd)
}

/// Node 2 writes the log's head (and, relaxed, reads it: node 1's append
/// then goes into a private copy of node 2's frame). Node 1 appends a
/// line whose close fails (the file server's next disk read fails), then
/// node 2 appends three lines, each closed. The rig, node 1's failed line
/// and node 2's lines.
fn a_failed_append_then_others(mode: Mode) -> (Rig, Vec<u8>, Vec<Vec<u8>>) {
    let rig = Rig::new(RigConfig::new(2, mode));
    write_file(&mut rig.node(2), "/log", b"head\n");
    read_file(&mut rig.node(2), "/log");
    let failed = line("node 1 failed");
    {
        let mut n = rig.node(1);
        let fd = n.open("/log", append_flags()).unwrap();
        assert_eq!(n.write(fd, &failed), Ok(failed.len()));
        rig.sh.fail_read_in.set(Some(0));
        let c = n.close(fd);
        rig.sh.fail_read_in.set(None);
        assert!(
            c.is_err(),
            "{mode:?}: the close reports the failed write-back"
        );
    }
    let lines: Vec<Vec<u8>> = (0..3).map(|i| line(&format!("node 2 line {i}"))).collect();
    for l in &lines {
        append(&rig, 2, l).unwrap();
    }
    (rig, failed, lines)
}

/// Node 2's view: the head and its lines.
fn expected(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut want = b"head\n".to_vec();
    for l in lines {
        want.extend_from_slice(l);
    }
    want
}

/// Node 1 reads the log after its failed append and node 2's three: it
/// must read what node 2 reads, with no zero byte (its stale page under
/// the size node 2's appends published read as zeros past its old end).
fn a_failed_append_reads_no_zeros_under_a_size_others_grew(mode: Mode) {
    let (rig, _, lines) = a_failed_append_then_others(mode);
    let want = expected(&lines);
    assert_eq!(
        read_file(&mut rig.node(2), "/log"),
        want,
        "{mode:?}: node 2"
    );
    let got = read_file(&mut rig.node(1), "/log");
    let zeros = got.iter().filter(|&&b| b == 0).count();
    assert_eq!(
        zeros, 0,
        "{mode:?}: node 1 read {zeros} zero bytes: {got:?}"
    );
    assert_eq!(got, want, "{mode:?}: node 1");
}

#[test]
fn relaxed_a_failed_append_reads_no_zeros_under_a_size_others_grew() {
    a_failed_append_reads_no_zeros_under_a_size_others_grew(Mode::Relaxed);
}

#[test]
fn private_a_failed_append_reads_no_zeros_under_a_size_others_grew() {
    a_failed_append_reads_no_zeros_under_a_size_others_grew(Mode::Private);
}

#[test]
fn net_a_failed_append_reads_no_zeros_under_a_size_others_grew() {
    a_failed_append_reads_no_zeros_under_a_size_others_grew(Mode::Net);
}

/// After its failed append and node 2's three, node 1 appends again and
/// the close succeeds: its failed line must never land where node 2's
/// first line did (as the rest of the stale page it kept), on either node
/// or on the disk; every one of node 2's lines and node 1's new line is
/// there once.
fn a_failed_append_never_lands_over_another_nodes_line(mode: Mode) {
    let (rig, failed, lines) = a_failed_append_then_others(mode);
    let again = line("node 1 again");
    append(&rig, 1, &again).unwrap();
    let mut want = expected(&lines);
    want.extend_from_slice(&again);
    for k in [1, 2] {
        let got = read_file(&mut rig.node(k), "/log");
        assert!(
            !got.windows(failed.len()).any(|w| w == failed),
            "{mode:?}: node {k} shows the failed line: {:?}",
            String::from_utf8_lossy(&got)
        );
        assert_eq!(got, want, "{mode:?}: node {k}");
    }
    rig.node(1).sync().unwrap();
    rig.node(2).sync().unwrap();
    assert_eq!(disk_bytes(&rig, "/log"), want, "{mode:?}: the disk");
}

#[test]
fn relaxed_a_failed_append_never_lands_over_another_nodes_line() {
    a_failed_append_never_lands_over_another_nodes_line(Mode::Relaxed);
}

#[test]
fn private_a_failed_append_never_lands_over_another_nodes_line() {
    a_failed_append_never_lands_over_another_nodes_line(Mode::Private);
}

#[test]
fn net_a_failed_append_never_lands_over_another_nodes_line() {
    a_failed_append_never_lands_over_another_nodes_line(Mode::Net);
}
