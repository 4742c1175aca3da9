//! WRITEBACK by owners and sharers.

use super::*;

#[test]
fn writeback_by_the_owner_and_by_a_sharer() {
    let mut t = T::new();
    let g = t.own(1);
    t.share(2);
    // Clean: nothing to write.
    assert_eq!(
        t.req(
            1,
            3,
            PageReq::Writeback {
                key: K,
                dirty: false
            }
        ),
        vec![reply(1, 3, DONE)]
    );
    // The owner wrote it.
    assert_eq!(
        t.req(
            1,
            4,
            PageReq::Writeback {
                key: K,
                dirty: true
            }
        ),
        vec![Action::WriteBack { key: K, gfn: g }, reply(1, 4, WRITTEN)]
    );
    // A sharer wrote it (strong mode writes the owner's frame).
    assert_eq!(
        t.req(
            2,
            5,
            PageReq::Writeback {
                key: K,
                dirty: true
            }
        ),
        vec![Action::WriteBack { key: K, gfn: g }, reply(2, 5, WRITTEN)]
    );
    // Dirty from a drop: the next WRITEBACK writes it and cleans it.
    t.share(3);
    t.req(
        3,
        6,
        PageReq::Drop {
            key: K,
            dirty: true,
        },
    );
    assert_eq!(
        t.req(
            1,
            7,
            PageReq::Writeback {
                key: K,
                dirty: false
            }
        ),
        vec![Action::WriteBack { key: K, gfn: g }, reply(1, 7, WRITTEN)]
    );
    assert!(!t.entry().unwrap().dirty);
    assert_eq!(t.d.stats().writebacks, 3);
}

#[test]
fn writeback_is_refused_outside_owned_pages_and_to_strangers() {
    let mut t = T::new();
    let wb = PageReq::Writeback {
        key: K,
        dirty: true,
    };
    t.refused(1, wb); // not cached
    t.lock(1, 1);
    t.refused(1, wb); // E
    t.req(1, 2, PageReq::Unlock { key: K });
    t.refused(3, wb); // stranger
    t.share(2);
    t.req(
        1,
        3,
        PageReq::Inv {
            key: K,
            dirty: false,
        },
    );
    t.refused(1, wb); // TBI
    t.refused(2, wb); // TBI, sharer
}
