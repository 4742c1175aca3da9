//! Which files of a crate import each other: a cycle between two files
//! (neither the other's parent module) means neither can be read, tested
//! or moved alone. `tests/tests/docs.rs` runs it over every crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use regex::Regex;

/// The module path of `file` in the crate whose `src/` is `src`:
/// `a/b.rs` and `a/b/mod.rs` are `a::b`, `lib.rs` and `main.rs` the root;
/// `None` under `src/bin/` (crates of their own).
pub fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut m: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if m.first().map(String::as_str) == Some("bin") {
        return None;
    }
    if m == ["lib"] || m == ["main"] {
        m.clear();
    }
    if m.last().map(String::as_str) == Some("mod") {
        m.pop();
    }
    Some(m)
}

/// The paths of a `use` tree (`a::{b, c::{d, e}}` is `a::b`, `a::c::d`,
/// `a::c::e`), without `as` renames and whitespace.
fn use_tree(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let (mut depth, mut start) = (0, 0);
    let mut parts = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tree[start..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        let mut path = prefix.to_vec();
        match (part.find('{'), part.rfind('}')) {
            (Some(open), Some(close)) if open < close => {
                path.extend(
                    part[..open]
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(String::from),
                );
                use_tree(&path, &part[open + 1..close], out);
            }
            _ => {
                path.extend(part.split("::").filter(|s| !s.is_empty()).map(String::from));
                out.push(path);
            }
        }
    }
}

/// Every module path the code of module `m` names (its `use` trees and
/// the `a::b` paths in its code, comments left out), resolved against
/// the crate's file modules: `crate::`, `super::`, `self::` and a child
/// module's name are followed; anything else (another crate, `core`) is
/// not this crate's.
fn module_refs(m: &[String], text: &str, modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let code: String = text
        .lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n");
    let uses = Regex::new(r"\buse\s+([^;]*);").unwrap();
    let rename = Regex::new(r"\s+as\s+\w+").unwrap();
    let mut paths = Vec::new();
    for c in uses.captures_iter(&code) {
        let tree: String = rename.replace_all(&c[1], "").split_whitespace().collect();
        use_tree(&[], &tree, &mut paths);
    }
    let rest = uses.replace_all(&code, "");
    let inline = Regex::new(r"(?:^|[^\w:])((?:\w+::)+\w+)").unwrap();
    for c in inline.captures_iter(&rest) {
        paths.push(c[1].split("::").map(String::from).collect());
    }
    let mut out = BTreeSet::new();
    for p in paths {
        let mut base = m.to_vec();
        let mut rest = p.as_slice();
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("super") | Some("self") => {
                while let Some(first) = rest.first() {
                    match first.as_str() {
                        "super" => {
                            base.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            Some(child) => {
                let mut c = m.to_vec();
                c.push(child.to_string());
                if !modules.contains(&c) {
                    continue;
                }
            }
            None => continue,
        }
        base.extend(rest.iter().cloned());
        // The file module the path lands in: its longest known prefix.
        while !base.is_empty() && !modules.contains(&base) {
            base.pop();
        }
        if base != m {
            out.insert(base);
        }
    }
    out
}

/// Pairs of modules of one crate (module path -> source) that name each
/// other, one not being the other's ancestor (a parent declares its
/// children, and they may use what it shares).
pub fn import_cycles(files: &BTreeMap<Vec<String>, String>) -> Vec<(Vec<String>, Vec<String>)> {
    let modules: BTreeSet<Vec<String>> = files.keys().cloned().collect();
    let refs: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> = files
        .iter()
        .map(|(m, text)| (m, module_refs(m, text, &modules)))
        .collect();
    let mut out = Vec::new();
    for (a, to) in &refs {
        for b in to {
            let related = a.starts_with(b) || b.starts_with(a);
            if *a < b && !related && refs.get(b).is_some_and(|r| r.contains(*a)) {
                out.push(((*a).clone(), b.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_cycles_are_found() {
        let files: BTreeMap<Vec<String>, String> = [
            (vec![], "mod os;\nmod meta;\nuse os::Os;\n".to_string()),
            (
                vec!["os".to_string()],
                "use crate::meta::{self, Call};\n".to_string(),
            ),
            (
                vec!["meta".to_string()],
                "// crate::os::Os in a comment\nfn f() { super::os::run() }\n".to_string(),
            ),
            (
                vec!["ok".to_string()],
                "use crate::{os::Os, meta as m};\n".to_string(),
            ),
        ]
        .into_iter()
        .collect();
        let found = import_cycles(&files);
        assert_eq!(found, [(vec!["meta".to_string()], vec!["os".to_string()])]);
        let mut files = files;
        files.insert(vec!["meta".to_string()], "// crate::os::Os\n".to_string());
        assert!(import_cycles(&files).is_empty());
    }
}
