//! Damaged inode records, extents and namespaces are refused at mount,
//! each with its own error, nothing written.

use super::corruption::assert_refused;
use super::*;

/// A record's checksum, kind, number, reserved bytes and name.
#[test]
fn damaged_inode_records_are_refused() {
    assert_refused(vec![
        (
            "record crc",
            |i| i[rec(3) + 40] ^= 4,
            |e| matches!(e, MountError::InodeChecksum { ino: 3, .. }),
        ),
        (
            "free record garbage",
            |i| i[rec(20) + 100] = 1,
            |e| *e == MountError::FreeInodeNotZero { ino: 20 },
        ),
        (
            "kind",
            |i| {
                i[rec(4)] = 7;
                fix_rec(i, 4)
            },
            |e| *e == MountError::BadKind { ino: 4, kind: 7 },
        ),
        (
            "inode number",
            |i| set_rec64(i, 4, 8, 9),
            |e| *e == MountError::BadInodeNumber { ino: 4, found: 9 },
        ),
        (
            "reserved",
            |i| {
                i[rec(4) + 5] = 1;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadRecord { ino: 4, .. }),
        ),
        (
            "reserved tail",
            |i| {
                i[rec(4) + 246] = 1;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadRecord { ino: 4, .. }),
        ),
        (
            "name padding",
            |i| {
                i[rec(4) + REC_NAME_OFF + 30] = b'z';
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadRecord { ino: 4, .. }),
        ),
        (
            "name with slash",
            |i| {
                i[rec(4) + REC_NAME_OFF] = b'/';
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "empty name",
            |i| {
                i[rec(4) + 1] = 0;
                i[rec(4) + REC_NAME_OFF] = 0;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "dot name",
            |i| {
                i[rec(4) + REC_NAME_OFF] = b'.';
                fix_rec(i, 4)
            },
            |e| {
                // "g" -> "."
                matches!(e, MountError::BadName { ino: 4, .. })
            },
        ),
        (
            "name too long",
            |i| {
                i[rec(4) + 1] = 60;
                i[rec(4) + REC_NAME_OFF..rec(4) + REC_NAME_OFF + 60].fill(b'q');
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "name not utf-8",
            |i| {
                i[rec(4) + REC_NAME_OFF] = 0xFF;
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::BadName { ino: 4, .. }),
        ),
        (
            "extent count",
            |i| {
                i[rec(3) + 2] = 12;
                fix_rec(i, 3)
            },
            |e| *e == MountError::TooManyExtents { ino: 3, count: 12 },
        ),
        (
            "directory with extents",
            |i| {
                i[rec(2) + 2] = 1;
                put64(i, rec(2) + REC_EXT_OFF, 60);
                put32(i, rec(2) + REC_EXT_OFF + 8, 1);
                fix_rec(i, 2)
            },
            |e| matches!(e, MountError::BadRecord { ino: 2, .. }),
        ),
        (
            "directory with size",
            |i| set_rec64(i, 2, 32, 3),
            |e| matches!(e, MountError::BadRecord { ino: 2, .. }),
        ),
    ]);
}

/// Extents out of range, overlapping or shared, and sizes past them.
#[test]
fn damaged_extents_are_refused() {
    assert_refused(vec![
        (
            "empty extent",
            |i| {
                put32(i, rec(3) + REC_EXT_OFF + 8, 0);
                fix_rec(i, 3)
            },
            |e| *e == MountError::EmptyExtent { ino: 3, index: 0 },
        ),
        (
            "extent beyond the end",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF, 63);
                fix_rec(i, 3)
            },
            |e| {
                matches!(
                    e,
                    MountError::ExtentOutOfRange {
                        ino: 3,
                        index: 0,
                        start: 63,
                        end: 65,
                        data_end: 64,
                        ..
                    }
                )
            },
        ),
        (
            "extent in the inode table",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF, 1);
                fix_rec(i, 3)
            },
            |e| {
                matches!(
                    e,
                    MountError::ExtentOutOfRange {
                        ino: 3,
                        start: 1,
                        data_start: 4,
                        ..
                    }
                )
            },
        ),
        (
            "extent wraps around",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF, u64::MAX - 1);
                fix_rec(i, 3)
            },
            |e| matches!(e, MountError::ExtentOutOfRange { ino: 3, .. }),
        ),
        (
            "unused extent slot",
            |i| {
                put64(i, rec(3) + REC_EXT_OFF + 3 * EXT_SIZE, 9);
                fix_rec(i, 3)
            },
            |e| matches!(e, MountError::BadRecord { ino: 3, .. }),
        ),
        (
            "two inodes share a block",
            |i| {
                // /g's block -> /a/f's second block.
                let fstart = get64(i, rec(3) + REC_EXT_OFF);
                put64(i, rec(4) + REC_EXT_OFF, fstart + 1);
                fix_rec(i, 4)
            },
            |e| matches!(e, MountError::SharedBlock { a: 3, b: 4, .. }),
        ),
        (
            "one inode overlaps itself",
            |i| {
                let o = rec(3) + REC_EXT_OFF;
                let start = get64(i, o);
                i[rec(3) + 2] = 2;
                put32(i, o + 8, 1);
                put64(i, o + EXT_SIZE, start);
                put32(i, o + EXT_SIZE + 8, 1);
                fix_rec(i, 3)
            },
            |e| matches!(e, MountError::SharedBlock { a: 3, b: 3, .. }),
        ),
        (
            "size beyond allocation",
            |i| set_rec64(i, 3, 32, 8193),
            |e| {
                *e == MountError::SizeBeyondAllocation {
                    ino: 3,
                    size: 8193,
                    allocated: 8192,
                }
            },
        ),
    ]);
}

/// The root, and parents that are missing, files or cycles.
#[test]
fn damaged_roots_and_parents_are_refused() {
    assert_refused(vec![
        (
            "root free",
            |i| i[rec(1)..rec(2)].fill(0),
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "root is a file",
            |i| {
                i[rec(1)] = 1;
                fix_rec(i, 1)
            },
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "root parent",
            |i| set_rec64(i, 1, 16, 2),
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "root named",
            |i| {
                i[rec(1) + 1] = 1;
                i[rec(1) + REC_NAME_OFF] = b'r';
                fix_rec(i, 1)
            },
            |e| matches!(e, MountError::BadRoot { .. }),
        ),
        (
            "parent zero",
            |i| set_rec64(i, 4, 16, 0),
            |e| {
                *e == MountError::BadParent {
                    ino: 4,
                    parent: 0,
                    problem: ParentProblem::OutOfRange,
                }
            },
        ),
        (
            "parent out of range",
            |i| set_rec64(i, 4, 16, 77),
            |e| {
                *e == MountError::BadParent {
                    ino: 4,
                    parent: 77,
                    problem: ParentProblem::OutOfRange,
                }
            },
        ),
        (
            "parent free",
            |i| set_rec64(i, 4, 16, 9),
            |e| {
                *e == MountError::BadParent {
                    ino: 4,
                    parent: 9,
                    problem: ParentProblem::Free,
                }
            },
        ),
        (
            "parent is a file",
            |i| set_rec64(i, 5, 16, 4),
            |e| {
                *e == MountError::BadParent {
                    ino: 5,
                    parent: 4,
                    problem: ParentProblem::NotDir,
                }
            },
        ),
        (
            "parent cycle",
            |i| set_rec64(i, 2, 16, 5),
            |e| {
                // /a's parent := /a/b, which is younger than /a.
                matches!(
                    e,
                    MountError::BadParent {
                        ino: 2,
                        parent: 5,
                        problem: ParentProblem::NotOlder { .. }
                    }
                )
            },
        ),
        (
            "own parent",
            |i| set_rec64(i, 5, 16, 5),
            |e| {
                matches!(
                    e,
                    MountError::BadParent {
                        ino: 5,
                        parent: 5,
                        problem: ParentProblem::NotOlder { .. }
                    }
                )
            },
        ),
    ]);
}

/// Sequence numbers out of order and duplicate names.
#[test]
fn damaged_namespaces_are_refused() {
    assert_refused(vec![
        (
            "seq order",
            |i| {
                let s = get64(i, rec(3) + 24);
                set_rec64(i, 2, 24, s)
            },
            |e| {
                matches!(
                    e,
                    MountError::BadParent {
                        ino: 3,
                        parent: 2,
                        problem: ParentProblem::NotOlder { .. }
                    }
                )
            },
        ),
        (
            "duplicate names",
            |i| {
                i[rec(5) + REC_NAME_OFF] = b'f';
                fix_rec(i, 5)
            },
            |e| {
                *e == MountError::DuplicateName {
                    dir: 2,
                    name: "f".to_string(),
                    first: 3,
                    second: 5,
                }
            },
        ),
    ]);
}
