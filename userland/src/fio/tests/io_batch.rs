//! `Os::io_batch`'s default: one positioned I/O after another through
//! `seek` and `read` / `write`, on the fake and the shell's mock.

use alloc::string::ToString;
use alloc::vec;

use super::fake::{FakeOs, Op};
use crate::mock::MockOs;
use crate::os::traits::*;
use crate::os::{BatchIo, Errno, Fd, OpenFlags};
use crate::pattern;

#[test]
fn default_io_batch_on_the_fake() {
    let mut os = FakeOs::new();
    let mut data = vec![0u8; 10_000];
    pattern::fill(&mut data, 0);
    os.files.insert("/f".to_string(), data);
    let fd = os.open("/f", OpenFlags::default()).unwrap();
    let mut a = [0u8; 100];
    let mut b = [0u8; 100];
    let mut c = [9u8; 50];
    let mut d = [0u8; 100];
    let mut e: [u8; 0] = [];
    let mut ios = [
        BatchIo::new(fd, 5000, false, &mut a),
        BatchIo::new(fd, 0, false, &mut b),
        BatchIo::new(fd, 20, true, &mut c),
        BatchIo::new(fd, 9950, false, &mut d),
        BatchIo::new(fd, 123, false, &mut e),
    ];
    assert!(ios.iter().all(|io| io.done == Err(Errno::Io)));
    os.io_batch(&mut ios).unwrap();
    let done: Vec<_> = ios.iter().map(|io| io.done).collect();
    // The last read reaches the end of the file: short.
    assert_eq!(done, [Ok(100), Ok(100), Ok(50), Ok(50), Ok(0)]);
    assert_eq!(pattern::first_mismatch(&a, 5000), None);
    assert_eq!(pattern::first_mismatch(&b, 0), None);
    assert_eq!(pattern::first_mismatch(&d[..50], 9950), None);
    assert_eq!(&os.files["/f"][20..70], &[9u8; 50]);
    // One by one, in order: seek, then the transfer.
    let seeks: Vec<u64> = os
        .log
        .iter()
        .filter_map(|o| match o {
            Op::Seek(_, off) => Some(*off),
            _ => None,
        })
        .collect();
    assert_eq!(seeks, [5000, 0, 20, 9950, 123]);

    // Short transfers are continued; errors stay with their I/O.
    os.max_io = 7;
    let mut a = [0u8; 100];
    let mut b = [0u8; 100];
    let mut ios = [
        BatchIo::new(fd, 1000, false, &mut a),
        BatchIo::new(Fd(999), 0, false, &mut b),
    ];
    os.io_batch(&mut ios).unwrap();
    assert_eq!(ios[0].done, Ok(100));
    assert_eq!(ios[1].done, Err(Errno::BadFd));
    assert_eq!(pattern::first_mismatch(&a, 1000), None);

    // Without seek every I/O says "not supported".
    os.can_seek = false;
    let mut a = [0u8; 10];
    let mut ios = [BatchIo::new(fd, 0, false, &mut a)];
    os.io_batch(&mut ios).unwrap();
    assert_eq!(ios[0].done, Err(Errno::NotSupported));
    os.close(fd).unwrap();

    // The shell's mock cannot seek either.
    let mut m = MockOs::new();
    let fd = m
        .open(
            "/x",
            OpenFlags {
                create: true,
                ..OpenFlags::default()
            },
        )
        .unwrap();
    let mut a = [0u8; 10];
    let mut ios = [BatchIo::new(fd, 0, false, &mut a)];
    m.io_batch(&mut ios).unwrap();
    assert_eq!(ios[0].done, Err(Errno::NotSupported));
    m.close(fd).unwrap();
}
