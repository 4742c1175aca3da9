//! Random damage to a busy image: refused, never a panic.

use super::*;

/// A richer image for the random-damage tests.
fn busy_image() -> Vec<u8> {
    let mut fs = fresh(96, 48);
    let mut r = Rng::new(9);
    fs.mkdir("/d").unwrap();
    fs.mkdir("/d/e").unwrap();
    for i in 0..12 {
        let dir = ["/", "/d/", "/d/e/"][i % 3];
        let f = fs.create(&format!("{dir}f{i}"), true).unwrap().ino;
        let len = r.below(3 * BLOCK_SIZE as u64) as usize;
        fs.write(f, r.below(5000), &r.bytes(len)).unwrap();
    }
    fs.into_device().into_bytes()
}

/// Use a mounted image the way a server would, checking it stays sane.
fn exercise<D: BlockDevice>(fs: &mut Fs<D>) {
    let snap = snapshot_with(fs, false);
    let st = fs.stats();
    assert!(st.blocks_used <= st.blocks_total);
    let _ = fs.create("/new", false);
    let _ = fs.mkdir("/d/new");
    for (path, a, _) in &snap {
        if a.kind == FileKind::File {
            let _ = fs.write(a.ino, a.size / 2, b"more");
            let _ = fs.set_size(a.ino, a.size / 3);
        } else if path != "/" {
            let _ = fs.rmdir(path);
        }
    }
}

#[test]
fn single_byte_damage_to_metadata_is_always_refused() {
    let img = busy_image();
    let meta = {
        let fs = Fs::mount(MemDisk::from_bytes(img.clone())).unwrap();
        fs.geometry().data_start as usize * BLOCK_SIZE
    };
    let mut disk = MemDisk::from_bytes(img.clone());
    let mut r = Rng::new(1234);
    for _ in 0..3000 {
        let pos = r.below(meta as u64) as usize;
        let x = (r.below(255) + 1) as u8;
        disk.blocks_mut()[pos] ^= x;
        if let Ok(fs) = Fs::mount(&mut disk) {
            panic!("byte {pos} ^ {x:#x} not detected ({:?})", fs.stats());
        }
        disk.blocks_mut()[pos] ^= x;
    }
    assert_eq!(disk.writes(), 0);
    assert_eq!(disk.blocks(), &img[..]);
    // Damage in the data area is invisible to mount.
    for _ in 0..50 {
        let pos = meta + r.below((img.len() - meta) as u64) as usize;
        disk.blocks_mut()[pos] ^= 0x5A;
        assert!(Fs::mount(&mut disk).is_ok());
        disk.blocks_mut()[pos] ^= 0x5A;
    }
}

#[test]
fn mount_never_panics_on_damaged_images() {
    let img = busy_image();
    let meta = 5 * BLOCK_SIZE; // superblock + 3 table blocks + 1 checksum block
    let mut r = Rng::new(99);
    let mut mounted = 0;
    for round in 0..3000 {
        let mut bad = img.clone();
        if round % 2 == 0 {
            // Blind damage: a few random bytes anywhere in the metadata.
            for _ in 0..=r.below(8) {
                let pos = r.below(meta as u64) as usize;
                bad[pos] = r.next_u64() as u8;
            }
        } else {
            // Structured damage: a plausible value in one field of one
            // record (or the superblock), checksum fixed, so the deeper
            // checks run.
            let vals = [
                0,
                1,
                2,
                3,
                4,
                5,
                16,
                47,
                48,
                95,
                96,
                97,
                u64::MAX,
                u32::MAX as u64,
            ];
            let v = if r.below(3) == 0 {
                r.next_u64()
            } else {
                *r.pick(&vals)
            };
            if r.below(6) == 0 {
                let field = *r.pick(&[8usize, 12, 16, 24, 32, 36, 40, 48, 56, 64, 72]);
                if field == 12 || field == 32 || field == 36 || field == 8 || field == 72 {
                    put32(&mut bad, field, v as u32);
                } else {
                    put64(&mut bad, field, v);
                }
                fix_sb(&mut bad);
            } else {
                let ino = 1 + r.below(20);
                let field =
                    *r.pick(&[0usize, 1, 2, 8, 16, 24, 32, 40, 48, 112, 120, 124, 132, 136]);
                let o = rec(ino) + field;
                match field {
                    0 | 1 => bad[o] = v as u8,
                    2 => bad[o..o + 2].copy_from_slice(&(v as u16).to_le_bytes()),
                    120 | 132 => put32(&mut bad, o, v as u32),
                    _ => put64(&mut bad, o, v),
                }
                fix_rec(&mut bad, ino);
            }
        }
        let mut disk = MemDisk::from_bytes(bad);
        if let Ok(mut fs) = Fs::mount(&mut disk) {
            mounted += 1;
            assert_eq!(fs.stats().disk_writes, 0);
            exercise(&mut fs);
            drop(fs);
            // Whatever it did, the result is still a valid image. Its data
            // need not be: an extent moved onto other blocks reads as a
            // checksum mismatch (`Io`), never as those blocks' bytes.
            let mut fs = Fs::mount(&mut disk).unwrap();
            for (_, a, _) in snapshot_with(&mut fs, false) {
                let mut buf = vec![0u8; a.size as usize];
                if a.kind == FileKind::File {
                    let r = fs.read(a.ino, 0, &mut buf);
                    assert!(matches!(r, Ok(_) | Err(Errno::Io)), "{r:?}");
                }
            }
        } else {
            assert_eq!(disk.writes(), 0);
        }
    }
    // Some structured edits keep the image valid (e.g. a version change).
    assert!(mounted > 50, "{mounted}");
}
