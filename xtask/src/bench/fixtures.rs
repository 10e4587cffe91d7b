//! Generated inputs: hello functions, a local wheel, and the big and tiny-file
//! source trees for the hashing benchmark. Everything is deterministic.

use std::io::Write;
use std::path::Path;

use base64::Engine;
use sha2::{Digest, Sha256};
use terraform_provider_sless::source::Snapshot;

use super::error::{BenchError, Result, io};

/// A Python hello handler returning a small JSON object.
pub const PY_HELLO: &str = "def handler(event, context):\n    body = event.get(\"body\")\n    name = body.get(\"name\", \"world\") if isinstance(body, dict) else \"world\"\n    return {\"message\": \"hello, \" + name + \"!\", \"tag\": TAG}\n";

/// A Node hello handler returning a small JSON object.
pub const NODE_HELLO: &str = "exports.handler = async (event) => {\n  const body = event.body && typeof event.body === \"object\" ? event.body : {};\n  return { message: `hello, ${body.name || \"world\"}!` };\n};\n";

/// Name of the dependency the wheel provides.
pub const WHEEL_PKG: &str = "slessbenchdep";
/// File name of the generated wheel.
pub const WHEEL_FILE: &str = "slessbenchdep-0.1.0-py3-none-any.whl";

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    std::fs::write(path, bytes).map_err(io("write", path))
}

/// Recreates `dir` empty.
pub fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io("remove", dir))?;
    }
    std::fs::create_dir_all(dir).map_err(io("create", dir))
}

/// Writes `main.py` with `TAG = tag` (distinct tags give distinct code).
pub fn python_hello(dir: &Path, tag: &str) -> Result<()> {
    fresh_dir(dir)?;
    write(
        &dir.join("main.py"),
        format!("TAG = {tag:?}\n\n{PY_HELLO}").as_bytes(),
    )
}

/// Writes `main.py` importing the wheel's package, the wheel and a
/// `requirements.txt` naming it by relative path.
pub fn python_with_wheel(dir: &Path) -> Result<()> {
    fresh_dir(dir)?;
    let src = format!("import {WHEEL_PKG}\n\nTAG = {WHEEL_PKG}.VALUE\n\n{PY_HELLO}");
    write(&dir.join("main.py"), src.as_bytes())?;
    write(&dir.join(WHEEL_FILE), &wheel()?)?;
    write(
        &dir.join("requirements.txt"),
        format!("./{WHEEL_FILE}\n").as_bytes(),
    )
}

/// Writes `index.js`.
pub fn node_hello(dir: &Path) -> Result<()> {
    fresh_dir(dir)?;
    write(&dir.join("index.js"), NODE_HELLO.as_bytes())
}

/// The provider's own packaging of `dir`: (zip bytes, source hash).
pub fn package(dir: &Path) -> Result<(Vec<u8>, String)> {
    let err = |source| BenchError::Source {
        path: dir.to_owned(),
        source,
    };
    let snap = Snapshot::read(dir).map_err(err)?;
    let zip = snap.zip().map_err(err)?;
    Ok((zip, snap.hash()))
}

/// A minimal pure-Python wheel with a correct RECORD.
pub fn wheel() -> Result<Vec<u8>> {
    let dist = format!("{WHEEL_PKG}-0.1.0.dist-info");
    let files: Vec<(String, String)> = vec![
        (format!("{WHEEL_PKG}/__init__.py"), "VALUE = \"from-wheel\"\n".to_owned()),
        (
            format!("{dist}/METADATA"),
            format!("Metadata-Version: 2.1\nName: {WHEEL_PKG}\nVersion: 0.1.0\n"),
        ),
        (
            format!("{dist}/WHEEL"),
            "Wheel-Version: 1.0\nGenerator: sless-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                .to_owned(),
        ),
    ];
    let mut record = String::new();
    for (name, content) in &files {
        let digest = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(Sha256::digest(content.as_bytes()));
        record.push_str(&format!("{name},sha256={digest},{}\n", content.len()));
    }
    record.push_str(&format!("{dist}/RECORD,,\n"));
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut zw = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let zerr =
            |e: zip::result::ZipError| BenchError::RunFailed(format!("writing the wheel: {e}"));
        for (name, content) in files
            .iter()
            .chain(std::iter::once(&(format!("{dist}/RECORD"), record)))
        {
            zw.start_file(name.as_str(), opts).map_err(zerr)?;
            zw.write_all(content.as_bytes())
                .map_err(|e| BenchError::RunFailed(format!("writing the wheel: {e}")))?;
        }
        zw.finish().map_err(zerr)?;
    }
    Ok(buf.into_inner())
}

/// A deterministic byte generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// What a generated tree holds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct TreeSize {
    /// Number of files.
    pub files: usize,
    /// Total bytes.
    pub bytes: u64,
}

/// `files` files totalling about `total` bytes in 40 folders; half of each file is
/// random (incompressible, like assets), half repeated text (like source code).
pub fn big_tree(dir: &Path, files: usize, total: u64) -> Result<TreeSize> {
    fresh_dir(dir)?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let per = (total / files as u64) as usize;
    let text: Vec<u8> = b"def handler(event, context):\n    return {'ok': True}\n"
        .iter()
        .copied()
        .cycle()
        .take(per / 2)
        .collect();
    let mut bytes = 0;
    for i in 0..files {
        // Sizes vary between 0.5× and 1.5× the mean.
        let size = per / 2 + (rng.next() % per.max(1) as u64) as usize;
        let mut buf = vec![0u8; size];
        let half = size / 2;
        rng.fill(&mut buf[..half]);
        let n = (size - half).min(text.len());
        buf[half..half + n].copy_from_slice(&text[..n]);
        write(&dir.join(format!("d{:02}/f{i:05}.bin", i % 40)), &buf)?;
        bytes += size as u64;
    }
    Ok(TreeSize { files, bytes })
}

/// `files` tiny text files (20–400 bytes) in a nested, node_modules-like layout
/// (package folders with `lib/` subfolders), under `pkgs/` (not an ignored name).
pub fn tiny_tree(dir: &Path, files: usize) -> Result<TreeSize> {
    fresh_dir(dir)?;
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut bytes = 0;
    for i in 0..files {
        let size = 20 + (rng.next() % 380) as usize;
        let line = format!("module.exports.v{i} = {};\n", rng.next() % 1000);
        let content: Vec<u8> = line.bytes().cycle().take(size).collect();
        let pkg = i / 25;
        let path = dir.join(format!("pkgs/p{:03}/m{pkg:04}/lib/f{i:05}.js", pkg % 100));
        write(&path, &content)?;
        bytes += size as u64;
    }
    Ok(TreeSize { files, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_record_lists_every_file_with_its_hash() {
        let w = wheel().unwrap();
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(w)).unwrap();
        let mut record = String::new();
        std::io::Read::read_to_string(
            &mut z
                .by_name(&format!("{WHEEL_PKG}-0.1.0.dist-info/RECORD"))
                .unwrap(),
            &mut record,
        )
        .unwrap();
        assert_eq!(record.lines().count(), 4, "{record}");
        assert!(record.contains(&format!("{WHEEL_PKG}/__init__.py,sha256=")));
    }

    #[test]
    fn generated_trees_are_deterministic_and_sized() {
        let t = tempfile::tempdir().unwrap();
        let a = big_tree(&t.path().join("a"), 20, 20_000).unwrap();
        let b = big_tree(&t.path().join("b"), 20, 20_000).unwrap();
        assert_eq!(a.files, 20);
        assert_eq!(a.bytes, b.bytes);
        assert!((10_000..30_000).contains(&a.bytes), "{}", a.bytes);
        let (_, ha) = package(&t.path().join("a")).unwrap();
        let (_, hb) = package(&t.path().join("b")).unwrap();
        assert_eq!(ha, hb);
        let tiny = tiny_tree(&t.path().join("c"), 60).unwrap();
        assert_eq!(tiny.files, 60);
    }
}
