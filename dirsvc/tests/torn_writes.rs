//! A crash at any moment of the directory's asynchronous writes leaves
//! every byte a file showed before, or the bytes written over it, and
//! never a block that fails its checksum: overwrites of synced data
//! blocks (a log's tail block appended to) go through the file system's
//! deferred writes and the write queue ([`dirsvc::writeq`]) in every
//! order the queue allows, and the device is mounted as a crash would
//! leave it before every step.

use dirsvc::writeq::WriteQueue;
use flatfs::{BlockDevice, Fs, MemDisk, BLOCK_SIZE};

/// A small deterministic generator (xorshift64*), one per seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

/// The writes after the synced 100 bytes of `A`, each one job:
/// (offset, length, byte).
const JOBS: [(u64, usize, u8); 4] = [
    (100, 200, b'B'),  // an append into the synced tail block
    (300, 4000, b'C'), // the rest of that block and a new one
    (0, 50, b'D'),     // an overwrite of synced bytes
    (4200, 200, b'E'), // an overwrite of the new block's end, and growth
];

/// The bytes byte `i` may hold after a crash, given the sizes each job
/// would leave: its own write's byte or any earlier one's.
fn allowed(i: u64) -> Vec<u8> {
    let mut v = Vec::new();
    if i < 100 {
        v.push(b'A');
    }
    for (off, len, b) in JOBS {
        if i >= off && i < off + len as u64 {
            v.push(b);
        }
    }
    v
}

/// Mount a copy of the device as a crash now would leave it and check
/// `/log`: readable in full, every byte one some write put there, the
/// size one the jobs' records may say. After a failed write (`failed`)
/// the block it failed to write, and the others its checksum-table block
/// covers, may read as an I/O error instead (see `flatfs` `sums`), never
/// as other bytes.
fn check_crash_image(dev: &MemDisk, seed: u64, step: usize, failed: bool) {
    let copy = MemDisk::from_bytes(dev.blocks().to_vec());
    let mut fs = Fs::mount(copy).unwrap_or_else(|e| panic!("seed {seed} step {step}: mount: {e}"));
    let a = fs.lookup("/log").expect("the file");
    let sizes = [100u64, 300, 4300, 4300, 4400];
    assert!(
        sizes.contains(&a.size),
        "seed {seed} step {step}: size {}",
        a.size
    );
    let mut buf = vec![0u8; a.size as usize];
    let n = match fs.read(a.ino, 0, &mut buf) {
        Ok(n) => n,
        Err(fabric::proto::Errno::Io) if failed => return,
        Err(e) => panic!("seed {seed} step {step}: read after a crash: {e:?}"),
    };
    assert_eq!(n as u64, a.size);
    for (i, &b) in buf.iter().enumerate() {
        assert!(
            allowed(i as u64).contains(&b),
            "seed {seed} step {step}: byte {i} is {b:#x}"
        );
    }
    if !failed {
        assert_eq!(fs.check_data(), Ok(vec![]), "seed {seed} step {step}");
    }
}

/// One run: the synced file, the jobs queued at once, then writes
/// submitted and completed in an order the seed picks; with `failures`,
/// one completion in eight is a failed write (the block keeps its bytes).
fn run(seed: u64, failures: bool) {
    let mut fs = Fs::format(MemDisk::new(256), 16).unwrap();
    let ino = fs.create("/log", false).unwrap().ino;
    fs.write(ino, 0, &[b'A'; 100]).unwrap();
    fs.sync().unwrap();
    let mut q: WriteQueue<()> = WriteQueue::new();
    for (off, len, b) in JOBS {
        fs.begin_deferred();
        fs.write(ino, off, &vec![b; len]).unwrap();
        let staged = fs.end_deferred();
        let writes = fs
            .coalesce_staged(staged)
            .into_iter()
            .map(|s| (fs.write_phase(s.lba), s.lba, s.buf))
            .collect();
        q.push(vec![ino], writes, ());
    }
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut flying: Vec<(u64, u64, Box<[u8; BLOCK_SIZE]>)> = Vec::new();
    let mut failed = false;
    for step in 0.. {
        check_crash_image(fs.device(), seed, step, failed);
        let submit = flying.is_empty() || rng.below(2) == 0;
        if submit {
            if let Some(w) = q.next_submit() {
                flying.push(w);
                continue;
            }
        }
        if flying.is_empty() {
            break;
        }
        let (id, lba, buf) = flying.swap_remove(rng.below(flying.len()));
        if failures && rng.below(8) == 0 {
            failed = true;
            fs.write_failed(lba);
            q.complete(id, false);
        } else {
            fs.device_mut().write_block(lba, &buf).unwrap();
            fs.write_landed(lba);
            q.complete(id, true);
        }
        for lba in q.take_skipped() {
            fs.write_skipped(lba);
        }
    }
    let finished = q.take_finished();
    assert_eq!(finished.len(), JOBS.len(), "seed {seed}");
    assert_eq!(fs.pending_blocks(), 0, "seed {seed}");
    check_crash_image(fs.device(), seed, usize::MAX, failed);
    if !failed {
        let mut buf = vec![0u8; 4400];
        assert_eq!(fs.read(ino, 0, &mut buf), Ok(4400));
        assert_eq!(&buf[..50], &[b'D'; 50][..]);
        assert_eq!(&buf[4200..], &[b'E'; 200][..]);
    }
}

#[test]
fn a_crash_during_overwrites_of_synced_blocks_leaves_old_or_new_bytes() {
    for seed in 1..=300 {
        run(seed, false);
    }
}

#[test]
fn failed_writes_never_leave_other_bytes() {
    for seed in 1..=300 {
        run(seed, true);
    }
}
