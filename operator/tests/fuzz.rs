//! Generated-input harnesses (bolero) for the operator's parsers of outside
//! input: code zips (`codezip`) and bearer tokens / JWKS documents (`auth`).
//!
//! Under `cargo test` each harness replays its corpus
//! (`tests/__fuzz__/<harness>/corpus`) and then runs random inputs for a few
//! seconds (`BOLERO_RANDOM_TEST_TIME_MS` sets another budget); under
//! `cargo bolero test` the same harness is driven by libFuzzer. See
//! docs/reliability.md.
//!
//! Properties, beyond "no panic":
//! - extraction never creates anything outside its target directory and never
//!   creates a link; what it writes is exactly the zip's files, with their
//!   content and executable bit;
//! - `inspect` accepts exactly the archives whose names a model of the rules
//!   accepts, and an archive `inspect` accepts (honest sizes) extracts;
//! - a token that verifies carries the `sub` it was minted with: no mutation
//!   of a signed token verifies with another subject; a random JWKS never lets
//!   an unsigned or random token through.

use bolero::check;
use sless_operator::auth::{JwksSource, LocalKey, Verifier};
use sless_operator::codezip::{self, Limits, ZipError};
use std::collections::{BTreeMap, HashSet};
use std::io::{Cursor, Write};
use std::os::unix::fs::PermissionsExt;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::Duration;
use zip::write::SimpleFileOptions;

#[path = "../../wire/tests/fuzz_support/mod.rs"]
mod fuzz_support;
use fuzz_support::{TEST_TIME, Tally};

/// Small caps so that bombs are cheap to build and to refuse.
const LIMITS: Limits = Limits {
    max_entries: 16,
    max_unpacked_bytes: 64 * 1024,
};

/// Path components entry names are made of: ordinary, hostile and odd.
const COMPONENTS: &[&str] = &[
    "a",
    "b",
    "pkg",
    "main.py",
    "..",
    ".",
    "",
    "C:",
    "x\\y",
    "é",
    "a b",
    "\u{1}",
    "~",
    "...",
    "-",
    "node_modules",
    "index.js",
    ".hidden",
    "a:b",
    "\u{202e}txt",
];

/// One entry to write: its name, what it is, and its data.
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    kind: Kind,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Executable,
    Dir,
    Symlink,
}

fn spec(parts: &[u8], flags: u8, data: &[u8]) -> Spec {
    let mut name = String::new();
    if flags & 0x10 != 0 {
        name.push('/');
    }
    for (i, p) in parts.iter().take(4).enumerate() {
        if i > 0 {
            name.push('/');
        }
        name.push_str(COMPONENTS[*p as usize % COMPONENTS.len()]);
    }
    if flags & 0x20 != 0 {
        name.push('/');
    }
    let kind = match flags % 4 {
        0 => Kind::File,
        1 => Kind::Executable,
        2 => Kind::Dir,
        _ => Kind::Symlink,
    };
    // Bit 6: a compressible run (bomb-like) instead of the given bytes.
    let data = if flags & 0x40 != 0 {
        vec![0u8; 40 * 1024]
    } else {
        data.iter().copied().take(256).collect()
    };
    Spec { name, kind, data }
}

/// Writes the entries the zip writer accepts (it refuses exact duplicate names).
fn build_zip(specs: &[Spec]) -> (Vec<u8>, Vec<Spec>) {
    let mut written = Vec::new();
    let mut buf = Cursor::new(Vec::new());
    let mut w = zip::ZipWriter::new(&mut buf);
    for s in specs.iter().take(12) {
        let base =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        let ok = match s.kind {
            Kind::File | Kind::Executable => {
                let mode = if s.kind == Kind::Executable {
                    0o755
                } else {
                    0o644
                };
                w.start_file(s.name.as_str(), base.unix_permissions(mode))
                    .and_then(|()| w.write_all(&s.data).map_err(Into::into))
                    .is_ok()
            }
            Kind::Dir => w.add_directory(s.name.as_str(), base).is_ok(),
            Kind::Symlink => w
                .add_symlink(s.name.as_str(), "../../etc/passwd", base)
                .is_ok(),
        };
        if ok {
            written.push(s.clone());
        } else {
            // The writer refused it: start over without it.
            drop(w);
            return build_zip(
                &specs
                    .iter()
                    .take(12)
                    .filter(|x| x.name != s.name)
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
    }
    w.finish().expect("finish an in-memory zip");
    (buf.into_inner(), written)
}

/// The entry as the zip stores it (the writer adds `/` to directory names).
fn stored_name(s: &Spec) -> String {
    if s.kind == Kind::Dir && !s.name.ends_with('/') {
        format!("{}/", s.name)
    } else {
        s.name.clone()
    }
}

/// The rules of `codezip` for one name, written independently of it:
/// the path's components, or None when the name is refused.
fn model_components(name: &str) -> Option<Vec<String>> {
    if name.is_empty()
        || name.chars().any(char::is_control)
        || name.contains('\\')
        || name.contains(':')
        || name.starts_with('/')
    {
        return None;
    }
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    let parts: Vec<String> = trimmed.split('/').map(str::to_string).collect();
    if parts.iter().any(|p| p.is_empty() || p == "." || p == "..") {
        return None;
    }
    Some(parts)
}

/// Whether the zip stores `s` as a directory: a name ending in `/`, whatever
/// the writer was asked for (every reader goes by the name).
fn stored_as_dir(s: &Spec) -> bool {
    stored_name(s).ends_with('/')
}

/// Whether the model accepts the whole archive (sizes aside).
fn model_accepts(specs: &[Spec]) -> bool {
    let mut paths: HashSet<String> = HashSet::new();
    let mut files: HashSet<String> = HashSet::new();
    let mut dirs: HashSet<String> = HashSet::new();
    for s in specs {
        if s.kind == Kind::Symlink {
            return false;
        }
        let Some(parts) = model_components(&stored_name(s)) else {
            return false;
        };
        // A directory entry with content would lose it: refused.
        if stored_as_dir(s) && s.kind != Kind::Dir && !s.data.is_empty() {
            return false;
        }
        let path = parts.join("/");
        if !paths.insert(path.clone()) {
            return false;
        }
        // Every parent of an entry is a directory.
        for i in 1..parts.len() {
            dirs.insert(parts[..i].join("/"));
        }
        if stored_as_dir(s) {
            dirs.insert(path);
        } else {
            files.insert(path);
        }
    }
    // A path cannot be a file and a directory.
    files.is_disjoint(&dirs)
}

/// Everything under `root` (relative paths), asserting nothing is a link.
fn tree(root: &Path) -> BTreeMap<String, (bool, Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.expect("walk the extraction dir");
        let meta = std::fs::symlink_metadata(e.path()).expect("metadata");
        assert!(
            !meta.file_type().is_symlink(),
            "extraction created a link at {}",
            e.path().display()
        );
        let rel = e
            .path()
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .into_owned();
        let data = if meta.is_file() {
            std::fs::read(e.path()).expect("read")
        } else {
            Vec::new()
        };
        out.insert(
            rel,
            (meta.is_dir(), data, meta.permissions().mode() & 0o777),
        );
    }
    out
}

/// Extracts into `<tmp>/out` and checks that `<tmp>` holds nothing else afterwards.
fn extract_contained(zip: &[u8]) -> (Result<codezip::Extracted, ZipError>, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).expect("mkdir out");
    let result = codezip::extract_with(zip, &out, LIMITS);
    let siblings: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("read tmp")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        siblings,
        vec!["out"],
        "extraction wrote outside its target dir"
    );
    tree(&out); // no links anywhere
    (result, tmp)
}

#[test]
fn zip_entries_structured() {
    let tally = Tally::new("zip_entries_structured");
    check!()
        .with_type::<Vec<(Vec<u8>, u8, Vec<u8>)>>()
        .with_test_time(TEST_TIME)
        .for_each(|entries| {
            let specs: Vec<Spec> = entries.iter().map(|(p, f, d)| spec(p, *f, d)).collect();
            let (zip, specs) = build_zip(&specs);
            let names: Vec<String> = specs.iter().map(stored_name).collect();
            let declared: u64 = specs
                .iter()
                .filter(|s| !stored_as_dir(s))
                .map(|s| s.data.len() as u64)
                .sum();
            let inspected = codezip::inspect_with(&zip, LIMITS);
            tally.count(inspected.is_ok());
            let model = model_accepts(&specs) && declared <= LIMITS.max_unpacked_bytes;
            assert_eq!(
                inspected.is_ok(),
                model,
                "inspect {names:?}: {:?}, the rules say {}",
                inspected.as_ref().map_err(ToString::to_string),
                if model { "accept" } else { "refuse" }
            );
            let (extracted, tmp) = extract_contained(&zip);
            let out = tmp.path().join("out");
            match (&inspected, &extracted) {
                (Ok(_), Err(e)) => panic!("inspect accepts {names:?} but extract fails: {e}"),
                (Err(_), Ok(_)) => panic!("inspect refuses {names:?} but extract accepts it"),
                (Err(_), Err(_)) => {}
                (Ok(summary), Ok(done)) => {
                    let files: Vec<&Spec> = specs.iter().filter(|s| !stored_as_dir(s)).collect();
                    assert_eq!(summary.files, files.len(), "{names:?}");
                    assert_eq!(done.files, files.len(), "{names:?}");
                    assert_eq!(done.bytes, declared, "{names:?}");
                    let got = tree(&out);
                    for f in files {
                        let (is_dir, data, mode) = got
                            .get(f.name.as_str())
                            .unwrap_or_else(|| panic!("{} not extracted from {names:?}", f.name));
                        assert!(!is_dir, "{names:?}");
                        assert_eq!(data, &f.data, "{}: content", f.name);
                        let want = if f.kind == Kind::Executable {
                            0o755
                        } else {
                            0o644
                        };
                        assert_eq!(*mode, want, "{}: mode", f.name);
                    }
                }
            }
        });
}

/// Valid zips the byte-level harness mutates.
fn seed_zips() -> Vec<Vec<u8>> {
    let s = |name: &str, kind, data: &[u8]| Spec {
        name: name.to_string(),
        kind,
        data: data.to_vec(),
    };
    vec![
        build_zip(&[s("main.py", Kind::File, b"def handler(e):\n    return 1\n")]).0,
        build_zip(&[
            s("pkg/", Kind::Dir, b""),
            s("pkg/mod.py", Kind::File, b"x = 1\n"),
            s("run.sh", Kind::Executable, b"#!/bin/sh\n"),
        ])
        .0,
        build_zip(&[s("bomb.bin", Kind::File, &[0u8; 60 * 1024])]).0,
    ]
}

#[test]
fn zip_bytes_mutated() {
    let seeds = seed_zips();
    let tally = Tally::new("zip_bytes_mutated");
    check!()
        .with_type::<(u8, Vec<(u16, u8)>, Vec<u8>)>()
        .with_test_time(TEST_TIME)
        .for_each(|(which, patches, tail)| {
            let mut zip = seeds[*which as usize % seeds.len()].clone();
            for (at, byte) in patches.iter().take(8) {
                let len = zip.len();
                zip[*at as usize % len] = *byte;
            }
            if tail.len() % 3 == 1 {
                zip.extend_from_slice(tail);
            }
            tally.count(check_any_bytes(&zip));
        });
}

#[test]
fn zip_bytes_raw() {
    let tally = Tally::new("zip_bytes_raw");
    check!()
        .with_test_time(TEST_TIME)
        .for_each(|bytes| tally.count(check_any_bytes(bytes)));
}

/// Any bytes: no panic, nothing outside the target, no link, and what
/// extracts was accepted by inspect. Whether it extracted.
fn check_any_bytes(zip: &[u8]) -> bool {
    let inspected = codezip::inspect_with(zip, LIMITS);
    let (extracted, _tmp) = extract_contained(zip);
    if let Ok(done) = &extracted {
        assert!(
            inspected.is_ok(),
            "extract accepts what inspect refuses: {:?}",
            inspected.err().map(|e| e.to_string())
        );
        assert!(done.bytes <= LIMITS.max_unpacked_bytes);
    }
    extracted.is_ok()
}

/// A current-thread runtime, asserted unwind-safe: a panic inside a harness
/// ends that harness (bolero reports the input), so no state is observed
/// after it.
fn runtime() -> AssertUnwindSafe<tokio::runtime::Runtime> {
    AssertUnwindSafe(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime"),
    )
}

/// Mutations of a token: replace, insert or delete a character, swap parts.
fn mutate(token: &str, ops: &[(u8, u16, u8)]) -> String {
    const ALPHABET: &[u8] =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ";
    let mut t: Vec<u8> = token.as_bytes().to_vec();
    for (op, at, c) in ops.iter().take(4) {
        let c = ALPHABET[*c as usize % ALPHABET.len()];
        let at = *at as usize % (t.len() + 1);
        match op % 5 {
            0 if at < t.len() => t[at] = c,
            1 => t.insert(at, c),
            2 if at < t.len() => {
                t.remove(at);
            }
            3 => {
                // Swap the first two dot-separated parts.
                let s = String::from_utf8_lossy(&t).into_owned();
                let mut parts: Vec<&str> = s.split('.').collect();
                if parts.len() >= 2 {
                    parts.swap(0, 1);
                }
                t = parts.join(".").into_bytes();
            }
            _ => t.truncate(at),
        }
    }
    String::from_utf8_lossy(&t).into_owned()
}

#[test]
fn local_tokens_mutated() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let key = LocalKey::load_or_create(dir.path()).expect("a local key");
    let verifier = AssertUnwindSafe(
        rt.block_on(Verifier::new(Some(key.clone()), None, None, None))
            .expect("a verifier"),
    );
    let token = key.mint("alice", Duration::from_secs(600)).expect("mint");
    assert_eq!(
        rt.block_on(verifier.verify(&token)).expect("verifies").sub,
        "alice"
    );
    let tally = Tally::new("local_tokens_mutated");
    check!()
        .with_type::<Vec<(u8, u16, u8)>>()
        .with_test_time(TEST_TIME)
        .for_each(|ops| {
            let t = mutate(&token, ops);
            let verified = rt.block_on(verifier.verify(&t));
            tally.count(verified.is_ok());
            if let Ok(p) = verified {
                assert_eq!(p.sub, "alice", "mutated token {t:?} verified as {}", p.sub);
                assert_eq!(p.namespace, sless_wire::namespace_for_sub("alice"));
            }
            let header = format!("Bearer {t}");
            if let Ok(p) = rt.block_on(verifier.verify_header(Some(&header))) {
                assert_eq!(p.sub, "alice", "{header:?}");
            }
        });
}

#[test]
fn token_text_raw() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let key = LocalKey::load_or_create(dir.path()).expect("a local key");
    let verifier = AssertUnwindSafe(
        rt.block_on(Verifier::new(Some(key), None, None, None))
            .expect("a verifier"),
    );
    let tally = Tally::new("token_text_raw");
    check!().with_test_time(TEST_TIME).for_each(|bytes| {
        tally.count(false);
        let text = String::from_utf8_lossy(bytes);
        assert!(
            rt.block_on(verifier.verify(&text)).is_err(),
            "random text {text:?} verified"
        );
        assert!(rt.block_on(verifier.verify_header(Some(&text))).is_err());
    });
}

/// base64url without padding.
fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A JWKS document and a token for it, from picks among valid and broken parts.
fn jwks_case(keys: &[(u8, u8, Vec<u8>)], header: (u8, u8), claims: u8) -> (String, String) {
    let ktys = ["RSA", "EC", "OKP", "oct", "", "rsa"];
    let crvs = ["P-256", "P-384", "Ed25519", "X25519", "secp256k1", ""];
    let algs = ["RS256", "ES256", "EdDSA", "HS256", "none", "RS512", ""];
    let kids = ["k1", "k2", "", "../k"];
    let mut docs = Vec::new();
    for (i, (kind, pick, bytes)) in keys.iter().take(4).enumerate() {
        let bytes: Vec<u8> = bytes.iter().copied().take(300).collect();
        let mut k = serde_json::Map::new();
        k.insert("kty".into(), ktys[*kind as usize % ktys.len()].into());
        if pick & 1 != 0 {
            k.insert("kid".into(), kids[i % kids.len()].into());
        }
        if pick & 2 != 0 {
            k.insert("alg".into(), algs[*pick as usize / 4 % algs.len()].into());
        }
        if pick & 4 != 0 {
            k.insert(
                "use".into(),
                if pick & 8 != 0 { "sig" } else { "enc" }.into(),
            );
        }
        k.insert("n".into(), b64(&bytes).into());
        k.insert("e".into(), if pick & 16 != 0 { "AQAB" } else { "" }.into());
        k.insert("crv".into(), crvs[*pick as usize % crvs.len()].into());
        k.insert("x".into(), b64(&bytes[..bytes.len().min(32)]).into());
        k.insert("y".into(), b64(&bytes[bytes.len().min(32)..]).into());
        if pick & 32 != 0 {
            k.insert("x5c".into(), serde_json::json!(["not base64!"]));
        }
        docs.push(serde_json::Value::Object(k));
    }
    let doc = serde_json::json!({ "keys": docs }).to_string();
    let mut h = serde_json::Map::new();
    h.insert("alg".into(), algs[header.0 as usize % algs.len()].into());
    if header.1 & 1 != 0 {
        h.insert(
            "kid".into(),
            kids[header.1 as usize / 2 % kids.len()].into(),
        );
    }
    let c = match claims % 4 {
        0 => serde_json::json!({"sub": "alice", "exp": 4_000_000_000u64}),
        1 => serde_json::json!({"sub": "", "exp": 4_000_000_000u64}),
        2 => serde_json::json!({"sub": 7, "exp": "soon"}),
        _ => serde_json::json!({"exp": 1}),
    };
    let sig = if claims & 4 != 0 { "" } else { "c2lnbmF0dXJl" };
    let token = format!(
        "{}.{}.{sig}",
        b64(serde_json::Value::Object(h).to_string().as_bytes()),
        b64(c.to_string().as_bytes())
    );
    (doc, token)
}

#[test]
fn jwks_documents() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    let tally = Tally::new("jwks_documents (accepted = the JWKS loaded)");
    check!()
        .with_type::<(Vec<(u8, u8, Vec<u8>)>, (u8, u8), u8, Vec<u8>)>()
        .with_test_time(TEST_TIME)
        .for_each(|(keys, header, claims, raw)| {
            let (doc, token) = jwks_case(keys, *header, *claims);
            // Sometimes the raw bytes are the document instead.
            let doc = if raw.len() % 4 == 1 {
                String::from_utf8_lossy(raw).into_owned()
            } else {
                doc
            };
            std::fs::write(&path, &doc).expect("write jwks");
            let verifier = rt.block_on(Verifier::new(
                None,
                Some(JwksSource::File(path.clone())),
                None,
                None,
            ));
            tally.count(verifier.is_ok());
            if let Ok(v) = verifier {
                let r = rt.block_on(v.verify(&token));
                assert!(
                    r.is_err(),
                    "JWKS {doc} let the forged token {token} through: {r:?}"
                );
            }
        });
}
