//! Focused regression tests of three defects of the node data path,
//! each over the host rig with the real directory.

use std::cell::RefCell;
use std::rc::Rc;

use fabric::config::Mode;
use fabric::proto::{Errno, PageKey};
use osapi::io::OpenFlags;

use crate::node::Node;
use crate::rig::{HostEnv, Rig, RigConfig};

fn trunc() -> OpenFlags {
    OpenFlags {
        create: true,
        truncate: true,
        ..OpenFlags::default()
    }
}

/// The shell's `write`: truncate, write, close.
pub(super) fn whole_write(n: &mut Node<HostEnv>, path: &str, data: &[u8]) -> Result<(), Errno> {
    let fd = n.open(path, trunc())?;
    let r = n.write(fd, data);
    n.close(fd)?;
    r.map(|_| ())
}

/// One read call with a buffer larger than the file: (size seen, bytes).
pub(super) fn whole_read(n: &mut Node<HostEnv>, path: &str, max: usize) -> Result<Vec<u8>, Errno> {
    let fd = n.open(path, OpenFlags::default())?;
    let mut buf = vec![0u8; max];
    let r = n.read(fd, &mut buf);
    n.close(fd)?;
    buf.truncate(r?);
    Ok(buf)
}

/// Defect 1: node 1 and node 2 rewrite `/c` (truncate + write) while node
/// 3 reads it from inside their wait steps: node 3 must never see a size
/// with bytes nobody wrote (the new size over evicted, zero pages).
#[test]
fn strong_readers_never_see_a_grown_file_of_zeros() {
    let rig = Rig::new(RigConfig::new(3, Mode::Strong));
    let a = vec![b'a'; 4087];
    let b = vec![b'b'; 4087];
    whole_write(&mut rig.node(1), "/c", &a).unwrap();
    let seen: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let (n3, log) = (rig.node_rc(3), seen.clone());
    rig.set_hook(Some(Box::new(move |me| {
        if me == 3 {
            return;
        }
        if let Ok(mut n) = n3.try_borrow_mut() {
            if let Ok(got) = whole_read(&mut n, "/c", 8192) {
                log.borrow_mut().push(got);
            }
        }
    })));
    for round in 0..20 {
        whole_write(&mut rig.node(1), "/c", &a).unwrap();
        whole_write(&mut rig.node(2), "/c", &b).unwrap();
        let _ = round;
    }
    rig.set_hook(None);
    let seen = seen.borrow();
    assert!(
        seen.len() > 20,
        "the reader ran inside the writes ({})",
        seen.len()
    );
    for got in seen.iter() {
        assert!(
            got.is_empty() || *got == a || *got == b,
            "node 3 read {} bytes, {} of them zero",
            got.len(),
            got.iter().filter(|&&x| x == 0).count()
        );
    }
}

/// Defect 2: a notify ring that stays corrupt ends the servicing pass
/// (no endless loop while the node holds its lock), and the node rejoins
/// with fresh rings before its next call.
#[test]
fn a_corrupt_notify_ring_breaks_the_session_not_the_node() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rig = Rig::new(RigConfig::new(2, Mode::Strong));
        whole_write(&mut rig.node(1), "/f", b"hello").unwrap();
        rig.corrupt_notify_ring(2, 0xdead_beef);
        rig.node(2).service();
        rig.node(2).service();
        // Calls fail until the membership check rejoins (fresh rings).
        let before = whole_read(&mut rig.node(2), "/f", 100);
        rig.node(2).check();
        let after = whole_read(&mut rig.node(2), "/f", 100);
        tx.send((before, after)).unwrap();
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("servicing a corrupt notify ring returned");
    assert_eq!(got.0, Err(Errno::Unavailable));
    assert_eq!(got.1.unwrap(), b"hello");
}

/// Frames of node `k` that are neither free nor resident: misses still in
/// flight.
fn in_flight(rig: &Rig, k: u32, keys: &[PageKey]) -> usize {
    let mut n = rig.node(k);
    let st = n.vfs.data_path().single_copy().unwrap();
    let c = &st.coherence().unwrap().cache;
    keys.iter().filter(|k| c.in_flight(k)).count()
}

/// Defect 3a: an I/O error on one page of a batch completes every other
/// page of it (nothing stays in flight), and reading again works.
#[test]
fn an_error_answer_in_a_batch_completes_the_other_pages() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    let data: Vec<u8> = (0..8 * 4096).map(|i| (i / 4096) as u8 + 1).collect();
    whole_write(&mut rig.node(1), "/f", &data).unwrap();
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    let ino = rig.node(1).stat("/f").unwrap().ino;
    rig.node(1).cache_drop().unwrap();
    // The second disk read of node 2's batch of 8 fills fails.
    rig.sh.fail_read_in.set(Some(1));
    let r = whole_read(&mut rig.node(2), "/f", 1 << 16);
    assert_eq!(r, Err(Errno::Io));
    let keys: Vec<PageKey> = (0..8).map(|idx| PageKey { ino, idx }).collect();
    assert_eq!(
        in_flight(&rig, 2, &keys),
        0,
        "no page of the batch is stranded"
    );
    assert_eq!(whole_read(&mut rig.node(2), "/f", 1 << 16).unwrap(), data);
}

/// Defect 3b: a batch that times out (the directory hangs longer than the
/// RPC timeout) cancels all its pages; their frames are set aside while
/// the directory may still fill them, and once it is back the same pages
/// read fine (not "no space") and no frame is lost.
#[test]
fn a_timed_out_batch_cancels_its_pages() {
    let mut cfg = RigConfig::new(2, Mode::Strong);
    cfg.rpc_timeout_ns = 50_000_000;
    let rig = Rig::new(cfg);
    let data: Vec<u8> = (0..4 * 4096).map(|i| (i % 253) as u8).collect();
    whole_write(&mut rig.node(1), "/f", &data).unwrap();
    let fd = rig.node(1).open("/f", OpenFlags::default()).unwrap();
    rig.node(1).fsync(fd).unwrap();
    rig.node(1).close(fd).unwrap();
    rig.node(1).cache_drop().unwrap();
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let frames = |rig: &Rig| {
        let mut n = rig.node(2);
        let st = n.vfs.data_path().single_copy().unwrap();
        let c = &st.coherence().unwrap().cache;
        (c.free_frames(), c.counts().0, c.pool_frames())
    };
    let fd = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    rig.set_dir_up(false);
    let mut buf = vec![0u8; data.len()];
    assert_eq!(rig.node(2).read(fd, &mut buf), Err(Errno::Unavailable));
    let keys: Vec<PageKey> = (0..4).map(|idx| PageKey { ino, idx }).collect();
    assert_eq!(
        in_flight(&rig, 2, &keys),
        0,
        "the timed-out batch was cancelled"
    );
    rig.set_dir_up(true);
    rig.node(2).close(fd).unwrap();
    assert_eq!(whole_read(&mut rig.node(2), "/f", 1 << 16).unwrap(), data);
    let (free, owned, pool) = frames(&rig);
    assert_eq!((owned, free + owned), (4, pool), "no frame lost");
}

/// A refused synchronous request reaches the caller as the server's
/// error in every mode: opening a missing file is `NotFound` (the
/// simulation reads a file never written, or lost in a directory crash,
/// as empty), and removing one too. The rig's `net` transport once
/// handed the refusal on as an answer, which the node took for a
/// malformed one: an I/O error, seen at the end of `net` runs.
#[test]
fn a_refused_call_is_its_error_in_every_mode() {
    for mode in [Mode::Strong, Mode::Relaxed, Mode::Private, Mode::Net] {
        let rig = Rig::new(RigConfig::new(1, mode));
        let mut n = rig.node(1);
        assert_eq!(
            whole_read(&mut n, "/missing", 4096),
            Err(Errno::NotFound),
            "{mode:?}"
        );
        assert_eq!(n.unlink("/missing"), Err(Errno::NotFound), "{mode:?}");
        whole_write(&mut n, "/here", b"x").unwrap();
        assert_eq!(whole_read(&mut n, "/here", 4096), Ok(b"x".to_vec()));
    }
}
