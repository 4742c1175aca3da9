//! Integration check with real QEMU: two `ivshmem-doorbell` devices connect
//! to the server, one is killed, the other is told it left.
//!
//! Ignored by default (it boots QEMU); run with
//!   cargo test -p onecopy-ivshmem-server --test qemu -- --ignored

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use nix::sys::signal::Signal;

const VECTORS: u16 = 4;
const QEMU_WAIT: Duration = Duration::from_secs(30);

/// One QEMU with an ivshmem-doorbell device on the server's socket, halted
/// before the guest runs (`-S`: the device is realized, so it has read its
/// setup from the server).
fn qemu(srv: &Server, name: &str) -> KillOnDrop {
    let log = srv.dir.path(&format!("{name}.log"));
    let chardev = format!("socket,path={},id=iv", srv.socket.display());
    let device = format!("ivshmem-doorbell,chardev=iv,vectors={VECTORS}");
    let out = fs::File::create(&log).unwrap();
    let child = Command::new("qemu-system-x86_64")
        .args(["-machine", "q35", "-accel", "tcg", "-display", "none"])
        .args(["-nodefaults", "-no-user-config", "-S", "-m", "64"])
        .args(["-chardev", &chardev, "-device", &device])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("qemu-system-x86_64 must be installed (apt-get install qemu-system-x86)");
    KillOnDrop(child)
}

fn qemu_log(srv: &Server, name: &str) -> String {
    fs::read_to_string(srv.dir.path(&format!("{name}.log"))).unwrap_or_default()
}

/// The watcher's next message within the QEMU timeout.
fn next(watcher: &mut Client, srv: &Server) -> (i64, bool) {
    match watcher.try_recv(QEMU_WAIT) {
        Some((v, fd)) => (v, fd.is_some()),
        None => panic!(
            "no message for the watcher in {QEMU_WAIT:?}\nserver:\n{}\nqemu-a:\n{}\nqemu-b:\n{}",
            srv.log_text(),
            qemu_log(srv, "qemu-a"),
            qemu_log(srv, "qemu-b")
        ),
    }
}

fn expect_added(watcher: &mut Client, srv: &Server, id: i64) {
    for v in 0..VECTORS {
        assert_eq!(
            next(watcher, srv),
            (id, true),
            "peer {id} added, vector {v}"
        );
    }
}

fn assert_running(q: &mut KillOnDrop, srv: &Server, name: &str) {
    if let Ok(Some(st)) = q.0.try_wait() {
        panic!(
            "{name} exited ({st}):\n{}\nserver:\n{}",
            qemu_log(srv, name),
            srv.log_text()
        );
    }
}

#[test]
#[ignore = "boots QEMU: two qemu-system-x86_64 -S instances with ivshmem-doorbell"]
fn two_qemus_connect_and_a_killed_one_is_announced() {
    let srv = Server::start("qemu", VECTORS, &["--verbose"]);
    // A fake client first (peer 0) watches the add/remove notices.
    let mut watcher = srv.connect();
    assert_eq!(watcher.setup(VECTORS).id, 0);

    let mut a = qemu(&srv, "qemu-a");
    expect_added(&mut watcher, &srv, 1);
    let mut b = qemu(&srv, "qemu-b");
    expect_added(&mut watcher, &srv, 2);
    srv.wait_log("peer 2 connected (3 peers)");
    // QEMU B got A's vectors and then its own: the whole setup went out.
    srv.wait_log("to peer 2: 2 + eventfd (peer 2, vector 3)");

    // Both realized their device and are waiting (-S), not exiting with
    // an error.
    std::thread::sleep(Duration::from_millis(500));
    assert_running(&mut a, &srv, "qemu-a");
    assert_running(&mut b, &srv, "qemu-b");
    watcher.expect_quiet(Duration::from_millis(100));

    // Kill A: the watcher and QEMU B are told peer 1 is gone.
    a.signal(Signal::SIGKILL);
    a.wait(QEMU_WAIT).expect("qemu-a dies on SIGKILL");
    assert_eq!(next(&mut watcher, &srv), (1, false), "peer 1 removed");
    srv.wait_log("peer 1 removed");
    srv.wait_log("(2 peers)");
    srv.wait_log("to peer 2: 1\n");
    assert_running(&mut b, &srv, "qemu-b");

    // A restarted instance gets a new id.
    let mut a2 = qemu(&srv, "qemu-a2");
    expect_added(&mut watcher, &srv, 3);
    srv.wait_log("peer 3 connected (3 peers)");
    assert_running(&mut a2, &srv, "qemu-a2");

    // Stop QEMU B cleanly (SIGTERM): removed as well.
    b.signal(Signal::SIGTERM);
    b.wait(QEMU_WAIT).expect("qemu-b exits on SIGTERM");
    assert_eq!(next(&mut watcher, &srv), (2, false), "peer 2 removed");
    for name in ["qemu-a", "qemu-b", "qemu-a2"] {
        let log = qemu_log(&srv, name);
        assert!(!log.contains("ivshmem"), "{name} complained:\n{log}");
    }
    // Guards kill a2 and the server.
}
