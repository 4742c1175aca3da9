//! A write-back whose answer never came (the directory hung past the
//! call timeout) is in doubt: it may have landed when the directory came
//! back. Its bytes must not be sent again over what another node wrote
//! after it. (Relaxed mode's private copies go when the directory falls
//! silent: nothing of them is left to send.)

use super::*;
use crate::rig::HALT_STEP_NS;

/// Run the rig for `ns` of fake time (directory passes while it is up).
fn run_for(rig: &Rig, ns: u64) {
    for _ in 0..ns.div_ceil(HALT_STEP_NS) {
        rig.sh.step(0, HALT_STEP_NS);
    }
}

/// Node 1 writes `a` over the head of `/f` and closes while the
/// directory hangs: the close gets no answer. The directory comes back.
fn an_unanswered_close(rig: &Rig, a: &[u8]) {
    let mut n = rig.node(1);
    let fd = n.open("/f", OpenFlags::default()).unwrap();
    assert_eq!(n.write(fd, a), Ok(a.len()));
    rig.set_dir_up(false);
    let c = n.close(fd);
    assert_eq!(c, Err(Errno::Unavailable), "the close got no answer");
    drop(n);
    rig.set_dir_up(true);
    run_for(rig, 10 * HALT_STEP_NS);
    // Node 1's next call: the directory serves what waited of its
    // (`net`: the rig's directory reads a connection when its node waits;
    // the kernel's reads every connection in its loop).
    let _ = rig.node(1).stat("/f");
}

/// The landed case: the directory served the close's write-back when it
/// came back. Node 2 then overwrites the same bytes and closes; node 1's
/// next write-back (its membership check, a sync) must not put its
/// in-doubt bytes back over node 2's.
fn a_landed_write_back_is_not_sent_again_over_a_later_write(mode: Mode) {
    let rig = Rig::new(RigConfig::new(2, mode));
    write_file(&mut rig.node(2), "/f", &pattern(8192, 1));
    read_file(&mut rig.node(1), "/f");
    an_unanswered_close(&rig, b"AAAA");
    let b = b"BBBB";
    write_at(&mut rig.node(2), "/f", 0, b);
    {
        let mut n = rig.node(1);
        n.check();
        let _ = n.sync();
        n.check();
    }
    run_for(&rig, 10 * HALT_STEP_NS);
    let got = read_file(&mut rig.node(2), "/f");
    assert_eq!(&got[..4], b, "{mode:?}: node 2's later write survives");
    let got = read_file(&mut rig.node(1), "/f");
    assert_eq!(&got[..4], b, "{mode:?}: node 1 reads node 2's write");
}

#[test]
fn private_a_landed_write_back_is_not_sent_again_over_a_later_write() {
    a_landed_write_back_is_not_sent_again_over_a_later_write(Mode::Private);
}

#[test]
fn net_a_landed_write_back_is_not_sent_again_over_a_later_write() {
    a_landed_write_back_is_not_sent_again_over_a_later_write(Mode::Net);
}
