//! Randomized operations checked against a simple model.

use super::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum MNode {
    Dir { version: u64 },
    File { data: Vec<u8>, version: u64 },
}

/// The reference model: a map from path to node.
struct Model {
    nodes: BTreeMap<String, MNode>,
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

impl Model {
    fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert("/".into(), MNode::Dir { version: 1 });
        Model { nodes }
    }

    /// Resolve like the file system: errors for missing or file ancestors.
    fn check_parent(&self, path: &str) -> Result<(), Errno> {
        let mut cur = String::new();
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for c in &comps[..comps.len().saturating_sub(1)] {
            cur.push('/');
            cur.push_str(c);
            match self.nodes.get(&cur) {
                None => return Err(Errno::NotFound),
                Some(MNode::File { .. }) => return Err(Errno::NotDir),
                Some(MNode::Dir { .. }) => {}
            }
        }
        Ok(())
    }

    fn bump_parent(&mut self, path: &str) {
        if let Some(MNode::Dir { version }) = self.nodes.get_mut(parent_of(path)) {
            *version += 1;
        }
    }

    fn children(&self, dir: &str) -> Vec<String> {
        self.nodes
            .keys()
            .filter(|p| p.as_str() != "/" && parent_of(p) == dir)
            .cloned()
            .collect()
    }

    fn attr(&self, path: &str) -> (FileKind, u64, u64) {
        match &self.nodes[path] {
            MNode::Dir { version } => (FileKind::Dir, self.children(path).len() as u64, *version),
            MNode::File { data, version } => (FileKind::File, data.len() as u64, *version),
        }
    }

    fn used_blocks(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| match n {
                MNode::File { data, .. } => (data.len() as u64).div_ceil(BS),
                MNode::Dir { .. } => 0,
            })
            .sum()
    }
}

fn kind_size_version(a: Attr) -> (FileKind, u64, u64) {
    (a.kind, a.size, a.version)
}

fn run_model(seed: u64, steps: usize, blocks: u64, inodes: u32) -> usize {
    let mut r = Rng::new(seed);
    let mut fs = fresh(blocks, inodes);
    let mut m = Model::new();
    let names = ["a", "b", "c", "d"];
    let mut nospace = 0;
    for step in 0..steps {
        let depth = 1 + r.below(3) as usize;
        let path: String = (0..depth).map(|_| format!("/{}", r.pick(&names))).collect();
        let ctx = format!("seed {seed} step {step} path {path}");
        let op = r.below(100);
        match op {
            0..=14 => {
                let excl = r.below(2) == 0;
                let got = fs.create(&path, excl);
                let want = m
                    .check_parent(&path)
                    .and_then(|()| match m.nodes.get(&path) {
                        Some(MNode::Dir { .. }) if excl => Err(Errno::Exists),
                        Some(MNode::Dir { .. }) => Err(Errno::IsDir),
                        Some(MNode::File { .. }) if excl => Err(Errno::Exists),
                        _ => Ok(()),
                    });
                match (got, want) {
                    (Err(Errno::NoSpace), Ok(())) if !m.nodes.contains_key(&path) => nospace += 1,
                    (Ok(a), Ok(())) => {
                        if !m.nodes.contains_key(&path) {
                            // A new inode: its first version is derived
                            // from its creation sequence number.
                            assert_eq!(a.version, first_version(&fs, a.ino), "{ctx}");
                            m.nodes.insert(
                                path.clone(),
                                MNode::File {
                                    data: Vec::new(),
                                    version: a.version,
                                },
                            );
                            m.bump_parent(&path);
                        }
                        assert_eq!(kind_size_version(a), m.attr(&path), "{ctx}");
                    }
                    (g, w) => assert_eq!(g.map(|_| ()), w, "{ctx}"),
                }
            }
            15..=22 => {
                let got = fs.mkdir(&path);
                let want = m.check_parent(&path).and_then(|()| {
                    if m.nodes.contains_key(&path) {
                        Err(Errno::Exists)
                    } else {
                        Ok(())
                    }
                });
                match (got, want) {
                    (Err(Errno::NoSpace), Ok(())) => nospace += 1,
                    (Ok(a), Ok(())) => {
                        assert_eq!(a.version, first_version(&fs, a.ino), "{ctx}");
                        m.nodes
                            .insert(path.clone(), MNode::Dir { version: a.version });
                        m.bump_parent(&path);
                        assert_eq!(kind_size_version(a), m.attr(&path), "{ctx}");
                    }
                    (g, w) => assert_eq!(g.map(|_| ()), w, "{ctx}"),
                }
            }
            23..=30 => {
                let got = fs.unlink(&path);
                let want = m
                    .check_parent(&path)
                    .and_then(|()| match m.nodes.get(&path) {
                        None => Err(Errno::NotFound),
                        Some(MNode::Dir { .. }) => Err(Errno::IsDir),
                        Some(MNode::File { .. }) => Ok(()),
                    });
                assert_eq!(got, want, "{ctx}");
                if got.is_ok() {
                    m.nodes.remove(&path);
                    m.bump_parent(&path);
                }
            }
            31..=36 => {
                let got = fs.rmdir(&path);
                let want = m
                    .check_parent(&path)
                    .and_then(|()| match m.nodes.get(&path) {
                        None => Err(Errno::NotFound),
                        Some(MNode::File { .. }) => Err(Errno::NotDir),
                        Some(MNode::Dir { .. }) if !m.children(&path).is_empty() => {
                            Err(Errno::NotEmpty)
                        }
                        Some(MNode::Dir { .. }) => Ok(()),
                    });
                assert_eq!(got, want, "{ctx}");
                if got.is_ok() {
                    m.nodes.remove(&path);
                    m.bump_parent(&path);
                }
            }
            37..=64 => {
                // Write to an existing file, if any.
                let files: Vec<String> = m
                    .nodes
                    .iter()
                    .filter(|(_, n)| matches!(n, MNode::File { .. }))
                    .map(|(p, _)| p.clone())
                    .collect();
                if files.is_empty() {
                    continue;
                }
                let p = r.pick(&files).clone();
                let ino = fs.lookup(&p).unwrap().ino;
                let size = m.attr(&p).1;
                let off = r.below(size + 2 * BS);
                let len = r.below(2 * BS + 1) as usize;
                let data = r.bytes(len);
                match fs.write(ino, off, &data) {
                    Err(Errno::NoSpace) => nospace += 1,
                    Err(e) => panic!("{ctx}: write {e:?}"),
                    Ok((n, a)) => {
                        assert_eq!(n, len);
                        if let Some(MNode::File { data: d, version }) = m.nodes.get_mut(&p) {
                            if len > 0 {
                                let end = off as usize + len;
                                if d.len() < end {
                                    d.resize(end, 0);
                                }
                                d[off as usize..end].copy_from_slice(&data);
                                *version += 1;
                            }
                        }
                        assert_eq!(kind_size_version(a), m.attr(&p), "{ctx}");
                    }
                }
            }
            65..=74 => {
                let files: Vec<String> = m
                    .nodes
                    .iter()
                    .filter(|(_, n)| matches!(n, MNode::File { .. }))
                    .map(|(p, _)| p.clone())
                    .collect();
                if files.is_empty() {
                    continue;
                }
                let p = r.pick(&files).clone();
                let ino = fs.lookup(&p).unwrap().ino;
                let size = m.attr(&p).1;
                let new = r.below(size + 3 * BS);
                match fs.set_size(ino, new) {
                    Err(Errno::NoSpace) => nospace += 1,
                    Err(e) => panic!("{ctx}: set_size {e:?}"),
                    Ok(a) => {
                        if let Some(MNode::File { data: d, version }) = m.nodes.get_mut(&p) {
                            if d.len() as u64 != new {
                                d.resize(new as usize, 0);
                                *version += 1;
                            }
                        }
                        assert_eq!(kind_size_version(a), m.attr(&p), "{ctx}");
                    }
                }
            }
            75..=84 => {
                let got = fs.lookup(&path);
                let want = m.check_parent(&path).and_then(|()| {
                    if m.nodes.contains_key(&path) {
                        Ok(m.attr(&path))
                    } else {
                        Err(Errno::NotFound)
                    }
                });
                assert_eq!(got.map(kind_size_version), want, "{ctx}");
            }
            85..=96 => {
                // Compare a directory listing and file contents.
                let dirs: Vec<String> = m
                    .nodes
                    .iter()
                    .filter(|(_, n)| matches!(n, MNode::Dir { .. }))
                    .map(|(p, _)| p.clone())
                    .collect();
                let d = r.pick(&dirs).clone();
                let ino = fs.lookup(&d).unwrap().ino;
                let (es, next) = fs.readdir(ino, 0, 100).unwrap();
                assert_eq!(next, 0);
                let mut got: Vec<(String, (FileKind, u64, u64))> = es
                    .iter()
                    .map(|e| (e.name.clone(), kind_size_version(e.attr)))
                    .collect();
                got.sort_by(|x, y| x.0.cmp(&y.0));
                let want: Vec<(String, (FileKind, u64, u64))> = m
                    .children(&d)
                    .iter()
                    .map(|c| (c.rsplit('/').next().unwrap().to_string(), m.attr(c)))
                    .collect();
                assert_eq!(got, want, "{ctx}");
                for e in es {
                    if e.attr.kind == FileKind::File {
                        let p = if d == "/" {
                            format!("/{}", e.name)
                        } else {
                            format!("{d}/{}", e.name)
                        };
                        let MNode::File { data, .. } = &m.nodes[&p] else {
                            panic!("{ctx}: kind")
                        };
                        assert_eq!(&read_all(&mut fs, e.attr.ino), data, "{ctx}: {p}");
                    }
                }
            }
            _ => {
                fs = remount(fs);
            }
        }
        assert_eq!(fs.stats().blocks_used, m.used_blocks(), "{ctx}: leak");
        assert_eq!(fs.stats().inodes_used, m.nodes.len() as u64, "{ctx}");
    }
    // Final full comparison after a remount.
    let mut fs = remount(fs);
    assert_eq!(fs.check_data(), Ok(vec![]), "seed {seed}");
    let snap = snapshot(&mut fs);
    assert_eq!(snap.len(), m.nodes.len());
    for (p, a, data) in snap {
        assert_eq!(kind_size_version(a), m.attr(&p), "seed {seed}: {p}");
        if let (Some(d), MNode::File { data: want, .. }) = (data, &m.nodes[&p]) {
            assert_eq!(&d, want);
        }
    }
    nospace
}

#[test]
fn random_ops_match_the_model() {
    for seed in 0..12 {
        run_model(seed, 1000, 256, 64);
    }
}

#[test]
fn random_ops_match_the_model_when_tight() {
    // A small disk and few inodes: NoSpace happens often and must never
    // leave anything half done.
    let nospace: usize = (100..112).map(|seed| run_model(seed, 1000, 24, 16)).sum();
    assert!(nospace > 50, "{nospace}");
}
