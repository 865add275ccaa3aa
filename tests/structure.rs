//! The shape ARCHITECTURE.md promises, read from the sources: no file under `host/` past
//! 900 lines, and inside each crate no module importing one that imports it (directly
//! or round a longer loop), so that every room can be read knowing only those before it.
//!
//! Imports are read as text: `crate::a::b`, `super::x` and a parent's `child::` paths,
//! outside `#[cfg(test)] mod tests`. Enough to keep the rule; not a Rust parser.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 900;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_file_in_host_is_longer_than_the_limit() {
    let mut files = Vec::new();
    rust_files(&root().join("host"), &mut files);
    assert!(files.len() > 50, "found only {} files under host/", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

/// A crate's modules by path (`a::b`; the crate root is ``), with their source.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> =
                relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                parts.pop();
            }
            (parts.join("::"), std::fs::read_to_string(&file).unwrap())
        })
        .collect()
}

/// Paths that follow `prefix` in `text`: `crate::a::b::C` gives `["a", "b", "C"]`.
fn paths_after<'t>(text: &'t str, prefix: &'t str) -> impl Iterator<Item = Vec<&'t str>> + 't {
    text.match_indices(prefix)
        .filter(move |(at, _)| {
            // A whole word: not `mycrate::` or `a::crate::`.
            !text[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
        })
        .map(move |(at, _)| {
            let rest = &text[at + prefix.len()..];
            let end =
                rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            rest[..end].split("::").filter(|p| !p.is_empty()).collect()
        })
}

/// The module a path names: its longest prefix that is a module.
fn module_of(mods: &BTreeMap<String, String>, base: &[&str], path: &[&str]) -> Option<String> {
    let full: Vec<&str> = base.iter().chain(path).copied().collect();
    (1..=full.len()).rev().map(|k| full[..k].join("::")).find(|m| mods.contains_key(m))
}

fn imports(mods: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in mods {
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let parts: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
        let parent = &parts[..parts.len().saturating_sub(1)];
        let mut to = BTreeSet::new();
        to.extend(paths_after(text, "crate::").filter_map(|p| module_of(mods, &[], &p)));
        to.extend(paths_after(text, "super::").filter_map(|p| module_of(mods, parent, &p)));
        // A parent naming its own child (`use child::Thing`, `child::f()`).
        for child in mods.keys() {
            let name = if module.is_empty() {
                Some(child.as_str())
            } else {
                child.strip_prefix(&format!("{module}::"))
            };
            let Some(name) = name else { continue };
            if name.contains("::") || name.is_empty() {
                continue;
            }
            if paths_after(text, &format!("{name}::")).next().is_some() {
                to.insert(child.clone());
            }
        }
        to.remove(module);
        edges.insert(module.clone(), to);
    }
    edges
}

/// A loop of imports, if there is one.
fn find_loop(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let mut crates = 0;
    for entry in std::fs::read_dir(root().join("host")).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let mods = modules(&src);
        if let Some(cycle) = find_loop(&imports(&mods)) {
            panic!("{}: modules import each other: {}", src.display(), cycle.join(" -> "));
        }
    }
    assert!(crates >= 9, "found {crates} crates under host/");
}

#[test]
fn the_check_sees_a_loop_when_there_is_one() {
    let mods: BTreeMap<String, String> = [
        (String::new(), "mod a;\nmod b;\nmod c;\n".to_owned()),
        ("a".to_owned(), "use crate::b::Thing;\n".to_owned()),
        ("b".to_owned(), "use super::c::Other;\n".to_owned()),
        ("c".to_owned(), "fn f() { crate::a::g() }\n".to_owned()),
    ]
    .into();
    let cycle = find_loop(&imports(&mods)).expect("a -> b -> c -> a is a loop");
    assert_eq!(cycle.len(), 4);
    let mut fixed = mods.clone();
    fixed.insert("c".to_owned(), "#[cfg(test)]\nmod tests { use crate::a::g; }\n".to_owned());
    assert_eq!(find_loop(&imports(&fixed)), None, "a test module's imports do not count");
    let parent: BTreeMap<String, String> = [
        (String::new(), "mod p;\n".to_owned()),
        ("p".to_owned(), "mod q;\npub use q::Q;\n".to_owned()),
        ("p::q".to_owned(), "use super::Shared;\n".to_owned()),
    ]
    .into();
    assert!(find_loop(&imports(&parent)).is_some(), "a parent and a child importing each other");
}
