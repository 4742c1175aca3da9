//! Instruction counts of cold misses, per mode, for
//! `tools/profile-miss.sh` (callgrind): ignored tests that read 256 pages
//! of a file no node caches, one 4 KiB read each, through the in-process
//! rig (a real directory, a heap disk). `marker_read` is the one function
//! the script tells callgrind to count inside, so setup is left out; the
//! rig steps the directory from the node's waits, so its share shows up
//! under `rig::Shared::step`. The `task` variants read the same pages as
//! fio's tasks do (`task_reads=each`): a ticket for the miss
//! ([`Node::io_start`]), polled and waited for, then the I/O run as the
//! executor's batch of one (`marker_task_read`).

use fabric::config::Mode;
use osapi::io::{BatchIo, Fd, IoSpan, OpenFlags};

use crate::node::Node;
use crate::rig::{HostEnv, Rig, RigConfig};
use crate::tests::{pattern, write_file};

/// Pages read (each one miss).
const PAGES: usize = 256;

fn misses(mode: Mode) {
    run_misses(mode, false);
}

fn run_misses(mode: Mode, task: bool) {
    let rig = Rig::new(RigConfig::new(1, mode));
    write_file(&mut rig.node(1), "/f", &pattern(PAGES * 4096, 1));
    rig.node(1).sync().unwrap();
    rig.node(1).cache_drop().unwrap();
    let mut n = rig.node(1);
    let fd = n.open("/f", OpenFlags::default()).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut x = 7usize;
    for _ in 0..PAGES {
        // A permutation of the pages (97 is prime to 256).
        x = (x * 97 + 13) % PAGES;
        if task {
            marker_task_read(&mut n, fd, (x * 4096) as u64, &mut buf);
        } else {
            n.seek(fd, (x * 4096) as u64).unwrap();
            marker_read(&mut n, fd, &mut buf);
        }
    }
    n.close(fd).unwrap();
}

/// One read: what callgrind counts (`--toggle-collect`).
#[inline(never)]
fn marker_read(n: &mut Node<HostEnv>, fd: Fd, buf: &mut [u8]) {
    assert_eq!(n.read(fd, buf).unwrap(), buf.len());
}

/// One read as a task's I/O: its ticket, then the I/O (what callgrind
/// counts with `--path task`).
#[inline(never)]
fn marker_task_read(n: &mut Node<HostEnv>, fd: Fd, offset: u64, buf: &mut [u8]) {
    let span = IoSpan {
        fd,
        offset,
        len: buf.len(),
        write: false,
    };
    if let Some(t) = n.io_start(&[span]).unwrap()[0] {
        loop {
            n.io_progress();
            if let Some(r) = n.io_poll(t) {
                r.unwrap();
                break;
            }
            n.io_wait();
        }
    }
    n.prepare_batch(&[BatchIo::new(fd, offset, false, buf)])
        .unwrap();
    n.seek(fd, offset).unwrap();
    assert_eq!(n.read(fd, buf).unwrap(), buf.len());
}

#[test]
#[ignore = "a profile for tools/profile-miss.sh"]
fn profile_task_misses_strong() {
    run_misses(Mode::Strong, true);
}

#[test]
#[ignore = "a profile for tools/profile-miss.sh"]
fn profile_task_misses_relaxed() {
    run_misses(Mode::Relaxed, true);
}

#[test]
#[ignore = "a profile for tools/profile-miss.sh"]
fn profile_task_misses_private() {
    run_misses(Mode::Private, true);
}

#[test]
#[ignore = "a profile for tools/profile-miss.sh"]
fn profile_misses_strong() {
    misses(Mode::Strong);
}

#[test]
#[ignore = "a profile for tools/profile-miss.sh"]
fn profile_misses_relaxed() {
    misses(Mode::Relaxed);
}

#[test]
#[ignore = "a profile for tools/profile-miss.sh"]
fn profile_misses_private() {
    misses(Mode::Private);
}
