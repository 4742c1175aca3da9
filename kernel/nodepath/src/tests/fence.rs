//! A node's own fencing: it stops at its next I/O, before touching the
//! region, when the directory declared it failed (every mapping dropped
//! first) or when the directory's heartbeat stood still past the timeout
//! (even for pages it holds, which need no directory call).

use fabric::config::Mode;
use fabric::layout::{Header, NodeState};
use fabric::proto::Errno;
use osapi::io::OpenFlags;

use crate::rig::{Rig, RigConfig, HALT_STEP_NS};
use crate::tests::{pattern, read_file, write_file};
use crate::wait::DIR_SILENT_NS;

/// Run the rig (directory passes while it is up, heartbeats of the nodes
/// not frozen) for `ns` of fake time.
fn run_for(rig: &Rig, ns: u64) {
    for _ in 0..ns.div_ceil(HALT_STEP_NS) {
        rig.sh.step(0, HALT_STEP_NS);
    }
}

fn dead_directory_fails_every_later_write(mode: Mode) {
    let rig = Rig::new(RigConfig::new(1, mode));
    let data = pattern(8192, 5);
    write_file(&mut rig.node(1), "/f", &data);
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    // Its pages are held: these writes need no directory call.
    rig.set_dir_up(false);
    // The I/O loop goes on: its first write after the death is the last
    // that sees the heartbeat move (the node cannot tell when it stopped).
    // (Relaxed: a write makes a private copy through the directory,
    // so it fails at once.)
    let held = mode != Mode::Relaxed;
    let w = rig.node(1).write(fd, b"abc");
    assert!(!held || w == Ok(3), "{mode:?}: {w:?}");
    run_for(&rig, DIR_SILENT_NS / 2);
    rig.node(1).seek(fd, 0).unwrap();
    let w = rig.node(1).write(fd, b"abc");
    assert!(!held || w == Ok(3), "{mode:?}: too early: {w:?}");
    run_for(&rig, DIR_SILENT_NS / 2 + 2 * HALT_STEP_NS);
    let mut n = rig.node(1);
    n.seek(fd, 0).unwrap();
    assert_eq!(n.write(fd, b"xyz"), Err(Errno::Unavailable), "{mode:?}");
    assert_eq!(n.fsync(fd), Err(Errno::Unavailable), "{mode:?}");
    assert_eq!(n.write(fd, b"xyz"), Err(Errno::Unavailable), "{mode:?}");
    assert_eq!(n.sync(), Err(Errno::Unavailable), "{mode:?}");
    assert_eq!(
        n.read(fd, &mut [0u8; 8]),
        Err(Errno::Unavailable),
        "{mode:?}"
    );
}

#[test]
fn a_dead_directory_fails_writes_within_the_timeout_strong() {
    dead_directory_fails_every_later_write(Mode::Strong);
}

#[test]
fn a_dead_directory_fails_writes_within_the_timeout_private() {
    dead_directory_fails_every_later_write(Mode::Private);
}

#[test]
fn the_timeout_is_the_heartbeat_timeout_when_shorter() {
    let rig = Rig::new(RigConfig::new(1, Mode::Strong));
    write_file(&mut rig.node(1), "/f", &pattern(4096, 1));
    rig.node(1).link.set_dir_timeout(200_000_000);
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.set_dir_up(false);
    assert_eq!(rig.node(1).write(fd, b"a"), Ok(1));
    run_for(&rig, 150_000_000);
    assert_eq!(rig.node(1).write(fd, b"a"), Ok(1));
    run_for(&rig, 60_000_000);
    assert_eq!(rig.node(1).write(fd, b"a"), Err(Errno::Unavailable));
}

#[test]
fn a_node_declared_failed_drops_its_mappings_before_any_store() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let data = pattern(8192, 9);
    write_file(&mut rig.node(1), "/f", &data);
    // Node 2 writes into node 1's frames (mapped here).
    let fd = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    assert_eq!(rig.node(2).write(fd, b"node2"), Ok(5));
    let ino = rig.node(2).fd_info(fd).unwrap().0;
    assert!(rig.node(2).vfs.data_path_ref().holds(ino, 0));
    // Node 2 pauses until the directory declares it failed.
    rig.freeze(2);
    let h = Header::new(&*rig.sh.mem, rig.sh.layout);
    let mut waited = 0;
    while h.node_state(2) != Some(NodeState::Failed) {
        run_for(&rig, 100_000_000);
        waited += 1;
        assert!(waited < 100, "node 2 never declared failed");
    }
    // Node 2 comes back: its next I/O stops before storing anything.
    rig.thaw(2);
    let before = rig.frame(rig.sh.layout.pool_gfns(1).0);
    let mut n = rig.node(2);
    n.seek(fd, 0).unwrap();
    assert_eq!(n.write(fd, b"LATE!"), Err(Errno::Fenced));
    assert!(!n.vfs.data_path_ref().holds(ino, 0), "mapping kept");
    assert!(n.link.env.mapped.borrow().is_empty(), "window mapping kept");
    drop(n);
    assert_eq!(rig.frame(rig.sh.layout.pool_gfns(1).0), before);
    // Nothing node 2 stored after its failure reached the file.
    let mut want = data.clone();
    want[..5].copy_from_slice(b"node2");
    assert_eq!(read_file(&mut rig.node(1), "/f"), want);
}
