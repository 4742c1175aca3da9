//! Relaxed mode: a write over a page of this node's frame that a truncate
//! is tearing down (`Reclaiming`: the directory still waits for the
//! sharers' acks before it lets the owner free the frame).

use super::*;

/// Node 2 maps node 1's frame of `/f`'s page; node 1 truncates and
/// rewrites `/f` whole while node 2 is busy (its DIR_INV waits in its
/// ring), then reads `/g`. Node 1 must not fill the frame node 2 still
/// maps with `/g`'s page: node 2, reading on through its open descriptor,
/// would get another file's bytes.
#[test]
fn a_relaxed_rewrite_keeps_a_frame_being_torn_down_until_the_directory_frees_it() {
    let rig = Rig::new(RigConfig::new(2, Mode::Relaxed));
    let a = pattern(4096, 1);
    let b = pattern(4096, 2);
    let g = pattern(4096, 3);
    write_file(&mut rig.node(1), "/f", &a);
    write_file(&mut rig.node(1), "/g", &g);
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    assert_eq!(read_file(&mut rig.node(1), "/f"), a);
    let ino = rig.node(1).stat("/f").unwrap().ino;
    let key = PageKey { ino, idx: 0 };
    let Some(Slot::Local { gfn, .. }) = slot(&mut rig.node(1), key) else {
        panic!("node 1 owns /f's page");
    };
    let fd2 = rig.node(2).open("/f", OpenFlags::default()).unwrap();
    let mut buf = vec![0u8; 4096];
    assert_eq!(rig.node(2).read(fd2, &mut buf).unwrap(), 4096);
    assert_eq!(buf, a);
    assert!(matches!(
        slot(&mut rig.node(2), key),
        Some(Slot::Remote { gfn: g2, .. }) if g2 == gfn
    ));
    {
        // Node 2 busy: its idle loop does not service its ring.
        let mut n2 = rig.node(2);
        let mut n1 = rig.node(1);
        let fd = n1.open("/f", create()).unwrap();
        assert_eq!(n1.write(fd, &b).unwrap(), 4096);
        let r = read_file(&mut n1, "/g");
        assert_eq!(r, g);
        drop(n1);
        // Node 2 reads on through its descriptor, from its mapping: the
        // old bytes of `/f` or nothing, never `/g`'s.
        n2.seek(fd2, 0).unwrap();
        let got = n2.read(fd2, &mut buf);
        if let Ok(n) = got {
            assert!(
                buf[..n] != g[..n],
                "node 2 read /g's bytes through its mapping of /f (frame {gfn} reused)"
            );
        }
        let _ = n2.close(fd2);
        drop(n2);
        rig.node(1).close(fd).unwrap();
    }
    rig.idle(10);
    assert_eq!(read_file(&mut rig.node(2), "/f"), b);
    assert_eq!(read_file(&mut rig.node(2), "/g"), g);
}
