//! Safe handling of uploaded code zips.
//!
//! [`inspect`] checks an upload before it is stored (the API calls it, so a bad
//! zip is a 400 at upload time); [`extract`] unpacks it for a build, checking
//! everything again and enforcing the *real* expanded size while writing,
//! because the sizes a zip declares can lie.
//!
//! Refused: unreadable archives, more than [`CODE_ZIP_MAX_ENTRIES`] entries, a
//! total expanded size over [`CODE_UNPACKED_MAX_BYTES`], encrypted entries,
//! symlink entries, duplicate names, directory entries that carry content
//! (a name ending in `/` with data) and any name that is not a clean relative
//! path (`..`, `.`, empty components, absolute paths, backslashes, drive
//! letters, control characters).

use sless_wire::limits::{CODE_UNPACKED_MAX_BYTES, CODE_ZIP_MAX_ENTRIES};
use std::collections::HashSet;
use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

/// Why a code zip was refused.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    /// The bytes are not a readable zip archive.
    #[error("not a zip archive: {0}")]
    NotAZip(String),
    /// More entries than allowed.
    #[error("the zip has {count} entries, the limit is {limit}")]
    TooManyEntries {
        /// Entries in the archive.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The expanded size (declared or really written) is over the limit.
    #[error("the zip expands to more than {limit} bytes (zip bomb guard; {what})")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
        /// Whether the declared sizes or the real data broke it, and where.
        what: String,
    },
    /// An entry name that is not a clean relative path.
    #[error("zip entry {entry:?}: {reason}")]
    UnsafePath {
        /// The entry name as stored.
        entry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A symbolic link entry.
    #[error("zip entry {entry:?} is a symbolic link; links are not allowed in code zips")]
    Symlink {
        /// The entry name.
        entry: String,
    },
    /// An encrypted entry.
    #[error("zip entry {entry:?} is encrypted; encrypted zips are not supported")]
    Encrypted {
        /// The entry name.
        entry: String,
    },
    /// Two entries with the same path.
    #[error("zip entry {entry:?} appears more than once")]
    Duplicate {
        /// The entry name.
        entry: String,
    },
    /// A file entry whose path is also the directory of other entries
    /// (`a` and `a/b`): it cannot be unpacked.
    #[error("zip entry {entry:?} is a file, but other entries use it as their directory")]
    FileIsADirectory {
        /// The file entry's name.
        entry: String,
    },
    /// An entry whose data cannot be read (corrupt, bad checksum, unsupported method).
    #[error("zip entry {entry:?} cannot be read: {detail}")]
    Corrupt {
        /// The entry name.
        entry: String,
        /// The reader's error.
        detail: String,
    },
    /// Writing the extracted files failed (a host fault, not the zip's).
    #[error("extracting {path}: {source}")]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// What [`inspect`] found in an acceptable zip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipSummary {
    /// Number of entries (files and directories).
    pub entries: usize,
    /// Number of file entries.
    pub files: usize,
    /// Sum of the declared uncompressed sizes.
    pub declared_bytes: u64,
}

/// The caps applied to a zip; [`Limits::default`] are the product limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entries.
    pub max_entries: usize,
    /// Most expanded bytes in total.
    pub max_unpacked_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: CODE_ZIP_MAX_ENTRIES,
            max_unpacked_bytes: CODE_UNPACKED_MAX_BYTES,
        }
    }
}

const S_IFMT: u32 = 0o170000;
const S_IFLNK: u32 = 0o120000;

/// Checks `name` is a clean relative path and returns its components
/// (a trailing `/` marks a directory and is dropped).
fn clean_components(name: &str) -> Result<Vec<&str>, ZipError> {
    let bad = |reason| ZipError::UnsafePath {
        entry: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("empty name"));
    }
    if name.chars().any(|c| c.is_control()) {
        return Err(bad("control character in the name"));
    }
    if name.contains('\\') {
        return Err(bad("backslash in the name (use / as the separator)"));
    }
    if name.starts_with('/') {
        return Err(bad("absolute path"));
    }
    if name.contains(':') {
        return Err(bad("':' in the name (drive letters are not allowed)"));
    }
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    let mut parts = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" => return Err(bad("empty path component ('//')")),
            "." => return Err(bad("'.' path component")),
            ".." => return Err(bad("'..' path component (path traversal)")),
            p => parts.push(p),
        }
    }
    Ok(parts)
}

fn open(bytes: &[u8]) -> Result<zip::ZipArchive<Cursor<&[u8]>>, ZipError> {
    zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| ZipError::NotAZip(e.to_string()))
}

/// One checked entry of the central directory.
struct Entry {
    name: String,
    parts: Vec<String>,
    is_dir: bool,
    executable: bool,
}

/// Checks every entry's metadata against `limits`; shared by inspect and extract.
fn check_all(
    archive: &mut zip::ZipArchive<Cursor<&[u8]>>,
    limits: Limits,
) -> Result<(Vec<Entry>, u64), ZipError> {
    let count = archive.len();
    if count > limits.max_entries {
        return Err(ZipError::TooManyEntries {
            count,
            limit: limits.max_entries,
        });
    }
    let mut seen = HashSet::new();
    // Every parent of an entry, which must not also be a file entry.
    let mut dirs = HashSet::new();
    let mut entries = Vec::with_capacity(count);
    let mut declared: u64 = 0;
    for i in 0..count {
        let file = archive
            .by_index_raw(i)
            .map_err(|e| ZipError::NotAZip(format!("entry #{i}: {e}")))?;
        let name = file.name().to_string();
        let parts = clean_components(&name)?;
        if file.encrypted() {
            return Err(ZipError::Encrypted { entry: name });
        }
        let mode = file.unix_mode().unwrap_or(0);
        if mode & S_IFMT == S_IFLNK {
            return Err(ZipError::Symlink { entry: name });
        }
        let is_dir = file.is_dir();
        if is_dir && file.size() > 0 {
            // Its bytes would be dropped without a word: refuse it instead.
            return Err(ZipError::UnsafePath {
                entry: name,
                reason: "a directory entry (its name ends in '/') that has content",
            });
        }
        declared = declared.saturating_add(file.size());
        if declared > limits.max_unpacked_bytes {
            return Err(ZipError::TooLarge {
                limit: limits.max_unpacked_bytes,
                what: format!("declared sizes, reached at entry {name:?}"),
            });
        }
        let key = parts.join("/");
        if !seen.insert(key) {
            return Err(ZipError::Duplicate { entry: name });
        }
        for i in 1..parts.len() {
            dirs.insert(parts[..i].join("/"));
        }
        entries.push(Entry {
            parts: parts.iter().map(|s| s.to_string()).collect(),
            name,
            is_dir,
            executable: mode & 0o111 != 0,
        });
    }
    if let Some(file) = entries
        .iter()
        .find(|e| !e.is_dir && dirs.contains(&e.parts.join("/")))
    {
        return Err(ZipError::FileIsADirectory {
            entry: file.name.clone(),
        });
    }
    Ok((entries, declared))
}

/// Checks an uploaded zip without unpacking it, with the product limits.
pub fn inspect(bytes: &[u8]) -> Result<ZipSummary, ZipError> {
    inspect_with(bytes, Limits::default())
}

/// [`inspect`] with explicit limits.
pub fn inspect_with(bytes: &[u8], limits: Limits) -> Result<ZipSummary, ZipError> {
    let mut archive = open(bytes)?;
    let (entries, declared_bytes) = check_all(&mut archive, limits)?;
    Ok(ZipSummary {
        files: entries.iter().filter(|e| !e.is_dir).count(),
        entries: entries.len(),
        declared_bytes,
    })
}

/// What [`extract`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// Files written.
    pub files: usize,
    /// Bytes really written.
    pub bytes: u64,
}

/// Unpacks `bytes` into `dest` (which must exist and should be empty), with
/// the product limits. Files are written 0644, or 0755 when the zip marks them
/// executable. Existing symlinks are never followed.
pub fn extract(bytes: &[u8], dest: &Path) -> Result<Extracted, ZipError> {
    extract_with(bytes, dest, Limits::default())
}

/// [`extract`] with explicit limits.
pub fn extract_with(bytes: &[u8], dest: &Path, limits: Limits) -> Result<Extracted, ZipError> {
    let mut archive = open(bytes)?;
    let (entries, _) = check_all(&mut archive, limits)?;
    let mut written: u64 = 0;
    let mut files = 0;
    for (i, entry) in entries.iter().enumerate() {
        let mut path = dest.to_path_buf();
        // Create parents one by one, refusing anything that is not a real dir.
        let dir_parts = if entry.is_dir {
            &entry.parts[..]
        } else {
            &entry.parts[..entry.parts.len().saturating_sub(1)]
        };
        for part in dir_parts {
            path.push(part);
            make_dir(&path, &entry.name)?;
        }
        if entry.is_dir {
            continue;
        }
        if let Some(last) = entry.parts.last() {
            path.push(last);
        }
        let mut file = archive.by_index(i).map_err(|e| ZipError::Corrupt {
            entry: entry.name.clone(),
            detail: e.to_string(),
        })?;
        let out = open_new_file(&path, entry.executable)?;
        written = copy_limited(&mut file, out, &path, &entry.name, written, limits)?;
        files += 1;
    }
    Ok(Extracted {
        files,
        bytes: written,
    })
}

fn make_dir(path: &Path, entry: &str) -> Result<(), ZipError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_dir() => Ok(()),
        Ok(_) => Err(ZipError::UnsafePath {
            entry: entry.to_string(),
            reason: "a parent directory is a file or link",
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o755);
            }
            builder.create(path).map_err(|source| ZipError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
        Err(source) => Err(ZipError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn open_new_file(path: &Path, executable: bool) -> Result<std::fs::File, ZipError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(if executable { 0o755 } else { 0o644 })
            .custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(not(unix))]
    let _ = executable;
    opts.open(path).map_err(|source| ZipError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Copies an entry, counting real bytes; aborts past the limit.
fn copy_limited(
    src: &mut impl Read,
    mut out: std::fs::File,
    path: &Path,
    entry: &str,
    mut total: u64,
    limits: Limits,
) -> Result<u64, ZipError> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = src.read(&mut buf).map_err(|e| ZipError::Corrupt {
            entry: entry.to_string(),
            detail: e.to_string(),
        })?;
        if n == 0 {
            break;
        }
        total = total.saturating_add(n as u64);
        if total > limits.max_unpacked_bytes {
            return Err(ZipError::TooLarge {
                limit: limits.max_unpacked_bytes,
                what: format!("real data, reached while writing entry {entry:?}"),
            });
        }
        out.write_all(&buf[..n]).map_err(|source| ZipError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    }
    out.sync_all().map_err(|source| ZipError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use zip::write::SimpleFileOptions;

    fn zip_with(entries: &[(&str, &[u8], Option<u32>)]) -> Vec<u8> {
        let mut buf = Cursor::new(Vec::new());
        {
            let mut w = zip::ZipWriter::new(&mut buf);
            for (name, data, mode) in entries {
                let mut opts = SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Deflated);
                if let Some(m) = mode {
                    opts = opts.unix_permissions(*m);
                }
                w.start_file(*name, opts).unwrap();
                w.write_all(data).unwrap();
            }
            w.finish().unwrap();
        }
        buf.into_inner()
    }

    fn refused(entries: &[(&str, &[u8], Option<u32>)]) -> String {
        let z = zip_with(entries);
        let err = inspect(&z).unwrap_err().to_string();
        // extract refuses it too and writes nothing.
        let dir = tempfile::tempdir().unwrap();
        assert!(extract(&z, dir.path()).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        err
    }

    #[test]
    fn accepts_and_extracts_a_normal_zip_with_modes() {
        let z = zip_with(&[
            ("main.py", b"print(1)\n", Some(0o644)),
            ("bin/run.sh", b"#!/bin/sh\n", Some(0o755)),
            ("pkg/sub/mod.py", b"x = 1\n", None),
        ]);
        let s = inspect(&z).unwrap();
        assert_eq!(s.files, 3);
        assert_eq!(s.declared_bytes, 9 + 10 + 6);
        let dir = tempfile::tempdir().unwrap();
        let out = extract(&z, dir.path()).unwrap();
        assert_eq!(out.files, 3);
        assert_eq!(out.bytes, 25);
        let mode = |p: &str| {
            std::fs::metadata(dir.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("main.py"), 0o644);
        assert_eq!(mode("bin/run.sh"), 0o755);
        assert_eq!(mode("pkg/sub/mod.py"), 0o644);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("pkg/sub/mod.py")).unwrap(),
            "x = 1\n"
        );
    }

    #[test]
    fn refuses_non_zip() {
        let err = inspect(b"definitely not a zip").unwrap_err();
        assert!(matches!(err, ZipError::NotAZip(_)), "{err}");
    }

    #[test]
    fn refuses_parent_traversal() {
        let err = refused(&[("ok.py", b"", None), ("../evil.py", b"x", None)]);
        assert!(err.contains("../evil.py") && err.contains(".."), "{err}");
        let err = refused(&[("a/../../evil.py", b"x", None)]);
        assert!(err.contains("a/../../evil.py"), "{err}");
    }

    #[test]
    fn refuses_absolute_paths() {
        let err = refused(&[("/etc/passwd", b"x", None)]);
        assert!(
            err.contains("/etc/passwd") && err.contains("absolute"),
            "{err}"
        );
    }

    #[test]
    fn refuses_drive_letters_and_backslashes() {
        let err = refused(&[("C:/win.py", b"x", None)]);
        assert!(err.contains("C:/win.py"), "{err}");
        let err = refused(&[("..\\evil.py", b"x", None)]);
        assert!(err.contains("backslash"), "{err}");
    }

    #[test]
    fn refuses_unclean_names() {
        for name in ["./main.py", "a//b.py", "a/./b.py", "bad\u{1}name"] {
            let err = refused(&[(name, b"x", None)]);
            assert!(err.contains("zip entry"), "{name}: {err}");
        }
    }

    #[test]
    fn refuses_symlink_entries() {
        let mut buf = Cursor::new(Vec::new());
        {
            let mut w = zip::ZipWriter::new(&mut buf);
            w.add_symlink("link", "/etc/passwd", SimpleFileOptions::default())
                .unwrap();
            w.finish().unwrap();
        }
        let z = buf.into_inner();
        let err = inspect(&z).unwrap_err();
        assert!(matches!(err, ZipError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains("\"link\""));
        let dir = tempfile::tempdir().unwrap();
        assert!(extract(&z, dir.path()).is_err());
        assert!(std::fs::symlink_metadata(dir.path().join("link")).is_err());
    }

    #[test]
    fn refuses_duplicates() {
        // "pkg/" (a directory) and "pkg" (a file) name the same path.
        let err = refused(&[("pkg/", b"", None), ("pkg", b"2", None)]);
        assert!(err.contains("more than once"), "{err}");
    }

    /// Regression (coverage-guided run of `zip_entries_structured`,
    /// 2026-12-05): a file `a` beside `a/a` was accepted at upload and only
    /// failed when the build unpacked it.
    #[test]
    fn refuses_a_file_that_other_entries_use_as_their_directory() {
        for entries in [
            &[("a/a", &b""[..], None), ("a", &b"A"[..], None)][..],
            &[("a", &b"A"[..], None), ("a/b/c.py", &b""[..], None)][..],
        ] {
            let err = refused(entries);
            assert!(
                err.contains("\"a\"") && err.contains("use it as their directory"),
                "{err}"
            );
        }
        // A directory entry beside its own files is fine.
        let z = zip_with(&[("a/", b"", None), ("a/b", b"x", None)]);
        assert_eq!(inspect(&z).unwrap().files, 1);
    }

    /// Regression (fuzz harness `zip_entries_structured`): a file entry
    /// whose name ends in `/` is a directory to every reader, so its content
    /// was accepted and silently not extracted.
    #[test]
    fn refuses_a_directory_entry_with_content() {
        let err = refused(&[("main.py", b"x = 1\n", None), ("lib/", b"lost bytes", None)]);
        assert!(err.contains("lib/") && err.contains("has content"), "{err}");
        // An empty one is a directory, as before.
        let z = zip_with(&[("lib/", b"", None), ("lib/m.py", b"x", None)]);
        assert_eq!(inspect(&z).unwrap().files, 1);
    }

    #[test]
    fn refuses_too_many_entries() {
        let names: Vec<String> = (0..5).map(|i| format!("f{i}")).collect();
        let entries: Vec<(&str, &[u8], Option<u32>)> =
            names.iter().map(|n| (n.as_str(), &b""[..], None)).collect();
        let z = zip_with(&entries);
        let limits = Limits {
            max_entries: 4,
            max_unpacked_bytes: 1 << 20,
        };
        let err = inspect_with(&z, limits).unwrap_err();
        assert!(matches!(
            err,
            ZipError::TooManyEntries { count: 5, limit: 4 }
        ));
    }

    #[test]
    fn refuses_a_real_zip_bomb() {
        // 8 MiB of zeros compresses to a few KiB; the cap is 1 MiB.
        let zeros = vec![0u8; 8 << 20];
        let z = zip_with(&[("bomb.bin", &zeros, None)]);
        assert!(z.len() < 64 * 1024, "compressed to {}", z.len());
        let limits = Limits {
            max_entries: 10,
            max_unpacked_bytes: 1 << 20,
        };
        let err = inspect_with(&z, limits).unwrap_err();
        assert!(matches!(err, ZipError::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("bomb.bin"));
    }

    /// Overwrites the declared uncompressed size of every entry (local header
    /// and central directory) with `size`.
    fn lie_about_sizes(z: &mut [u8], size: u32) {
        let mut i = 0;
        while i + 30 <= z.len() {
            let sig = u32::from_le_bytes([z[i], z[i + 1], z[i + 2], z[i + 3]]);
            if sig == 0x04034b50 {
                z[i + 22..i + 26].copy_from_slice(&size.to_le_bytes());
            } else if sig == 0x02014b50 {
                z[i + 24..i + 28].copy_from_slice(&size.to_le_bytes());
            }
            i += 1;
        }
    }

    #[test]
    fn a_lying_size_is_caught_while_writing() {
        let zeros = vec![0u8; 8 << 20];
        let mut z = zip_with(&[("liar.bin", &zeros, None)]);
        lie_about_sizes(&mut z, 10);
        let limits = Limits {
            max_entries: 10,
            max_unpacked_bytes: 1 << 20,
        };
        // The declared size passes inspection...
        let s = inspect_with(&z, limits).unwrap();
        assert_eq!(s.declared_bytes, 10);
        // ...but extraction stops at the real cap.
        let dir = tempfile::tempdir().unwrap();
        let err = extract_with(&z, dir.path(), limits).unwrap_err();
        assert!(
            matches!(err, ZipError::TooLarge { .. } | ZipError::Corrupt { .. }),
            "{err}"
        );
        let written = std::fs::metadata(dir.path().join("liar.bin"))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(written <= 1 << 20, "wrote {written} bytes");
    }

    #[test]
    fn declared_size_over_the_product_cap_is_refused() {
        let mut z = zip_with(&[("big.bin", b"small really", None)]);
        lie_about_sizes(&mut z, u32::MAX);
        let err = inspect(&z).unwrap_err();
        assert!(matches!(err, ZipError::TooLarge { .. }), "{err}");
    }

    #[test]
    fn extraction_never_follows_an_existing_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("pkg")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("target.py"), dir.path().join("top.py"))
            .unwrap();
        let z = zip_with(&[("pkg/mod.py", b"x", None)]);
        assert!(extract(&z, dir.path()).is_err());
        let z = zip_with(&[("top.py", b"x", None)]);
        assert!(extract(&z, dir.path()).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
