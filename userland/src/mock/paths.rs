//! [`MockOs`]'s paths: validation (as the kernel's VFS checks them),
//! parents, children and attributes in the flat path map.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::{MockOs, Node};
use crate::os::{Attr, Errno, FileKind};
use fabric::proto::MAX_NAME;

impl MockOs {
    /// Validate a path the shell passed in and record it.
    pub(super) fn validate(&mut self, path: &str) -> Result<(), Errno> {
        self.paths.push(path.to_string());
        if !path.starts_with('/') {
            return Err(Errno::Invalid);
        }
        if path == "/" {
            return Ok(());
        }
        for c in path[1..].split('/') {
            if c.is_empty() || c == "." || c == ".." {
                return Err(Errno::Invalid);
            }
            if c.len() > MAX_NAME {
                return Err(Errno::NameTooLong);
            }
        }
        Ok(())
    }

    pub(super) fn parent(path: &str) -> &str {
        match path.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &path[..i],
        }
    }

    /// Why `path` does not exist: a file on the way, or just missing.
    pub(super) fn missing(&self, path: &str) -> Errno {
        let mut p = Self::parent(path);
        loop {
            if let Some(n) = self.nodes.get(p) {
                return if n.kind == FileKind::Dir {
                    Errno::NotFound
                } else {
                    Errno::NotDir
                };
            }
            if p == "/" {
                return Errno::NotFound;
            }
            p = Self::parent(p);
        }
    }

    /// The parent of `path` must be an existing directory.
    pub(super) fn check_parent(&self, path: &str) -> Result<(), Errno> {
        let p = Self::parent(path);
        match self.nodes.get(p) {
            Some(n) if n.kind == FileKind::Dir => Ok(()),
            Some(_) => Err(Errno::NotDir),
            None => Err(self.missing(p)),
        }
    }

    pub(super) fn children(&self, dir: &str) -> Vec<(&String, &Node)> {
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            alloc::format!("{dir}/")
        };
        self.nodes
            .iter()
            .filter(|(k, _)| {
                k.len() > prefix.len() && k.starts_with(&prefix) && !k[prefix.len()..].contains('/')
            })
            .collect()
    }

    pub(super) fn attr(&self, n: &Node, path: &str) -> Attr {
        let size = match n.kind {
            FileKind::File => n.data.len() as u64,
            FileKind::Dir => self.children(path).len() as u64,
        };
        Attr {
            ino: n.ino,
            kind: n.kind,
            size,
            version: n.version,
        }
    }

    pub(super) fn touch_parent(&mut self, path: &str) {
        if let Some(p) = self.nodes.get_mut(Self::parent(path)) {
            p.version += 1;
        }
    }
}
