//! Tasks' metadata calls in two halves over a real directory on the
//! host ([`crate::rig`]): several in flight together, answers picked up
//! by a data batch waiting for its own, multi-step calls, give-ups.

use fabric::config::Mode;
use fabric::proto::Errno;
use osapi::io::OpenFlags;
use osapi::meta::{MetaCall, MetaDone, MetaStart, MetaTicket};

use crate::node::Node;
use crate::rig::{HostEnv, Rig, RigConfig};
use crate::tests::{create, pattern, read_file, write_file};

/// Start `call`, which must go in flight.
pub(crate) fn pending(n: &mut Node<HostEnv>, call: MetaCall) -> MetaTicket {
    match n.meta_start(call) {
        MetaStart::Pending(t) => t,
        MetaStart::Done(r) => panic!("finished at once: {r:?}"),
    }
}

/// Poll `t`, waiting between polls, until it finishes.
pub(crate) fn finish(n: &mut Node<HostEnv>, t: MetaTicket) -> Result<MetaDone, Errno> {
    for _ in 0..100_000 {
        if let Some(r) = n.meta_poll(t) {
            return r;
        }
        n.meta_wait();
    }
    panic!("call {t:?} never finished");
}

fn stat_call(p: &str) -> MetaCall {
    MetaCall::Stat { path: p.into() }
}

#[test]
fn several_calls_are_in_flight_together() {
    for mode in [Mode::Strong, Mode::Private, Mode::Net] {
        let rig = Rig::new(RigConfig::new(1, mode));
        let mut n = rig.node(1);
        for (k, p) in ["/a", "/b", "/c"].iter().enumerate() {
            write_file(&mut n, p, &pattern(1000 * (k + 1), k as u8));
        }
        let ts: Vec<MetaTicket> = ["/a", "/b", "/c"]
            .iter()
            .map(|p| pending(&mut n, stat_call(p)))
            .collect();
        let mk = pending(&mut n, MetaCall::Mkdir { path: "/d".into() });
        let op = pending(
            &mut n,
            MetaCall::Open {
                path: "/e".into(),
                flags: create(),
            },
        );
        // Nothing is served until the node waits: all five are out.
        assert_eq!(n.link.calls_in_flight(), 5, "{mode:?}");
        for t in &ts {
            assert_eq!(n.meta_poll(*t), None);
        }
        n.meta_wait();
        let sizes: Vec<u64> = ts
            .iter()
            .map(|t| finish(&mut n, *t).unwrap().attr().unwrap().size)
            .collect();
        assert_eq!(sizes, [1000, 2000, 3000], "{mode:?}");
        assert_eq!(finish(&mut n, mk), Ok(MetaDone::Ok));
        let fd = finish(&mut n, op).unwrap().fd().unwrap();
        assert_eq!(n.write(fd, b"hello").unwrap(), 5);
        n.close(fd).unwrap();
        assert_eq!(read_file(&mut n, "/e"), b"hello");
        assert_eq!(n.stat("/d").unwrap().kind, fabric::proto::FileKind::Dir);
        assert_eq!(n.meta_counts(), (5, 5));
        assert_eq!(n.link.calls_in_flight(), 0);
    }
}

#[test]
fn a_data_batch_picks_up_a_calls_answer_on_the_way() {
    for mode in [Mode::Strong, Mode::Private, Mode::Net] {
        let rig = Rig::new(RigConfig::new(2, mode));
        let data = pattern(5 * 4096, 3);
        write_file(&mut rig.node(1), "/f", &data);
        write_file(&mut rig.node(1), "/g", b"x");
        let mut n2 = rig.node(2);
        let t = pending(&mut n2, stat_call("/g"));
        // A read that misses: its wait runs the directory, which answers
        // the stat too; the read stores that answer for the call.
        assert_eq!(read_file(&mut n2, "/f"), data, "{mode:?}");
        let r = n2.meta_poll(t).expect("answered during the read");
        assert_eq!(r.unwrap().attr().unwrap().size, 1);
    }
}

#[test]
fn open_with_truncate_and_unlink_take_two_steps() {
    let rig = Rig::new(RigConfig::new(2, Mode::Strong));
    write_file(&mut rig.node(1), "/t", &pattern(9000, 1));
    let mut n = rig.node(2);
    let t = pending(
        &mut n,
        MetaCall::Open {
            path: "/t".into(),
            flags: create(),
        },
    );
    let fd = finish(&mut n, t).unwrap().fd().unwrap();
    assert_eq!(n.fd_info(fd).unwrap().1, 0, "truncated");
    n.close(fd).unwrap();
    let t = pending(&mut n, MetaCall::Unlink { path: "/t".into() });
    assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok));
    assert_eq!(n.stat("/t"), Err(Errno::NotFound));
    let t = pending(&mut n, MetaCall::Unlink { path: "/t".into() });
    assert_eq!(finish(&mut n, t), Err(Errno::NotFound));
    let t = pending(
        &mut n,
        MetaCall::Open {
            path: "/t".into(),
            flags: OpenFlags::default(),
        },
    );
    assert_eq!(finish(&mut n, t), Err(Errno::NotFound));
}

#[test]
fn fsync_writes_back_then_its_flush_is_in_flight() {
    for mode in [Mode::Strong, Mode::Private, Mode::Net] {
        let rig = Rig::new(RigConfig::new(2, mode));
        let data = pattern(3 * 4096, 9);
        let mut n1 = rig.node(1);
        let fd = n1.open("/s", create()).unwrap();
        n1.write(fd, &data).unwrap();
        let t = pending(&mut n1, MetaCall::Fsync { fd });
        assert_eq!(finish(&mut n1, t), Ok(MetaDone::Ok), "{mode:?}");
        n1.close(fd).unwrap();
        drop(n1);
        // The written-back data is what another node reads.
        assert_eq!(read_file(&mut rig.node(2), "/s"), data, "{mode:?}");
    }
}

#[test]
fn a_call_without_an_answer_is_given_up() {
    let rig = Rig::new(RigConfig::new(1, Mode::Strong));
    write_file(&mut rig.node(1), "/a", b"abc");
    rig.set_dir_up(false);
    let mut n = rig.node(1);
    let t = pending(&mut n, stat_call("/a"));
    assert_eq!(finish(&mut n, t), Err(Errno::Unavailable));
    assert_eq!(n.meta_poll(t), Some(Err(Errno::Invalid)), "forgotten");
}

#[test]
fn close_finishes_at_once() {
    let rig = Rig::new(RigConfig::new(1, Mode::Strong));
    let mut n = rig.node(1);
    write_file(&mut n, "/a", b"abc");
    let fd = n.open("/a", OpenFlags::default()).unwrap();
    assert!(matches!(
        n.meta_start(MetaCall::Close { fd }),
        MetaStart::Done(Ok(_))
    ));
}

/// A readdir is a call in flight (its lookup, then its `Readdir`s, 682
/// entries each in slot 3); a second one waits for the first to finish
/// (slot 3 is one readdir's), and both list what a synchronous readdir
/// lists.
#[test]
fn readdirs_are_in_flight_one_slot_at_a_time() {
    for mode in [Mode::Strong, Mode::Private, Mode::Net] {
        let rig = Rig::new(RigConfig {
            inodes: 1024,
            ..RigConfig::new(1, mode)
        });
        let mut n = rig.node(1);
        n.mkdir("/big").unwrap();
        for k in 0..700 {
            let fd = n.open(&alloc::format!("/big/f{k:04}"), create()).unwrap();
            n.close(fd).unwrap();
        }
        n.mkdir("/small").unwrap();
        write_file(&mut n, "/small/x", b"x");
        let want_big = n.readdir("/big").unwrap();
        let want_small = n.readdir("/small").unwrap();
        assert_eq!(want_big.len(), 700, "{mode:?}");
        let big = pending(
            &mut n,
            MetaCall::Readdir {
                path: "/big".into(),
            },
        );
        let st = pending(&mut n, stat_call("/small/x"));
        assert_eq!(
            n.link.calls_in_flight(),
            2,
            "the readdir's lookup and the stat"
        );
        // The second readdir first runs the first to its end (two
        // Readdirs: 700 entries), then goes out itself.
        let small = pending(
            &mut n,
            MetaCall::Readdir {
                path: "/small".into(),
            },
        );
        let got_small = finish(&mut n, small).unwrap().entries().unwrap();
        let got_big = finish(&mut n, big).unwrap().entries().unwrap();
        assert_eq!(got_big, want_big, "{mode:?}");
        assert_eq!(got_small, want_small, "{mode:?}");
        assert_eq!(finish(&mut n, st).unwrap().attr().unwrap().size, 1);
        // Errors: not a directory, not there.
        let t = pending(
            &mut n,
            MetaCall::Readdir {
                path: "/small/x".into(),
            },
        );
        assert_eq!(finish(&mut n, t), Err(Errno::NotDir));
        let t = pending(
            &mut n,
            MetaCall::Readdir {
                path: "/none".into(),
            },
        );
        assert_eq!(finish(&mut n, t), Err(Errno::NotFound));
        assert_eq!(n.link.calls_in_flight(), 0);
    }
}

#[test]
fn a_truncate_is_in_flight_and_other_nodes_see_its_size() {
    for mode in [Mode::Strong, Mode::Relaxed, Mode::Private, Mode::Net] {
        let rig = Rig::new(RigConfig::new(2, mode));
        let data = pattern(5 * 4096 + 100, 3);
        write_file(&mut rig.node(1), "/t", &data);
        // Node 2 holds the file's pages (maps or caches them).
        assert_eq!(read_file(&mut rig.node(2), "/t"), data, "{mode:?}");
        let mut n = rig.node(1);
        let fd = n.open("/t", OpenFlags::default()).unwrap();
        // A buffered write first (private: written back before the
        // Setattr; relaxed: a private copy the truncate clips).
        n.seek(fd, 4096).unwrap();
        n.write(fd, &[0xAB; 4096]).unwrap();
        // Shrink into the second page: the Setattr (and, single copy, the
        // Getattr before it) are calls in flight.
        let t = pending(
            &mut n,
            MetaCall::Truncate {
                fd,
                size: 4096 + 10,
            },
        );
        assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok), "{mode:?}");
        assert_eq!(n.fd_info(fd).unwrap().1, 4096 + 10, "{mode:?}");
        // Grow again: zeros past the old end.
        let t = pending(&mut n, MetaCall::Truncate { fd, size: 3 * 4096 });
        assert_eq!(finish(&mut n, t), Ok(MetaDone::Ok), "{mode:?}");
        n.close(fd).unwrap();
        let mut want = data[..4096].to_vec();
        want.extend_from_slice(&[0xAB; 10]);
        want.resize(3 * 4096, 0);
        check(
            &read_file(&mut n, "/t"),
            &want,
            &format!("{mode:?}: node 1"),
        );
        drop(n);
        check(
            &read_file(&mut rig.node(2), "/t"),
            &want,
            &format!("{mode:?}: node 2"),
        );
    }
}

/// `got == want`, or a panic naming the first differing byte.
fn check(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes read, {} wanted, first difference at {at:?}",
            got.len(),
            want.len()
        );
    }
}
