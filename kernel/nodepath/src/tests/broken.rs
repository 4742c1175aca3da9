//! A session whose notify ring turned out corrupt in the middle of an
//! operation: the invalidations it lost may have made any page it holds
//! stale, so nothing more is served from its cache.

use super::*;

/// Node 3 maps node 2's pages of `/f`; node 1 cuts `/f` to one page and
/// rewrites that page while node 3 is busy (its DIR_INVs wait in its
/// notify ring), and the ring is then scribbled over, so node 3 finds it
/// corrupt in its next open's call. That read must not return the old
/// bytes from node 3's mappings of frames the directory has taken back
/// (close-to-open: node 1's write closed before the open): an error, or
/// the new bytes. (A rewrite that grew the file over the cut pages would
/// wait for node 3's acks.)
#[test]
fn a_ring_found_corrupt_during_an_open_serves_nothing_stale() {
    let rig = Rig::new(RigConfig::new(3, Mode::Relaxed));
    let old = pattern(3 * 4096 - 100, 1);
    let new = pattern(4096, 2);
    write_file(&mut rig.node(2), "/f", &old);
    assert_eq!(read_file(&mut rig.node(3), "/f"), old);
    {
        // Node 3 busy: its idle loop does not service its ring.
        let mut n3 = rig.node(3);
        let mut n1 = rig.node(1);
        let fd = n1.open("/f", OpenFlags::default()).unwrap();
        n1.truncate(fd, new.len() as u64).unwrap();
        assert_eq!(n1.write(fd, &new).unwrap(), new.len());
        n1.close(fd).unwrap();
        drop(n1);
        rig.corrupt_notify_ring(3, 0xdead_beef);
        let fd = n3.open("/f", OpenFlags::default());
        if let Ok(fd) = fd {
            let mut buf = vec![0u8; 4 * 4096];
            let r = n3.read(fd, &mut buf);
            let _ = n3.close(fd);
            if let Ok(n) = r {
                assert!(
                    buf[..n] == new[..],
                    "node 3 read {n} bytes after node 1's write closed, {}",
                    if buf[..n] == old[..] {
                        "the old ones (stale)"
                    } else {
                        "neither version"
                    }
                );
            }
        }
    }
    // The next membership check rejoins; then the new bytes.
    rig.node(3).check();
    assert_eq!(read_file(&mut rig.node(3), "/f"), new);
}
