//! Which nodes a pass reports as having got answers or notices.

use super::*;

#[test]
fn a_pass_reports_which_nodes_got_responses_and_notices() {
    use fabric::proto::{PageKey, PageReq};
    let rig = Rig::new(3, true);
    let mut a = rig.join(1);
    let mut b = rig.join(2);
    let _c = rig.join(3);
    let quiet = rig.step();
    assert_eq!((quiet.responded, quiet.noticed), (0, 0), "nothing yet");
    // A request of node 2 answered in the pass: node 2 only, once.
    b.send(&*rig.mem, &Request::Nop, &mut || true).unwrap();
    let p = rig.step();
    assert_eq!((p.responded, p.noticed), (0b10, 0));
    assert_eq!(p.deliveries().collect::<Vec<_>>(), [(2, false)]);
    assert_eq!(rig.step().responded, 0, "reported once");
    // Node 1 reads a page, node 2 shares it, node 1 invalidates: node 2
    // gets the DIR_INV notice (and no response), node 1 its answer only
    // after node 2's ack.
    let Response::Attr(f) = rig.path(&mut a, Op::Create, "/g").unwrap() else {
        panic!()
    };
    let key = PageKey { ino: f.ino, idx: 0 };
    let (a0, _) = rig.layout.pool_gfns(1);
    let (b0, _) = rig.layout.pool_gfns(2);
    rig.call(&mut a, &Request::Page(PageReq::Read { key, frame: a0 }))
        .unwrap();
    rig.call(&mut b, &Request::Page(PageReq::Read { key, frame: b0 }))
        .unwrap();
    rig.step();
    let inv = Request::Page(PageReq::Inv { key, dirty: false });
    a.send(&*rig.mem, &inv, &mut || true).unwrap();
    let p = rig.step();
    assert_eq!((p.responded, p.noticed), (0, 0b10));
    assert_eq!(p.deliveries().collect::<Vec<_>>(), [(2, true)]);
    let mut nb = nodepath::client::Notifier::new(&rig.layout, 2);
    assert_eq!(nb.poll(&*rig.mem), Ok(Some(Notice::DirInv(key))));
    nb.ack(&*rig.mem, key, false, &mut || true).unwrap();
    let p = rig.step();
    assert_eq!((p.responded, p.noticed), (0b01, 0));
}

#[test]
fn deliveries_list_every_node_set_in_either_mask_once_in_order() {
    let p = Poll {
        responded: 1 | 1 << 5 | 1 << 63,
        noticed: 1 << 5 | 1 << 9,
        ..Poll::default()
    };
    assert_eq!(
        p.deliveries().collect::<Vec<_>>(),
        [(1, false), (6, true), (10, true), (64, false)]
    );
    assert_eq!(Poll::default().deliveries().count(), 0);
}
