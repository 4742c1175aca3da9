//! Appends from two nodes to one file: every line lands whole and exactly
//! once, and no node writes zeros (or older bytes) over another node's
//! lines.
//!
//! Strong mode: appends are atomic across nodes (as `O_APPEND` on one
//! host), even when they run at the same time. Relaxed, `private` and
//! `net` modes are close-to-open: an append closed before another node's
//! append opens the file is kept whole, and a write-back carries only the
//! bytes its node wrote, never a whole page over another node's lines.

use super::*;

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
/// node 1's write-back carries only the bytes it wrote.
fn close_to_open_appends(mode: Mode) {
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
            n.close(fd).unwrap();
        }
        want.push(l2);
        let l1 = line(1, k);
        let fd1 = rig.node(1).open("/log", append_flags()).unwrap();
        rig.node(1).write(fd1, &l1).unwrap();
        want.push(l1);
        rig.node(1).close(fd1).unwrap();
        // Node 2 now appends again while node 1 still caches the page
        // (its copy written back, its frame or cached page kept).
        let l3 = line(3, k);
        {
            let mut n = rig.node(2);
            let fd = n.open("/log", append_flags()).unwrap();
            n.write(fd, &l3).unwrap();
            n.close(fd).unwrap();
        }
        want.push(l3);
    }
    assert_everywhere(&rig, 2, "/log", &want);
}

#[test]
fn relaxed_close_to_open_appends_keep_every_line() {
    close_to_open_appends(Mode::Relaxed);
}

#[test]
fn private_close_to_open_appends_keep_every_line() {
    close_to_open_appends(Mode::Private);
}

#[test]
fn net_close_to_open_appends_keep_every_line() {
    close_to_open_appends(Mode::Net);
}

/// Relaxed, `private` and `net` modes, appends in flight at once: node 1
/// keeps its descriptor open across two appends while node 2 appends and
/// closes lines of its own in between. Close-to-open lets node 1's first
/// line and node 2's land at the same offset (a line may be lost, as with
/// NFS), but a write-back never carries bytes its node did not write:
/// nothing reads as zeros, and node 2's lines after node 1's first one
/// survive.
fn overlapping_appends_write_no_zeros(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    write_file(&mut rig.node(1), "/log", b"head\n");
    for k in 0..8 {
        let fd1 = rig.node(1).open("/log", append_flags()).unwrap();
        rig.node(1).write(fd1, &line(1, k)).unwrap();
        for j in 0..3 {
            let mut n = rig.node(2);
            let fd = n.open("/log", append_flags()).unwrap();
            n.write(fd, &line(2, k * 3 + j)).unwrap();
            n.close(fd).unwrap();
        }
        rig.node(1).write(fd1, &line(3, k)).unwrap();
        rig.node(1).close(fd1).unwrap();
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
    overlapping_appends_write_no_zeros(Mode::Relaxed);
}

#[test]
fn private_overlapping_appends_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Private);
}

#[test]
fn net_overlapping_appends_write_no_zeros() {
    overlapping_appends_write_no_zeros(Mode::Net);
}
