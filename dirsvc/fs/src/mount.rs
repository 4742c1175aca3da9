//! Cross-record validation: the single pass that mount runs over the cached
//! inode table, and that also rebuilds the derived in-memory state (the
//! directory index and the free-block map), which is never stored.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

use super::disk::{Inode, Superblock};
use super::error::{MountError, ParentProblem};
use super::freemap::FreeMap;
use super::ROOT_INO;
use fabric::proto::FileKind;

/// The entries of one directory, indexed both ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirIndex {
    /// Name -> inode.
    pub by_name: BTreeMap<String, u64>,
    /// Inodes in ascending order: the readdir order (cookie = inode).
    pub by_ino: BTreeSet<u64>,
}

/// State derived from the inode table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    /// Every directory's entries.
    pub dirs: BTreeMap<u64, DirIndex>,
    /// Used data blocks.
    pub free: FreeMap,
    /// Highest creation sequence number in use (not raised to the
    /// superblock's floor: the caller decides).
    pub max_seq: u64,
    /// Inodes in use.
    pub used: u64,
}

/// Check every cross-record rule of the format and build the derived state.
/// Records have already been checked one by one
/// ([`super::disk::decode_record`]): checksum, kind, name, extent bounds.
pub fn validate(sb: &Superblock, table: &[Option<Box<Inode>>]) -> Result<Derived, MountError> {
    let get = |ino: u64| -> Option<&Inode> {
        let i = usize::try_from(ino.checked_sub(1)?).ok()?;
        table.get(i)?.as_deref()
    };
    check_root(get(ROOT_INO))?;
    let mut dirs: BTreeMap<u64, DirIndex> = BTreeMap::new();
    let mut extents: Vec<(u64, u64, u64)> = Vec::new();
    let mut max_seq = 0u64;
    let mut used = 0u64;
    for (i, slot) in table.iter().enumerate() {
        let Some(n) = slot.as_deref() else { continue };
        let ino = i as u64 + 1;
        used += 1;
        // The floor bounds every sequence number ever handed out, so a
        // mount can continue above it without knowing the removed ones.
        if n.seq >= sb.seq_floor {
            return Err(MountError::SeqNotBelowFloor {
                ino,
                seq: n.seq,
                floor: sb.seq_floor,
            });
        }
        max_seq = max_seq.max(n.seq);
        if n.kind == FileKind::Dir {
            dirs.entry(ino).or_default();
        }
        for e in &n.extents {
            extents.push((e.start, e.end().unwrap_or(u64::MAX), ino));
        }
        if ino == ROOT_INO {
            continue;
        }
        check_parent(ino, n, table.len() as u64, &get)?;
        let d = dirs.entry(n.parent).or_default();
        if let Some(&first) = d.by_name.get(n.name.as_str()) {
            return Err(MountError::DuplicateName {
                dir: n.parent,
                name: n.name.clone(),
                first,
                second: ino,
            });
        }
        d.by_name.insert(n.name.clone(), ino);
        d.by_ino.insert(ino);
    }
    let free = allocated_blocks(sb, &mut extents)?;
    Ok(Derived {
        dirs,
        free,
        max_seq,
        used,
    })
}

/// The root: a directory in use, its own parent, without a name.
fn check_root(root: Option<&Inode>) -> Result<(), MountError> {
    let root = root.ok_or(MountError::BadRoot { what: "not in use" })?;
    let what = if root.kind != FileKind::Dir {
        "not a directory"
    } else if root.parent != ROOT_INO {
        "its parent is not itself"
    } else if !root.name.is_empty() {
        "it has a name"
    } else {
        return Ok(());
    };
    Err(MountError::BadRoot { what })
}

/// Inode `ino`'s parent (of `inodes` slots) is an older directory in use.
fn check_parent<'t>(
    ino: u64,
    n: &Inode,
    inodes: u64,
    get: &impl Fn(u64) -> Option<&'t Inode>,
) -> Result<(), MountError> {
    let bad = |problem| MountError::BadParent {
        ino,
        parent: n.parent,
        problem,
    };
    if n.parent < 1 || n.parent > inodes {
        return Err(bad(ParentProblem::OutOfRange));
    }
    let p = get(n.parent).ok_or(bad(ParentProblem::Free))?;
    if p.kind != FileKind::Dir {
        return Err(bad(ParentProblem::NotDir));
    }
    // Parents are strictly older: following parent links strictly
    // decreases the sequence number, so it must end, and the only inode
    // allowed to be its own parent is the root.
    if p.seq >= n.seq {
        return Err(bad(ParentProblem::NotOlder {
            parent_seq: p.seq,
            seq: n.seq,
        }));
    }
    Ok(())
}

/// The free map of the data area given every extent `(start, end,
/// owner)`, after checking that no block belongs to two extents.
fn allocated_blocks(
    sb: &Superblock,
    extents: &mut [(u64, u64, u64)],
) -> Result<FreeMap, MountError> {
    extents.sort_unstable();
    let mut reach: Option<(u64, u64)> = None; // (end, owner) of the furthest extent so far
    for &(start, end, ino) in extents.iter() {
        if let Some((r_end, r_ino)) = reach {
            if start < r_end {
                return Err(MountError::SharedBlock {
                    a: r_ino.min(ino),
                    b: r_ino.max(ino),
                    block: start,
                });
            }
        }
        if reach.is_none_or(|(r_end, _)| end > r_end) {
            reach = Some((end, ino));
        }
    }
    let mut free = FreeMap::new(sb.data_start, sb.data_end - sb.data_start);
    for &(start, end, _) in extents.iter() {
        free.set(start, end - start, true);
    }
    Ok(free)
}
