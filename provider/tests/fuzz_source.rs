//! Generated-input harness (bolero) for the provider's source snapshot: the
//! same tree, written in any order, with any mtimes and group/other
//! permission bits, with extra empty directories and ignored files, gives the
//! same `code_hash` and the same zip bytes; a change of content or of the
//! owner's executable bit changes the hash.
//!
//! Under `cargo test` the harness replays its corpus
//! (`tests/__fuzz__/<harness>/corpus`) and then runs random trees for a few
//! seconds (`BOLERO_RANDOM_TEST_TIME_MS` sets another budget). See
//! docs/reliability.md.

use bolero::check;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};
use terraform_provider_sless::source::Snapshot;

#[path = "../../wire/tests/fuzz_support/mod.rs"]
mod fuzz_support;
use fuzz_support::{TEST_TIME, Tally};

/// Path components: ordinary names, names the default ignore rules drop
/// (`.git/`, `__pycache__/`, `node_modules/`, `*.pyc`, `.DS_Store`), and odd ones.
const COMPONENTS: &[&str] = &[
    "a",
    "b",
    "src",
    "main.py",
    "index.js",
    "é",
    "x y",
    "lib",
    ".env",
    "README",
    "node_modules",
    "__pycache__",
    "m.pyc",
    ".git",
    ".DS_Store",
    ".terraform",
    "-",
    "a.b.c",
];

/// Whether the default ignore rules drop `path` (a model of them).
fn ignored(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let (file, dirs) = parts.split_last().expect("a non-empty path");
    let dir_ignored = dirs.iter().any(|d| {
        matches!(
            *d,
            ".git" | "__pycache__" | "node_modules" | ".terraform" | ".DS_Store"
        ) || d.ends_with(".pyc")
    });
    dir_ignored || *file == ".DS_Store" || file.ends_with(".pyc")
}

/// One file: relative path → (executable, content).
type Tree = BTreeMap<String, (bool, Vec<u8>)>;

/// A tree from generated entries, dropping paths that clash with an earlier
/// one (a file where a directory must be, or the reverse).
fn tree(entries: &[(Vec<u8>, bool, Vec<u8>)]) -> Tree {
    let mut t = Tree::new();
    for (parts, exec, content) in entries.iter().take(16) {
        if parts.is_empty() {
            continue;
        }
        let path: Vec<&str> = parts
            .iter()
            .take(4)
            .map(|p| COMPONENTS[*p as usize % COMPONENTS.len()])
            .collect();
        let path = path.join("/");
        let clashes = t.keys().any(|k| {
            k == &path || k.starts_with(&format!("{path}/")) || path.starts_with(&format!("{k}/"))
        });
        if !clashes {
            t.insert(path, (*exec, content.iter().copied().take(512).collect()));
        }
    }
    t
}

/// How a copy of the tree is written.
struct Variant {
    reverse: bool,
    /// Group/other permission bits (the owner's bits are the tree's).
    other_bits: u32,
    mtime: SystemTime,
    /// An empty directory and an ignored file are added.
    extras: bool,
}

fn write(root: &Path, t: &Tree, v: &Variant) {
    let mut items: Vec<_> = t.iter().collect();
    if v.reverse {
        items.reverse();
    }
    for (path, (exec, content)) in items {
        let p = root.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, content).expect("write");
        let owner = if *exec { 0o700 } else { 0o600 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(owner | v.other_bits))
            .expect("chmod");
        let f = std::fs::File::options().write(true).open(&p).expect("open");
        f.set_modified(v.mtime).expect("mtime");
    }
    if v.extras {
        // Where the tree has no such name already.
        if !root.join("empty").exists() {
            std::fs::create_dir_all(root.join("empty/dir")).expect("mkdir");
        }
        if !root.join("__pycache__").exists() {
            std::fs::create_dir_all(root.join("__pycache__")).expect("mkdir");
            std::fs::write(root.join("__pycache__/main.cpython-311.pyc"), b"\x00junk")
                .expect("pyc");
        }
        if !root.join(".DS_Store").exists() {
            std::fs::write(root.join(".DS_Store"), b"finder").expect("ds_store");
        }
    }
}

#[test]
fn snapshot_is_independent_of_order_mtime_and_umask() {
    let tally = Tally::new("snapshot_is_independent_of_order_mtime_and_umask");
    check!()
        .with_type::<(Vec<(Vec<u8>, bool, Vec<u8>)>, u8, u32)>()
        .with_test_time(TEST_TIME)
        .for_each(|(entries, bits, secs)| {
            let t = tree(entries);
            let kept: Tree = t
                .iter()
                .filter(|(p, _)| !ignored(p))
                .map(|(p, v)| (p.clone(), v.clone()))
                .collect();
            let a = tempfile::tempdir().expect("tempdir");
            let b = tempfile::tempdir().expect("tempdir");
            write(
                a.path(),
                &t,
                &Variant {
                    reverse: false,
                    other_bits: 0o044,
                    mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000),
                    extras: false,
                },
            );
            write(
                b.path(),
                &t,
                &Variant {
                    reverse: true,
                    other_bits: u32::from(*bits) & 0o077,
                    mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(*secs)),
                    extras: true,
                },
            );
            let sa = Snapshot::read(a.path());
            let sb = Snapshot::read(b.path());
            tally.count(!kept.is_empty());
            if kept.is_empty() {
                assert!(sa.is_err(), "{t:?}: an empty snapshot is an error");
                return;
            }
            let sa = sa.unwrap_or_else(|e| panic!("{t:?}: {e}"));
            let sb = sb.unwrap_or_else(|e| panic!("{t:?}: {e}"));
            // Exactly the files the rules keep, in byte order of their path.
            let got: Tree = sa
                .files
                .iter()
                .map(|f| (f.path.clone(), (f.executable, f.content.clone())))
                .collect();
            assert_eq!(
                got, kept,
                "the snapshot is not the tree less the ignored files"
            );
            let paths: Vec<&[u8]> = sa.files.iter().map(|f| f.path.as_bytes()).collect();
            assert!(
                paths.windows(2).all(|w| w[0] < w[1]),
                "not sorted: {paths:?}"
            );
            assert_eq!(
                sa.hash(),
                sb.hash(),
                "{t:?}: the hash depends on how it was written"
            );
            let za = sa.zip().expect("zip a");
            assert_eq!(za, sb.zip().expect("zip b"), "{t:?}: the zip bytes differ");

            // A change of one byte or of one executable bit changes the hash.
            let (path, (exec, content)) = kept.iter().next().expect("a file");
            let p = b.path().join(path);
            let mut changed = content.clone();
            match changed.first_mut() {
                Some(c) => *c = c.wrapping_add(1),
                None => changed.push(0),
            }
            std::fs::write(&p, &changed).expect("rewrite");
            let sc = Snapshot::read(b.path()).expect("read after a content change");
            assert_ne!(
                sc.hash(),
                sa.hash(),
                "{path}: a content change kept the hash"
            );
            let mode = if *exec { 0o644 } else { 0o744 };
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let sd = Snapshot::read(b.path()).expect("read after a mode change");
            assert_ne!(
                sd.hash(),
                sc.hash(),
                "{path}: an exec bit change kept the hash"
            );
        });
}
