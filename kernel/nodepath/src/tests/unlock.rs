//! An UNLOCK that fails leaves no page waited on for good: the session
//! breaks (calls fail as "unavailable") and the next membership check
//! rejoins, forgetting the reserved slots.

use super::*;

#[test]
fn a_failed_unlock_breaks_the_session_instead_of_wedging_the_page() {
    let mut cfg = RigConfig::new(1, Mode::Strong);
    cfg.rpc_timeout_ns = 50_000_000;
    let rig = Rig::new(cfg);
    // A file of two pages, cached nowhere: the overwrite below asks for
    // page 0 exclusively (LOOKUP_LOCK, E), writes it, then UNLOCKs.
    write_file(&mut rig.node(1), "/u", &pattern(2 * 4096, 6));
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    let fd = rig.node(1).open("/u", OpenFlags::default()).unwrap();
    // The directory hangs right after the pass that grants the page E:
    // the node writes it, and its UNLOCK is never answered.
    let sh = rig.sh.clone();
    let armed = Rc::new(Cell::new(true));
    let arm = armed.clone();
    rig.set_hook(Some(Box::new(move |_| {
        if arm.replace(false) {
            sh.set_dir_up(false);
        }
    })));
    let w = rig.node(1).write(fd, &pattern(4096, 7));
    rig.set_hook(None);
    assert!(!armed.get(), "the hook ran");
    assert!(w.is_err(), "the write's UNLOCK timed out: {w:?}");
    rig.set_dir_up(true);
    // A read of the page ends (an error while the session is broken, the
    // bytes or zeros after the rejoin), and the node is usable again.
    let mut buf = vec![0u8; 4096];
    let mut n = rig.node(1);
    n.seek(fd, 0).unwrap();
    let r = n.read(fd, &mut buf);
    assert!(
        matches!(r, Err(_) | Ok(4096)),
        "the read ends, with an error or the page: {r:?}"
    );
    drop(n);
    rig.idle_node(1, 500_000_000);
    write_file(&mut rig.node(1), "/v", b"after");
    assert_eq!(read_file(&mut rig.node(1), "/v"), b"after");
}
