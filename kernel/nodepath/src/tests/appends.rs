//! Appends from two nodes to one file: every line lands whole and exactly
//! once, and no node writes zeros (or older bytes) over another node's
//! lines.
//!
//! Strong mode: appends are atomic across nodes (as `O_APPEND` on one
//! host), even when they run at the same time. Relaxed, `private` and
//! `net` modes are close-to-open: an append closed before another node's
//! append opens the file is kept whole, and a write-back carries only the
//! bytes its node wrote, never a whole page over another node's lines.

use osapi::io::Fd;
use osapi::meta::{MetaCall, MetaDone, MetaStart};

use super::*;
use crate::tests::meta::finish;

fn append_flags() -> OpenFlags {
    OpenFlags {
        create: true,
        append: true,
        ..OpenFlags::default()
    }
}

/// Line `k` of node `node`: lengths vary, so a shorter line written over
/// a longer one leaves a visible tail.
fn line(node: u32, k: usize) -> Vec<u8> {
    let pad = "x".repeat((k * 7 + node as usize * 13) % 37);
    format!("node {node} line {k:03} {pad}\n").into_bytes()
}

/// How an append's descriptor is closed: in the call (its write-back
/// synchronous), or as a task's close, whose write-back is in flight
/// while the task yields (`private/inflight.rs`, `singlecopy/inflight.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Close {
    Call,
    Task,
}

fn close(n: &mut Node<HostEnv>, fd: Fd, how: Close) {
    match how {
        Close::Call => n.close(fd).unwrap(),
        Close::Task => match n.meta_start(MetaCall::Close { fd }) {
            MetaStart::Pending(t) => assert_eq!(finish(n, t), Ok(MetaDone::Ok)),
            MetaStart::Done(r) => assert_eq!(r, Ok(MetaDone::Ok)),
        },
    }
}

/// Write-backs started by tasks on node `k` (checks that a test of the
/// tasks' path did take it).
fn task_write_backs(rig: &Rig, k: u32) -> u64 {
    let v = stat_value(&rig.node(k), k::TASK_WRITE_BACKS);
    v.split('/').next().unwrap().parse().unwrap()
}

/// Every line of `want` is in `got` exactly once, nothing else is, and no
/// byte is zero.
fn assert_lines(got: &[u8], want: &[Vec<u8>], what: &str) {
    let zeros = got.iter().filter(|b| **b == 0).count();
    assert_eq!(zeros, 0, "{what}: {zeros} zero bytes in {got:?}");
    assert!(
        got.ends_with(b"\n"),
        "{what}: a cut line at the end: {:?}",
        String::from_utf8_lossy(got)
    );
    let mut lines: Vec<&[u8]> = got.split_inclusive(|b| *b == b'\n').collect();
    lines.sort_unstable();
    let mut want: Vec<&[u8]> = want.iter().map(|l| &l[..]).collect();
    want.sort_unstable();
    assert!(
        lines == want,
        "{what}: lines differ\n got: {:?}\nwant: {:?}",
        String::from_utf8_lossy(got),
        want.iter()
            .map(|l| String::from_utf8_lossy(l))
            .collect::<Vec<_>>()
    );
}

/// The file read by every node and, after every node's sync, from the
/// disk.
fn assert_everywhere(rig: &Rig, nodes: u32, path: &str, want: &[Vec<u8>]) {
    for k in 1..=nodes {
        let got = read_file(&mut rig.node(k), path);
        assert_lines(&got, want, &format!("node {k} reads"));
    }
    for k in 1..=nodes {
        rig.node(k).sync().unwrap();
    }
    assert_lines(&disk_bytes(rig, path), want, "the disk");
}

/// Two nodes take turns, each line in its own open-append-close.
fn appends_in_turn(mode: Mode) {
    let rig = Rig::new(RigConfig::new(3, mode));
    // A head that ends mid-page: the appends share its last page.
    let head = b"head\n".repeat(700);
    write_file(&mut rig.node(3), "/log", &head);
    let mut want = vec![b"head\n".to_vec(); 700];
    for k in 0..40 {
        for node in [1, 2] {
            let l = line(node, k);
            let mut n = rig.node(node);
            let fd = n.open("/log", append_flags()).unwrap();
            assert_eq!(n.write(fd, &l).unwrap(), l.len());
            n.close(fd).unwrap();
            want.push(l);
        }
    }
    assert_everywhere(&rig, 3, "/log", &want);
}

#[test]
fn strong_appends_in_turn_keep_every_line() {
    appends_in_turn(Mode::Strong);
}

#[test]
fn relaxed_appends_in_turn_keep_every_line() {
    appends_in_turn(Mode::Relaxed);
}

#[test]
fn private_appends_in_turn_keep_every_line() {
    appends_in_turn(Mode::Private);
}

#[test]
fn net_appends_in_turn_keep_every_line() {
    appends_in_turn(Mode::Net);
}

/// Strong mode, both descriptors open throughout: in the middle of every
/// append of node 1 (at its `step`-th wait step: after it learned the end
/// of file, before it published its new size, for the first steps),
/// node 2 tries a whole append of its own. It either lands (before or
/// after node 1's, whole) or fails (held off while node 1's runs, so it
/// wrote nothing) and is redone after node 1's. Every line lands whole,
/// exactly once.
fn strong_appends_interleaved(step: u32) {
    let mut cfg = RigConfig::new(2, Mode::Strong);
    // Node 2's append inside node 1's cannot wait for it to end (the rig
    // runs one node at a time): it gives up after this.
    cfg.rpc_timeout_ns = 20_000_000;
    let rig = Rig::new(cfg);
    write_file(&mut rig.node(1), "/log", b"head\n");
    let mut want = vec![b"head\n".to_vec()];
    let fd1 = rig.node(1).open("/log", append_flags()).unwrap();
    let fd2 = rig.node(2).open("/log", append_flags()).unwrap();
    let n2 = rig.node_rc(2);
    // The line node 2 is to append inside node 1's next append, and
    // whether it landed there.
    let next: Rc<Cell<Option<usize>>> = Rc::new(Cell::new(None));
    let landed = Rc::new(Cell::new(false));
    let steps = Rc::new(Cell::new(0u32));
    let (pending, seen, ok) = (next.clone(), steps.clone(), landed.clone());
    rig.set_hook(Some(Box::new(move |me| {
        if me != 1 {
            return;
        }
        seen.set(seen.get() + 1);
        if seen.get() < step {
            return;
        }
        if let Some(k) = pending.take() {
            let l = line(2, k);
            let r = n2.borrow_mut().write(fd2, &l);
            assert!(matches!(r, Ok(n) if n == l.len()) || r.is_err(), "{r:?}");
            ok.set(r.is_ok());
        }
    })));
    let mut inside = 0;
    for k in 0..30 {
        steps.set(0);
        landed.set(false);
        next.set(Some(k));
        let l = line(1, k);
        assert_eq!(rig.node(1).write(fd1, &l).unwrap(), l.len());
        want.push(l);
        let tried = next.take().is_none();
        if tried && landed.get() {
            inside += 1;
        } else {
            // Held off (or node 1's append waited fewer steps): node 2
            // appends after it.
            let l = line(2, k);
            assert_eq!(rig.node(2).write(fd2, &l).unwrap(), l.len());
        }
        want.push(line(2, k));
    }
    rig.set_hook(None);
    log::info!("{inside} of node 2's appends landed inside node 1's");
    rig.node(1).close(fd1).unwrap();
    rig.node(2).close(fd2).unwrap();
    assert_everywhere(&rig, 2, "/log", &want);
}

#[test]
fn strong_appends_interleaved_at_the_first_wait_keep_every_line() {
    strong_appends_interleaved(1);
}

#[test]
fn strong_appends_interleaved_at_the_second_wait_keep_every_line() {
    strong_appends_interleaved(2);
}

#[test]
fn strong_appends_interleaved_at_the_third_wait_keep_every_line() {
    strong_appends_interleaved(3);
}

/// Strong mode: node 1 stalls at its `step`-th wait step of an append
/// (under the append lock: a lost give-back, or a node paused that stays
/// a member) for longer than the lock's lease. Node 2's append meanwhile
/// gets the lapsed lock and lands. Node 1's append then either stops
/// (nothing stored past its budget, no size published: [`Errno::Busy`])
/// or had finished before it stalled; node 2's line is never written
/// over, and no byte is zero.
fn strong_append_outlived_by_its_lease(step: u32) {
    let mut cfg = RigConfig::new(2, Mode::Strong);
    // Node 1's calls outlast the stall (they are not what times out).
    cfg.rpc_timeout_ns = 60_000_000_000;
    let rig = Rig::new(cfg);
    let lease = dirsvc::server::Config::default().append_lease_ns;
    write_file(&mut rig.node(1), "/log", &b"head\n".repeat(700));
    let mut want = vec![b"head\n".to_vec(); 700];
    let fd1 = rig.node(1).open("/log", append_flags()).unwrap();
    let n2 = rig.node_rc(2);
    let sh = rig.sh.clone();
    let seen = Rc::new(Cell::new(0u32));
    let landed = Rc::new(Cell::new(false));
    let (count, ok) = (seen.clone(), landed.clone());
    rig.set_hook(Some(Box::new(move |me| {
        if me != 1 {
            return;
        }
        count.set(count.get() + 1);
        if count.get() != step {
            return;
        }
        // Stalled past the lease; both nodes stay members.
        sh.step(0, lease + 1_000_000_000);
        let mut n = n2.borrow_mut();
        let fd = n.open("/log", append_flags()).unwrap();
        let l = line(2, 0);
        assert_eq!(
            n.write(fd, &l),
            Ok(l.len()),
            "node 2 waits on a lapsed lock"
        );
        n.close(fd).unwrap();
        ok.set(true);
    })));
    let l = line(1, 0);
    let r = rig.node(1).write(fd1, &l);
    rig.set_hook(None);
    if !landed.get() {
        // Node 1's append took fewer wait steps: nothing to show here.
        assert_eq!(r, Ok(l.len()));
        return;
    }
    match r {
        Ok(n) => {
            assert_eq!(n, l.len());
            want.push(l);
        }
        Err(e) => assert_eq!(e, Errno::Busy, "step {step}"),
    }
    want.push(line(2, 0));
    rig.node(1).close(fd1).unwrap();
    assert_everywhere(&rig, 2, "/log", &want);
}

#[test]
fn strong_append_outlived_by_its_lease_never_overwrites_the_next_holder() {
    for step in 1..=8 {
        strong_append_outlived_by_its_lease(step);
    }
}

/// Strong mode: node 1 holds a file's append lock and never gives it back
/// (its give-back lost), staying alive: node 2's append is refused for
/// at most one lease, then lands.
#[test]
fn strong_append_lock_given_back_never_blocks_for_one_lease_at_most() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let lease = dirsvc::server::Config::default().append_lease_ns;
    write_file(&mut rig.node(1), "/log", b"head\n");
    let ino = rig.node(1).stat("/log").unwrap().ino;
    let take = fabric::proto::Request::AppendLock {
        ino,
        hold: true,
        renew: false,
    };
    assert!(rig.node(1).fs_call(&take).is_ok());
    let start = rig.sh.now();
    let l = line(2, 0);
    let mut tries = 0;
    loop {
        let mut n = rig.node(2);
        let fd = n.open("/log", append_flags()).unwrap();
        let r = n.write(fd, &l);
        n.close(fd).unwrap();
        match r {
            Ok(k) => {
                assert_eq!(k, l.len());
                break;
            }
            Err(e) => assert_eq!(e, Errno::Busy),
        }
        tries += 1;
        assert!(
            rig.sh.now() - start < 3 * lease,
            "node 2's append still waits after {tries} tries"
        );
        drop(n);
        rig.idle_node(2, 1_000_000_000);
    }
    assert!(
        rig.sh.now() - start >= lease,
        "taken before the lease lapsed"
    );
    assert_everywhere(&rig, 2, "/log", &[b"head\n".to_vec(), l]);
}

/// Relaxed, `private` and `net` modes: node 1 appends a line and keeps
/// it (unwritten, in its cache) while node 2 appends and closes lines of
/// its own (each node learns the other's end of file at its own open
/// and append); then node 1 closes. Node 2's lines, closed before node
/// 1's write-back, are neither zeroed nor overwritten with older bytes:
/// node 1's write-back carries only the bytes it wrote, whether its
/// close (and node 2's) writes back in the call or as a task's.
fn close_to_open_appends(mode: Mode, how: Close) {
    let rig = Rig::new(RigConfig::new(2, mode));
    write_file(&mut rig.node(1), "/log", b"head\n");
    let mut want = vec![b"head\n".to_vec()];
    for k in 0..12 {
        // Node 2 appends first and closes: node 1's open sees it.
        let l2 = line(2, k);
        {
            let mut n = rig.node(2);
            let fd = n.open("/log", append_flags()).unwrap();
            n.write(fd, &l2).unwrap();
            close(&mut n, fd, how);
        }
        want.push(l2);
        let l1 = line(1, k);
        let fd1 = rig.node(1).open("/log", append_flags()).unwrap();
        rig.node(1).write(fd1, &l1).unwrap();
        want.push(l1);
        close(&mut rig.node(1), fd1, how);
        // Node 2 now appends again while node 1 still caches the page
        // (its copy written back, its frame or cached page kept).
        let l3 = line(3, k);
        {
            let mut n = rig.node(2);
            let fd = n.open("/log", append_flags()).unwrap();
            n.write(fd, &l3).unwrap();
            close(&mut n, fd, how);
        }
        want.push(l3);
    }
    if how == Close::Task {
        assert!(task_write_backs(&rig, 1) > 0, "no task's write-back");
    }
    assert_everywhere(&rig, 2, "/log", &want);
}

#[test]
fn relaxed_close_to_open_appends_keep_every_line() {
    close_to_open_appends(Mode::Relaxed, Close::Call);
}

#[test]
fn private_close_to_open_appends_keep_every_line() {
    close_to_open_appends(Mode::Private, Close::Call);
}

#[test]
fn net_close_to_open_appends_keep_every_line() {
    close_to_open_appends(Mode::Net, Close::Call);
}

#[test]
fn relaxed_close_to_open_appends_closed_by_tasks_keep_every_line() {
    close_to_open_appends(Mode::Relaxed, Close::Task);
}

#[test]
fn private_close_to_open_appends_closed_by_tasks_keep_every_line() {
    close_to_open_appends(Mode::Private, Close::Task);
}

#[test]
fn net_close_to_open_appends_closed_by_tasks_keep_every_line() {
    close_to_open_appends(Mode::Net, Close::Task);
}

/// Relaxed, `private` and `net` modes, appends in flight at once: node 1
/// keeps its descriptor open across two appends while node 2 appends and
/// closes lines of its own in between. Close-to-open lets node 1's first
/// line and node 2's land at the same offset (a line may be lost, as with
/// NFS), but a write-back never carries bytes its node did not write:
/// nothing reads as zeros, and node 2's lines after node 1's first one
/// survive. The closes write back in the call or as tasks' (`how`).
/// Node 2 writes and reads the head: in relaxed mode it then holds the
/// page's frame, so node 1's appends go into a private copy of it
/// (written back through the file server) while node 2's go into the
/// frame.
fn overlapping_appends_write_no_zeros(mode: Mode, how: Close) {
    let rig = Rig::new(RigConfig::new(2, mode));
    write_file(&mut rig.node(2), "/log", b"head\n");
    read_file(&mut rig.node(2), "/log");
    for k in 0..8 {
        let fd1 = rig.node(1).open("/log", append_flags()).unwrap();
        rig.node(1).write(fd1, &line(1, k)).unwrap();
        for j in 0..3 {
            let mut n = rig.node(2);
            let fd = n.open("/log", append_flags()).unwrap();
            n.write(fd, &line(2, k * 3 + j)).unwrap();
            close(&mut n, fd, how);
        }
        rig.node(1).write(fd1, &line(3, k)).unwrap();
        close(&mut rig.node(1), fd1, how);
    }
    if how == Close::Task {
        assert!(task_write_backs(&rig, 1) > 0, "no task's write-back");
    }
    let check = |got: &[u8], what: &str| {
        let zeros = got.iter().filter(|b| **b == 0).count();
        assert_eq!(zeros, 0, "{what}: {zeros} zero bytes: {got:?}");
        assert!(
            got.starts_with(b"head\n"),
            "{what}: the head survives: {got:?}"
        );
        // Node 1's second line of each round, written after node 2's
        // lines were in the file, is there.
        let text = String::from_utf8_lossy(got);
        for k in 0..8 {
            let l = String::from_utf8(line(3, k)).unwrap();
            assert!(text.contains(&l), "{what}: {l:?} missing: {text:?}");
        }
    };
    for k in 1..=2 {
        check(&read_file(&mut rig.node(k), "/log"), &format!("node {k}"));
    }
    rig.node(1).sync().unwrap();
    rig.node(2).sync().unwrap();
    check(&disk_bytes(&rig, "/log"), "the disk");
}

#[test]
fn relaxed_overlapping_appends_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Relaxed, Close::Call);
}

#[test]
fn relaxed_overlapping_appends_closed_by_tasks_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Relaxed, Close::Task);
}

#[test]
fn private_overlapping_appends_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Private, Close::Call);
}

#[test]
fn private_overlapping_appends_closed_by_tasks_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Private, Close::Task);
}

#[test]
fn net_overlapping_appends_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Net, Close::Call);
}

#[test]
fn net_overlapping_appends_closed_by_tasks_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Net, Close::Task);
}

/// How node 1's dirty page of the log is evicted in
/// [`reclaimed_appends_write_no_zeros`]: by a write's own room-making
/// (`make_room`, a synchronous write-back) or by a task's write waiting
/// for room made in flight (`private/room.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reclaim {
    Call,
    Task,
}

/// `private` and `net` modes, a cache of 4 pages: node 1 appends a line,
/// node 2 appends and closes lines of its own, node 1 appends again into
/// the page it still caches (which holds zeros where node 2's lines are);
/// then node 1 writes 4 whole pages of another file, so the log's page,
/// its oldest dirty one, is written back by reclaim before its close.
/// Relaxed mode alike, node 1's appends in a private copy of node 2's
/// frame, evicted at the bound of private copies by as many whole pages.
/// That write-back carries only node 1's bytes: no zeros, and node 1's
/// second line of each round is there (its first may land on node 2's
/// lines, as in [`overlapping_appends_write_no_zeros`]).
fn reclaimed_appends_write_no_zeros(mode: Mode, how: Reclaim) {
    let mut cfg = RigConfig::new(2, mode);
    cfg.cache_pages = 4;
    let rig = Rig::new(cfg);
    write_file(&mut rig.node(2), "/log", b"head\n");
    let relaxed = mode == Mode::Relaxed;
    if relaxed {
        read_file(&mut rig.node(2), "/log"); // node 2 holds the frame
    }
    let pages = match relaxed {
        true => crate::singlecopy::path::MAX_PRIVATE_PAGES,
        false => 4,
    };
    let fill = pattern(pages * 4096, 9);
    for k in 0..4 {
        let fd1 = rig.node(1).open("/log", append_flags()).unwrap();
        rig.node(1).write(fd1, &line(1, k)).unwrap();
        for j in 0..3 {
            let mut n = rig.node(2);
            let fd = n.open("/log", append_flags()).unwrap();
            n.write(fd, &line(2, k * 3 + j)).unwrap();
            n.close(fd).unwrap();
        }
        rig.node(1).write(fd1, &line(3, k)).unwrap();
        let mut n = rig.node(1);
        let ff = n.open(&format!("/fill{k}"), create()).unwrap();
        if how == Reclaim::Task {
            let w = osapi::io::IoSpan {
                fd: ff,
                offset: 0,
                len: fill.len(),
                write: true,
            };
            let t = n.io_start(&[w]).unwrap()[0].expect("no wait for room");
            let mut r = None;
            for _ in 0..100_000 {
                n.io_progress();
                r = n.io_poll(t);
                if r.is_some() {
                    break;
                }
                n.io_wait();
            }
            assert_eq!(r, Some(Ok(())), "room made");
        }
        assert_eq!(n.write(ff, &fill), Ok(fill.len()));
        // The log's page, the oldest dirty one, was written back to make
        // room (and dropped: a page written in part is not kept).
        let ino = n.stat("/log").unwrap().ino;
        if relaxed {
            let copy = slot(&mut n, PageKey { ino, idx: 0 });
            assert!(
                !matches!(copy, Some(Slot::Private(_))),
                "round {k}: {copy:?}"
            );
        } else {
            assert!(
                !n.vfs.data_path_ref().holds(ino, 0),
                "round {k}: not reclaimed"
            );
        }
        n.close(fd1).unwrap();
        n.close(ff).unwrap();
        // Room on the rig's small disk for the next round's.
        n.unlink(&format!("/fill{k}")).unwrap();
    }
    if how == Reclaim::Task {
        let waits = stat_value(&rig.node(1), k::TASK_ROOM_WAITS);
        assert_ne!(waits, "0", "no task waited for room");
    }
    let check = |got: &[u8], what: &str| {
        let zeros = got.iter().filter(|b| **b == 0).count();
        assert_eq!(zeros, 0, "{what}: {zeros} zero bytes: {got:?}");
        assert!(got.starts_with(b"head\n"), "{what}: {got:?}");
        let text = String::from_utf8_lossy(got);
        for k in 0..4 {
            let l = String::from_utf8(line(3, k)).unwrap();
            assert!(text.contains(&l), "{what}: {l:?} missing: {text:?}");
        }
    };
    for n in 1..=2 {
        check(&read_file(&mut rig.node(n), "/log"), &format!("node {n}"));
    }
    rig.node(1).sync().unwrap();
    rig.node(2).sync().unwrap();
    check(&disk_bytes(&rig, "/log"), "the disk");
}

#[test]
fn relaxed_appends_written_back_by_reclaim_write_no_zeros() {
    reclaimed_appends_write_no_zeros(Mode::Relaxed, Reclaim::Call);
}

#[test]
fn private_appends_written_back_by_reclaim_write_no_zeros() {
    reclaimed_appends_write_no_zeros(Mode::Private, Reclaim::Call);
}

#[test]
fn net_appends_written_back_by_reclaim_write_no_zeros() {
    reclaimed_appends_write_no_zeros(Mode::Net, Reclaim::Call);
}

#[test]
fn private_appends_written_back_by_a_tasks_reclaim_write_no_zeros() {
    reclaimed_appends_write_no_zeros(Mode::Private, Reclaim::Task);
}

#[test]
fn net_appends_written_back_by_a_tasks_reclaim_write_no_zeros() {
    reclaimed_appends_write_no_zeros(Mode::Net, Reclaim::Task);
}
