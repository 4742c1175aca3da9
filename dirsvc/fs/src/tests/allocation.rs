//! Block allocation and running out of space.

use super::*;

fn extents_of(fs: &Fs<MemDisk>, ino: u64) -> Vec<(u64, u32)> {
    fs.node(ino)
        .unwrap()
        .extents
        .iter()
        .map(|e| (e.start, e.len))
        .collect()
}

#[test]
fn appends_grow_the_last_extent_in_place() {
    let mut fs = fresh(128, 16);
    let f = fs.create("/f", true).unwrap().ino;
    for i in 0..10u64 {
        fs.write(f, i * 3000, &[i as u8; 3000]).unwrap();
    }
    assert_eq!(extents_of(&fs, f).len(), 1);
    // Interleaved appends: g's second block cannot extend in place (h took
    // the block behind it), so its new extent comes with PREALLOC_MIN
    // blocks to spare, and the next appends land there.
    let g = fs.create("/g", true).unwrap().ino;
    let h = fs.create("/h", true).unwrap().ino;
    for i in 0..4u64 {
        fs.write(g, i * 4096, &[1; 4096]).unwrap();
        fs.write(h, i * 4096, &[2; 4096]).unwrap();
    }
    assert_eq!(extents_of(&fs, g).len(), 2);
    assert_eq!(extents_of(&fs, h).len(), 2);
    assert_eq!(extents_of(&fs, g)[1].1, 3, "grew into its reservation");
    assert_eq!(
        fs.stats().blocks_used,
        8 + 4 + 4,
        "reservations count as free"
    );
    // Freeing h's blocks lets g grow in place at its end.
    fs.unlink("/h").unwrap();
    fs.write(g, 4 * 4096, &[1; 4096]).unwrap();
    assert_eq!(extents_of(&fs, g).len(), 2, "within the reservation");
    // A remount forgets reservations: they were never on the disk.
    let mut fs = assert_survives_remount(fs);
    let got = read_all(&mut fs, g);
    assert_eq!(got.len(), 5 * 4096);
    assert!(got.iter().all(|&b| b == 1));
    assert_eq!(fs.check_data().unwrap(), vec![]);
}

/// Reservations never cost a write its space: a disk filled up to the
/// last block works with reservations held by other files.
#[test]
fn reservations_are_given_back_when_space_is_short() {
    let mut fs = fresh(64, 16);
    let total = fs.stats().blocks_total;
    let g = fs.create("/g", true).unwrap().ino;
    let h = fs.create("/h", true).unwrap().ino;
    for i in 0..2u64 {
        fs.write(g, i * BS, &[1; BLOCK_SIZE]).unwrap();
        fs.write(h, i * BS, &[2; BLOCK_SIZE]).unwrap();
    }
    // g and h each hold a reservation of PREALLOC_MIN blocks.
    let left = total - fs.stats().blocks_used;
    let big = fs.create("/big", true).unwrap().ino;
    fs.write(big, 0, &vec![3; left as usize * BLOCK_SIZE])
        .unwrap();
    assert_eq!(fs.stats().blocks_used, total);
    assert_eq!(fs.write(g, 2 * BS, b"x").err(), Some(Errno::NoSpace));
    // Space comes back through the truncate; then g grows again.
    fs.set_size(big, 0).unwrap();
    fs.write(g, 2 * BS, b"x").unwrap();
    let mut fs = assert_survives_remount(fs);
    assert_eq!(fs.check_data().unwrap(), vec![]);
    assert_eq!(read_all(&mut fs, h), vec![2; 2 * BLOCK_SIZE]);
}

/// Two logs appended in turn by small writes (webserver's log on two
/// nodes): without preallocation every append of one took the blocks
/// behind the other, and the 11 extent slots ran out after a few hundred
/// KiB (`no space left` with the disk nearly empty).
#[test]
fn interleaved_small_appends_do_not_run_out_of_extents() {
    let mut fs = fresh(4096, 16);
    let a = fs.create("/a", true).unwrap().ino;
    let b = fs.create("/b", true).unwrap().ino;
    let mut rng = Rng::new(7);
    let (mut size_a, mut size_b) = (0u64, 0u64);
    // 1..16 KiB appends until each log holds 4 MiB.
    while size_a < 4 << 20 {
        for (f, size) in [(a, &mut size_a), (b, &mut size_b)] {
            let n = rng.range(1024, 16 * 1024) as usize;
            if let Err(e) = fs.write(f, *size, &pattern(*size ^ f, n)) {
                panic!(
                    "{e:?} at size {size}: a {:?} b {:?}, {:?}",
                    extents_of(&fs, a),
                    extents_of(&fs, b),
                    fs.stats()
                );
            }
            *size += n as u64;
        }
    }
    for f in [a, b] {
        let ext = extents_of(&fs, f).len();
        assert!(ext < MAX_EXTENTS, "{ext} extents");
    }
    let data = size_a.div_ceil(BS) + size_b.div_ceil(BS);
    assert_eq!(fs.stats().blocks_used, data);
    let mut fs = assert_survives_remount(fs);
    assert_eq!(fs.check_data().unwrap(), vec![]);
    assert_eq!(read_all(&mut fs, a).len() as u64, size_a);
    // A truncate gives the spare blocks back.
    fs.set_size(a, 0).unwrap();
    fs.set_size(b, 0).unwrap();
    assert_eq!(fs.stats().blocks_used, 0);
}

#[test]
fn first_fit_prefers_a_run_that_fits() {
    let mut fs = fresh(64, 16);
    let ds = fs.geometry().data_start;
    let a = fs.create("/a", true).unwrap().ino;
    let b = fs.create("/b", true).unwrap().ino;
    let c = fs.create("/c", true).unwrap().ino;
    fs.write(a, 0, &[1; BLOCK_SIZE]).unwrap(); // ds
    fs.write(b, 0, &[2; 3 * BLOCK_SIZE]).unwrap(); // ds+1..ds+4
    fs.write(c, 0, &[3; BLOCK_SIZE]).unwrap(); // ds+4
    fs.unlink("/a").unwrap(); // hole of 1 at ds
    let d = fs.create("/d", true).unwrap().ino;
    fs.write(d, 0, &[4; 2 * BLOCK_SIZE]).unwrap();
    assert_eq!(extents_of(&fs, d), vec![(ds + 5, 2)]);
    fs.unlink("/b").unwrap(); // hole of 3 at ds+1, plus 1 at ds
    let e = fs.create("/e", true).unwrap().ino;
    fs.write(e, 0, &[5; 4 * BLOCK_SIZE]).unwrap();
    assert_eq!(extents_of(&fs, e), vec![(ds, 4)]);
}

#[test]
fn nospace_changes_nothing_and_remounts() {
    let mut fs = fresh(40, 16);
    let total = fs.stats().blocks_total;
    let a = fs.create("/a", true).unwrap().ino;
    let b = fs.create("/b", true).unwrap().ino;
    let da = pattern(10, 10 * BLOCK_SIZE + 5);
    fs.write(a, 0, &da).unwrap();
    let before_bytes = fs.device().blocks().to_vec();
    let before = snapshot(&mut fs);
    let writes = fs.device().writes();
    // Too big for what is left: refused before any write.
    let big = pattern(11, (total as usize - 10) * BLOCK_SIZE);
    assert_eq!(fs.write(b, 0, &big).err(), Some(Errno::NoSpace));
    assert_eq!(fs.set_size(b, total * BS), Err(Errno::NoSpace));
    let bigger = pattern(12, total as usize * BLOCK_SIZE - 2);
    assert_eq!(fs.write(a, 3, &bigger).err(), Some(Errno::NoSpace));
    assert_eq!(fs.device().writes(), writes);
    assert_eq!(fs.device().blocks(), &before_bytes[..]);
    assert_eq!(snapshot(&mut fs), before);
    // Fill up exactly, then one more byte fails.
    let left = (total - fs.stats().blocks_used) as usize;
    fs.write(b, 0, &vec![9; left * BLOCK_SIZE]).unwrap();
    assert_eq!(fs.stats().blocks_used, total);
    let c = fs.create("/c", true).unwrap().ino;
    assert_eq!(fs.write(c, 0, b"x").err(), Some(Errno::NoSpace));
    assert_eq!(fs.getattr(c).unwrap().size, 0);
    // Remount: valid, old data intact.
    let mut fs = assert_survives_remount(fs);
    assert_eq!(read_all(&mut fs, a), da);
    // Freeing space makes it usable again.
    fs.set_size(b, 0).unwrap();
    fs.write(c, 0, b"x").unwrap();
    assert_survives_remount(fs);
}

#[test]
fn out_of_extents_is_nospace() {
    let mut fs = fresh(128, 32);
    // Make a checkerboard: a keeps every other block after freeing b.
    let a = fs.create("/a", true).unwrap().ino;
    let others: Vec<u64> = (0..MAX_EXTENTS as u64 + 2)
        .map(|i| fs.create(&format!("/b{i}"), true).unwrap().ino)
        .collect();
    for &o in &others {
        fs.write(o, 0, &[1; BLOCK_SIZE]).unwrap();
        let x = fs.create(&format!("/x{o}"), true).unwrap().ino;
        fs.write(x, 0, &[2; BLOCK_SIZE]).unwrap();
    }
    for &o in &others {
        fs.set_size(o, 0).unwrap();
    }
    // Leave the tail busy too so a cannot just take one big run.
    let z = fs.create("/z", true).unwrap().ino;
    let free = fs.stats().blocks_total - fs.stats().blocks_used;
    fs.write(z, 0, &vec![3; (free as usize - others.len()) * BLOCK_SIZE])
        .unwrap();
    assert_eq!(
        fs.stats().blocks_total - fs.stats().blocks_used,
        others.len() as u64
    );
    // Each single free block is a separate extent for a.
    let mut written = 0u64;
    loop {
        match fs.write(a, written * BS, &[5; BLOCK_SIZE]) {
            Ok(_) => written += 1,
            Err(e) => {
                assert_eq!(e, Errno::NoSpace);
                break;
            }
        }
    }
    assert_eq!(written, MAX_EXTENTS as u64);
    assert_eq!(extents_of(&fs, a).len(), MAX_EXTENTS);
    assert_eq!(fs.getattr(a).unwrap().size, written * BS);
    let used = fs.stats().blocks_used;
    let mut fs = assert_survives_remount(fs);
    assert_eq!(fs.stats().blocks_used, used);
    assert!(read_all(&mut fs, a).iter().all(|&b| b == 5));
}

#[test]
fn io_errors_leave_memory_matching_disk() {
    // For every prefix of an operation's writes, fail the rest: the file
    // system afterwards must agree with a fresh mount of the disk.
    let script = |fs: &mut Fs<MemDisk>| -> Result<(), Errno> {
        fs.mkdir("/d")?;
        let f = fs.create("/d/f", true)?.ino;
        fs.write(f, 100, &[1; 3 * BLOCK_SIZE])?;
        fs.set_size(f, 5000)?;
        fs.set_size(f, 9 * BS)?;
        fs.write(f, 0, b"abc")?;
        fs.unlink("/d/f")?;
        fs.rmdir("/d")?;
        Ok(())
    };
    for budget in 0..40 {
        // A new file system over a disk that fails after `budget` writes.
        let mut disk = fresh(64, 16).into_device();
        disk.fail_writes_after(Some(budget));
        let mut fs = Fs::mount(disk).unwrap();
        let r = script(&mut fs);
        let mut mem = snapshot_no_io(&mut fs);
        let used = fs.stats().blocks_used;
        let mut disk = fs.into_device();
        disk.fail_writes_after(None);
        let mut again = Fs::mount(disk).unwrap_or_else(|e| panic!("budget {budget}: {e}"));
        let mut ondisk = snapshot_no_io(&mut again);
        // Versions of a directory may lag only if the entry itself is on
        // disk; compare names, kinds and sizes.
        for s in [&mut mem, &mut ondisk] {
            for e in s.iter_mut() {
                e.1.version = 0;
            }
        }
        assert_eq!(mem, ondisk, "budget {budget}");
        assert_eq!(again.stats().blocks_used, used, "budget {budget}");
        if r.is_ok() {
            assert!(budget >= 10);
            break;
        }
    }
}

/// Like [`snapshot`] but only metadata: data after a failed write is not
/// defined (a block overwritten in place whose checksum-table write failed
/// reads as an I/O error after a remount, never as wrong bytes).
fn snapshot_no_io(fs: &mut Fs<MemDisk>) -> Snapshot {
    snapshot_with(fs, false)
}
