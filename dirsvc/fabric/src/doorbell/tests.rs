use super::*;
use crate::layout::Layout;
use crate::shm::HeapShm;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A formatted 2 MiB region for 4 nodes (also the deferred checks'
/// tests).
pub(crate) fn region() -> Box<HeapShm> {
    let size = 2 << 20;
    let mem = HeapShm::new(size);
    Layout::compute(size, 4).unwrap().format(&*mem, 1);
    Box::new(mem)
}

#[test]
fn table_sits_between_node_table_and_pong() {
    assert_eq!(TABLE, NODE_TABLE + 64 * NODE_RECORD);
    assert!(TABLE + ENTRIES as usize * ENTRY <= HEADER_BYTES - 64);
}

#[test]
fn publish_and_look_up() {
    let mem = region();
    let m = PeerMap::new(&**mem);
    assert!(m.formatted());
    assert_eq!(m.peer_of(0), None);
    m.publish(0, 0).unwrap();
    m.publish(1, 7).unwrap();
    m.publish(MAX_NODES, MAX_PEER).unwrap();
    assert_eq!(m.peer_of(0), Some(0));
    assert_eq!(m.peer_of(1), Some(7));
    assert_eq!(m.peer_of(2), None);
    assert_eq!(m.peer_of(MAX_NODES), Some(0xFFFF));
    // A restarted instance publishes its new id over the old one.
    m.publish(1, 9).unwrap();
    assert_eq!(m.peer_of(1), Some(9));
    m.unpublish(1);
    assert_eq!(m.peer_of(1), None);
    // Entries do not overlap.
    m.set_sleeping(1, true);
    m.set_flags(1, FLAG_RINGS_DIRECTORY);
    m.set_echo_request(1, 5);
    m.set_echo_answer(1, 4);
    assert_eq!(m.peer_of(0), Some(0));
    assert!(!m.sleeping(0) && !m.sleeping(2));
    assert_eq!((m.flags(0), m.flags(2)), (0, 0));
    assert_eq!((m.echo_request(1), m.echo_answer(1)), (5, 4));
    assert_eq!(m.echo_request(2), 0);
    // The layout still reads back: the table is outside the CRC'd fields.
    assert!(Layout::read(&**mem).is_ok());
}

#[test]
fn bad_input_is_refused() {
    let mem = region();
    let m = PeerMap::new(&**mem);
    assert_eq!(
        m.publish(ENTRIES, 1),
        Err(DoorbellError::BadInstance(ENTRIES))
    );
    assert_eq!(m.publish(1, 0x10000), Err(DoorbellError::BadPeer(0x10000)));
    assert_eq!(m.peer_of(ENTRIES), None);
    assert_eq!(m.peer_of(u32::MAX), None);
    m.set_sleeping(u32::MAX, true); // ignored, no panic
    assert!(!m.sleeping(u32::MAX));
    // Garbage in the region: an id beyond 16 bits is no id.
    mem.store_u32(TABLE + ENTRY, 0x1_0001);
    assert_eq!(m.peer_of(1), None);
    mem.store_u32(TABLE + ENTRY, u32::MAX);
    assert_eq!(m.peer_of(1), None);
    // Any non-zero sleeping word counts as asleep (a spare ring is fine).
    mem.store_u32(TABLE + ENTRY + 8, 0xdead);
    assert!(m.sleeping(1));
    // Unformatted or foreign regions: no publication.
    let blank = HeapShm::new(2 << 20);
    let b = PeerMap::new(&*blank);
    assert!(!b.formatted());
    assert_eq!(b.publish(1, 3), Err(DoorbellError::NotFormatted));
    // A region smaller than the header: nothing is touched.
    let tiny = HeapShm::new(4096);
    let t = PeerMap::new(&*tiny);
    assert!(!t.formatted());
    assert_eq!(t.peer_of(0), None);
    assert_eq!(t.publish(0, 1), Err(DoorbellError::BadInstance(0)));
}

#[test]
fn sleeping_word_decides_the_ring() {
    let mem = region();
    let m = PeerMap::new(&**mem);
    assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::NoPeer);
    m.publish(0, 3).unwrap();
    assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::Suppressed);
    assert!(prepare_sleep(&m, 0, false, seqcst_fence, || false));
    assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::Peer(3));
    finish_sleep(&m, 0, seqcst_fence);
    assert_eq!(ring_decision(&m, 0, seqcst_fence), Ring::Suppressed);
    // Work found by the re-check: no halt, the word is cleared again.
    assert!(!prepare_sleep(&m, 0, false, seqcst_fence, || true));
    assert!(!m.sleeping(0));
    assert_eq!(ring_decision(&m, 99, seqcst_fence), Ring::NoPeer);
}

/// The consumer of the lost-wakeup tests, on its own thread: takes the
/// items `produced` counts one at a time (`consumed` counts them) until
/// `items`, and whenever none is pending sleeps as a kernel does
/// (announce, re-check, then wait for `bell` or 2 s, standing for
/// the tick: long enough that a producer thread descheduled between
/// publishing an item and ringing, on a loaded host, is not counted).
/// Returns how many sleeps ended by the timeout while an item was
/// pending: lost wakeups.
pub(crate) fn sleepy_consumer(
    mem: Arc<HeapShm>,
    produced: Arc<AtomicU64>,
    consumed: Arc<AtomicU64>,
    bell: Arc<AtomicBool>,
    items: u64,
) -> std::thread::JoinHandle<u32> {
    std::thread::spawn(move || {
        let m = PeerMap::new(&*mem);
        let mut lost = 0u32;
        loop {
            let c = consumed.load(Ordering::SeqCst);
            if c == items {
                break;
            }
            if produced.load(Ordering::SeqCst) > c {
                consumed.store(c + 1, Ordering::SeqCst);
                continue;
            }
            if !prepare_sleep(&m, 1, false, seqcst_fence, || {
                produced.load(Ordering::SeqCst) > c
            }) {
                continue;
            }
            // "hlt": wait for the bell, or time out (the tick).
            let t = Instant::now();
            while !bell.swap(false, Ordering::SeqCst) {
                if t.elapsed() > Duration::from_secs(2) {
                    if produced.load(Ordering::SeqCst) > c {
                        lost += 1;
                    }
                    break;
                }
                std::hint::spin_loop();
            }
            finish_sleep(&m, 1, seqcst_fence);
        }
        lost
    })
}

/// Two threads: a producer publishes items and rings only a sleeping
/// consumer; the consumer sleeps (with a timeout standing for the tick)
/// whenever it finds nothing. With the protocol no sleep ever has to
/// end by the timeout while an item is pending.
#[test]
fn no_lost_wakeups_between_two_threads() {
    const ITEMS: u64 = 20_000;
    let mem = Arc::new(*region());
    PeerMap::new(&*mem).publish(1, 1).unwrap();
    let produced = Arc::new(AtomicU64::new(0));
    let consumed = Arc::new(AtomicU64::new(0));
    let bell = Arc::new(AtomicBool::new(false));
    let consumer = sleepy_consumer(mem.clone(), produced.clone(), consumed, bell.clone(), ITEMS);
    let m = PeerMap::new(&*mem);
    let mut rung = 0u64;
    for i in 1..=ITEMS {
        produced.store(i, Ordering::SeqCst);
        if let Ring::Peer(p) = ring_decision(&m, 1, seqcst_fence) {
            assert_eq!(p, 1);
            bell.store(true, Ordering::SeqCst);
            rung += 1;
        }
        if i % 64 == 0 {
            std::thread::yield_now();
        }
    }
    let lost = consumer.join().unwrap();
    assert_eq!(lost, 0, "a wakeup was lost ({rung} rings)");
}

#[test]
fn a_quiet_sleep_is_told_apart_from_a_plain_one() {
    let mem = region();
    let m = PeerMap::new(&**mem);
    assert!(prepare_sleep(&m, 2, true, seqcst_fence, || false));
    assert!(m.sleeping(2) && m.sleeps_quiet(2));
    finish_sleep(&m, 2, seqcst_fence);
    assert!(!m.sleeping(2) && !m.sleeps_quiet(2));
    assert!(prepare_sleep(&m, 2, false, seqcst_fence, || false));
    assert!(m.sleeping(2) && !m.sleeps_quiet(2));
    // Garbage is a plain sleep, never a licence to skip an ack.
    mem.store_u32(TABLE + 2 * ENTRY + 8, 0xdead);
    assert!(m.sleeping(2) && !m.sleeps_quiet(2));
    assert!(!m.sleeps_quiet(u32::MAX));
    // A replacement instance publishing its id is awake: the quiet
    // word a dead predecessor left behind is gone.
    assert!(prepare_sleep(&m, 2, true, seqcst_fence, || false));
    m.publish(2, 7).unwrap();
    assert!(!m.sleeping(2) && !m.sleeps_quiet(2));
}

/// Two threads: a "directory" publishes invalidations and takes each
/// one it sees published to a quietly sleeping "node" as acknowledged;
/// the node, right after every wake, looks at what was published. Every
/// invalidation taken as acknowledged must be in what the node sees
/// then (else it could use a page the directory thinks it gave up).
#[test]
fn an_invalidation_taken_from_a_quiet_sleeper_is_seen_when_it_wakes() {
    const ITEMS: u64 = 20_000;
    let mem = Arc::new(*region());
    PeerMap::new(&*mem).publish(1, 1).unwrap();
    let produced = Arc::new(AtomicU64::new(0));
    let taken = Arc::new(AtomicU64::new(0));
    let bell = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let node = {
        let (mem, produced, taken, bell, done) = (
            mem.clone(),
            produced.clone(),
            taken.clone(),
            bell.clone(),
            done.clone(),
        );
        std::thread::spawn(move || {
            let m = PeerMap::new(&*mem);
            let mut seen = 0u64;
            let mut wakes = 0u64;
            while !done.load(Ordering::SeqCst) {
                let p = produced.load(Ordering::SeqCst);
                if p > seen {
                    seen = p;
                    continue;
                }
                let slept = prepare_sleep(&m, 1, true, seqcst_fence, || {
                    produced.load(Ordering::SeqCst) > seen
                });
                if slept {
                    let t = Instant::now();
                    while !bell.swap(false, Ordering::SeqCst)
                        && t.elapsed() < Duration::from_millis(2)
                    {
                        std::hint::spin_loop();
                    }
                    finish_sleep(&m, 1, seqcst_fence);
                }
                wakes += 1;
                // First thing after waking: what was published.
                let now = produced.load(Ordering::SeqCst);
                let t = taken.load(Ordering::SeqCst);
                assert!(t <= now, "invalidation {t} taken as acked, node saw {now}");
            }
            wakes
        })
    };
    let m = PeerMap::new(&*mem);
    let mut lazy = 0u64;
    for i in 1..=ITEMS {
        produced.store(i, Ordering::SeqCst);
        seqcst_fence();
        if m.sleeps_quiet(1) {
            taken.store(i, Ordering::SeqCst);
            lazy += 1;
        } else if let Ring::Peer(_) = ring_decision(&m, 1, seqcst_fence) {
            bell.store(true, Ordering::SeqCst);
        }
        if i % 64 == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    done.store(true, Ordering::SeqCst);
    bell.store(true, Ordering::SeqCst);
    let wakes = node.join().unwrap();
    assert!(
        lazy > 0 && wakes > 0,
        "no quiet sleep was met ({lazy} taken, {wakes} wakes)"
    );
}
