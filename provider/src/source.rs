//! Deterministic reading, hashing and zipping of a function's `source_dir`.
//!
//! The same folder gives the same `code_hash` and the same zip bytes on any
//! machine, umask, checkout time or OS:
//!
//! - files are taken in byte order of their relative path, written with `/`;
//! - only the content, the length and one mode bit (executable by its owner or
//!   not) count: mtimes, owners and group/other permission bits never do;
//! - directories are not recorded (an empty directory changes nothing);
//! - symbolic links are followed and stored as regular files holding their
//!   target's content; a link loop or a dangling link is an error naming it;
//! - [`DEFAULT_IGNORES`] and the patterns of an optional `.slessignore` at the
//!   root of `source_dir` (gitignore syntax, `!` re-includes) are left out.
//!
//! The zip has entries in the same order, each with the fixed timestamp
//! 1980-01-01 00:00:00 and mode 0644 or 0755, no directory entries and no
//! absolute paths.

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Patterns ignored in every `source_dir` (gitignore syntax).
pub const DEFAULT_IGNORES: &[&str] = &[
    ".git/",
    "__pycache__/",
    "node_modules/",
    ".terraform/",
    "*.pyc",
    ".DS_Store",
];

/// Name of the optional ignore file at the root of `source_dir`.
pub const IGNORE_FILE: &str = ".slessignore";

/// Version tag mixed into the hash, so a future change of the scheme changes
/// every hash instead of silently colliding.
const HASH_SCHEME: &[u8] = b"sless-source-v1\0";

/// Why a source folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The folder does not exist.
    #[error("{path} does not exist")]
    Missing {
        /// The folder as given.
        path: String,
    },
    /// The path is not a folder.
    #[error("{path} is not a directory")]
    NotADirectory {
        /// The path as given.
        path: String,
    },
    /// A symbolic link points (directly or not) to one of its parents.
    #[error("symbolic link loop at {path}: it points back to {ancestor}")]
    SymlinkLoop {
        /// The link's path inside the folder.
        path: String,
        /// The directory it loops back to.
        ancestor: String,
    },
    /// A symbolic link whose target does not exist.
    #[error("dangling symbolic link {path}: its target does not exist")]
    DanglingSymlink {
        /// The link's path inside the folder.
        path: String,
    },
    /// A file or folder that could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file name that is not valid UTF-8 (zip entries and the hash need UTF-8).
    #[error("{path}: the file name is not valid UTF-8")]
    NonUtf8Name {
        /// The path, lossily converted.
        path: String,
    },
    /// A bad pattern in `.slessignore`.
    #[error("invalid pattern in {IGNORE_FILE}: {0}")]
    IgnorePattern(String),
    /// Nothing left to upload after the ignore rules.
    #[error("{path} contains no files (after the ignore rules)")]
    Empty {
        /// The folder as given.
        path: String,
    },
    /// The zip writer failed.
    #[error("cannot build the code zip: {0}")]
    Zip(#[from] zip::result::ZipError),
}

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path relative to `source_dir`, `/`-separated.
    pub path: String,
    /// Executable by its owner.
    pub executable: bool,
    /// The content (a symlink's target content).
    pub content: Vec<u8>,
}

/// The normalised content of a source folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Files sorted by path.
    pub files: Vec<SourceFile>,
}

/// Checks that `dir` exists and is a directory.
pub fn check_dir(dir: &Path) -> Result<(), SourceError> {
    let shown = dir.display().to_string();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(SourceError::NotADirectory { path: shown }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(SourceError::Missing { path: shown })
        }
        Err(source) => Err(SourceError::Io {
            path: shown,
            source,
        }),
    }
}

fn ignore_rules(dir: &Path) -> Result<Gitignore, SourceError> {
    let mut builder = GitignoreBuilder::new(dir);
    for pattern in DEFAULT_IGNORES {
        builder
            .add_line(None, pattern)
            .map_err(|e| SourceError::IgnorePattern(e.to_string()))?;
    }
    let file = dir.join(IGNORE_FILE);
    if file.is_file()
        && let Some(e) = builder.add(&file)
    {
        return Err(SourceError::IgnorePattern(e.to_string()));
    }
    builder
        .build()
        .map_err(|e| SourceError::IgnorePattern(e.to_string()))
}

fn relative(dir: &Path, path: &Path) -> Result<String, SourceError> {
    let rel = path.strip_prefix(dir).unwrap_or(path);
    let mut parts = Vec::new();
    for c in rel.components() {
        match c.as_os_str().to_str() {
            Some(s) => parts.push(s.to_string()),
            None => {
                return Err(SourceError::NonUtf8Name {
                    path: path.display().to_string(),
                });
            }
        }
    }
    Ok(parts.join("/"))
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o100 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    false
}

fn walk_error(dir: &Path, e: walkdir::Error) -> SourceError {
    let path = e
        .path()
        .map(|p| relative(dir, p).unwrap_or_else(|_| p.display().to_string()))
        .unwrap_or_default();
    if let Some(ancestor) = e.loop_ancestor() {
        return SourceError::SymlinkLoop {
            path,
            ancestor: relative(dir, ancestor).unwrap_or_else(|_| ancestor.display().to_string()),
        };
    }
    let is_link = e
        .path()
        .and_then(|p| std::fs::symlink_metadata(p).ok())
        .is_some_and(|m| m.file_type().is_symlink());
    match e.into_io_error() {
        Some(io) if is_link && io.kind() == std::io::ErrorKind::NotFound => {
            SourceError::DanglingSymlink { path }
        }
        Some(source) => SourceError::Io { path, source },
        None => SourceError::Io {
            path,
            source: std::io::Error::other("unreadable directory entry"),
        },
    }
}

impl Snapshot {
    /// Reads `dir` following the rules in the module documentation.
    pub fn read(dir: &Path) -> Result<Snapshot, SourceError> {
        check_dir(dir)?;
        let rules = ignore_rules(dir)?;
        let root: PathBuf = dir.to_path_buf();
        let walker = walkdir::WalkDir::new(&root)
            .follow_links(true)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|entry| {
                entry.depth() == 0
                    || !rules
                        .matched(entry.path(), entry.file_type().is_dir())
                        .is_ignore()
            });
        let mut files = Vec::new();
        for entry in walker {
            let entry = entry.map_err(|e| walk_error(&root, e))?;
            if entry.file_type().is_dir() {
                continue;
            }
            let path = relative(&root, entry.path())?;
            let io = |source| SourceError::Io {
                path: path.clone(),
                source,
            };
            // `entry.metadata()` follows links because of `follow_links`.
            let meta = entry.metadata().map_err(|e| walk_error(&root, e))?;
            if !meta.is_file() {
                // Sockets, FIFOs and devices have no content to ship.
                continue;
            }
            let content = std::fs::read(entry.path()).map_err(io)?;
            files.push(SourceFile {
                executable: is_executable(&meta),
                path,
                content,
            });
        }
        files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        if files.is_empty() {
            return Err(SourceError::Empty {
                path: dir.display().to_string(),
            });
        }
        Ok(Snapshot { files })
    }

    /// The `code_hash`: hex sha256 over, per file in order, the path, the
    /// normalised mode, the length and the content.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(HASH_SCHEME);
        for f in &self.files {
            h.update(f.path.as_bytes());
            h.update(b"\0");
            h.update(if f.executable { b"755" } else { b"644" });
            h.update(b"\0");
            h.update(f.content.len().to_string().as_bytes());
            h.update(b"\0");
            h.update(&f.content);
        }
        hex::encode(h.finalize())
    }

    /// The deterministic zip of this snapshot.
    pub fn zip(&self) -> Result<Vec<u8>, SourceError> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for f in &self.files {
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .compression_level(Some(6))
                .last_modified_time(zip::DateTime::default())
                .unix_permissions(if f.executable { 0o755 } else { 0o644 });
            w.start_file(f.path.as_str(), opts)?;
            w.write_all(&f.content).map_err(zip::result::ZipError::Io)?;
        }
        Ok(w.finish()?.into_inner())
    }
}

/// Hex sha256 of bytes (the `sha256` query parameter of a code upload).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, rel: &str, content: &str) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    fn sample() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "main.py", "def handler(e, c):\n    return 1\n");
        write(d.path(), "lib/util.py", "X = 1\n");
        write(d.path(), "requirements.txt", "six\n");
        d
    }

    fn hash(d: &Path) -> String {
        Snapshot::read(d).unwrap().hash()
    }

    fn paths(d: &Path) -> Vec<String> {
        Snapshot::read(d)
            .unwrap()
            .files
            .into_iter()
            .map(|f| f.path)
            .collect()
    }

    fn set_mtime(p: &Path, secs: i64) {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        let times = [
            libc::timespec {
                tv_sec: secs,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: secs,
                tv_nsec: 0,
            },
        ];
        assert_eq!(
            unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) },
            0
        );
    }

    #[test]
    fn same_content_written_in_another_order_gives_the_same_hash() {
        let a = sample();
        let b = tempfile::tempdir().unwrap();
        write(b.path(), "requirements.txt", "six\n");
        write(b.path(), "lib/util.py", "X = 1\n");
        write(b.path(), "main.py", "def handler(e, c):\n    return 1\n");
        assert_eq!(hash(a.path()), hash(b.path()));
        assert_eq!(
            paths(a.path()),
            ["lib/util.py", "main.py", "requirements.txt"]
        );
    }

    #[test]
    fn mtimes_group_bits_and_umask_do_not_change_the_hash() {
        let d = sample();
        let before = hash(d.path());
        let zip_before = Snapshot::read(d.path()).unwrap().zip().unwrap();
        for rel in ["main.py", "lib/util.py", "requirements.txt"] {
            set_mtime(&d.path().join(rel), 1_000_000_000);
        }
        let p = d.path().join("main.py");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o664)).unwrap(); // chmod g+w
        fs::set_permissions(
            d.path().join("lib/util.py"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap(); // a umask of 077
        assert_eq!(hash(d.path()), before);
        assert_eq!(Snapshot::read(d.path()).unwrap().zip().unwrap(), zip_before);
    }

    #[test]
    fn the_owner_executable_bit_counts() {
        let d = sample();
        let before = hash(d.path());
        fs::set_permissions(d.path().join("main.py"), fs::Permissions::from_mode(0o755)).unwrap();
        assert_ne!(hash(d.path()), before);
    }

    #[test]
    fn a_one_byte_edit_changes_the_hash() {
        let d = sample();
        let before = hash(d.path());
        write(d.path(), "main.py", "def handler(e, c):\n    return 2\n");
        assert_ne!(hash(d.path()), before);
    }

    #[test]
    fn moving_bytes_between_files_changes_the_hash() {
        let a = tempfile::tempdir().unwrap();
        write(a.path(), "a", "xy");
        write(a.path(), "b", "");
        let b = tempfile::tempdir().unwrap();
        write(b.path(), "a", "x");
        write(b.path(), "b", "y");
        assert_ne!(hash(a.path()), hash(b.path()));
    }

    #[test]
    fn default_ignores_are_left_out() {
        let d = sample();
        let before = hash(d.path());
        write(d.path(), ".git/HEAD", "ref: refs/heads/main\n");
        write(d.path(), "__pycache__/main.cpython-311.pyc", "junk");
        write(d.path(), "lib/__pycache__/util.pyc", "junk");
        write(d.path(), "node_modules/left-pad/index.js", "junk");
        write(d.path(), ".terraform/x", "junk");
        write(d.path(), "stray.pyc", "junk");
        write(d.path(), ".DS_Store", "junk");
        assert_eq!(hash(d.path()), before);
    }

    #[test]
    fn slessignore_patterns_apply_with_gitignore_syntax() {
        let d = sample();
        write(d.path(), ".slessignore", "*.log\ntests/\n!keep.log\n");
        let with_ignore_file = hash(d.path());
        write(d.path(), "debug.log", "x");
        write(d.path(), "tests/test_main.py", "x");
        assert_eq!(hash(d.path()), with_ignore_file);
        write(d.path(), "keep.log", "x");
        assert_ne!(hash(d.path()), with_ignore_file);
        assert_eq!(
            paths(d.path()),
            [
                ".slessignore",
                "keep.log",
                "lib/util.py",
                "main.py",
                "requirements.txt"
            ]
        );
    }

    #[test]
    fn symlinks_are_stored_as_their_target_content() {
        let a = sample();
        write(a.path(), "shared/data.txt", "payload");
        std::os::unix::fs::symlink("shared/data.txt", a.path().join("link.txt")).unwrap();
        let b = sample();
        write(b.path(), "shared/data.txt", "payload");
        write(b.path(), "link.txt", "payload");
        assert_eq!(hash(a.path()), hash(b.path()));
        let snap = Snapshot::read(a.path()).unwrap();
        let link = snap.files.iter().find(|f| f.path == "link.txt").unwrap();
        assert_eq!(link.content, b"payload");
    }

    #[test]
    fn symlinked_directories_are_followed() {
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "vendored.py", "V = 1\n");
        let d = sample();
        std::os::unix::fs::symlink(outside.path(), d.path().join("vendor")).unwrap();
        assert!(paths(d.path()).contains(&"vendor/vendored.py".to_string()));
    }

    #[test]
    fn a_dangling_symlink_is_an_error_naming_it() {
        let d = sample();
        std::os::unix::fs::symlink("nowhere.txt", d.path().join("broken")).unwrap();
        let err = Snapshot::read(d.path()).unwrap_err();
        assert!(
            matches!(&err, SourceError::DanglingSymlink { path } if path == "broken"),
            "{err}"
        );
        assert!(err.to_string().contains("broken"));
    }

    #[test]
    fn a_symlink_loop_is_an_error_naming_it() {
        let d = sample();
        std::os::unix::fs::symlink("..", d.path().join("lib/up")).unwrap();
        let err = Snapshot::read(d.path()).unwrap_err();
        assert!(
            matches!(&err, SourceError::SymlinkLoop { path, .. } if path == "lib/up"),
            "{err}"
        );
    }

    #[test]
    fn missing_and_non_directory_paths_are_reported() {
        let d = sample();
        assert!(matches!(
            Snapshot::read(&d.path().join("nope")),
            Err(SourceError::Missing { .. })
        ));
        assert!(matches!(
            Snapshot::read(&d.path().join("main.py")),
            Err(SourceError::NotADirectory { .. })
        ));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            Snapshot::read(empty.path()),
            Err(SourceError::Empty { .. })
        ));
    }

    #[test]
    fn the_zip_is_byte_identical_and_normalised() {
        let a = sample();
        fs::set_permissions(a.path().join("main.py"), fs::Permissions::from_mode(0o775)).unwrap();
        let first = Snapshot::read(a.path()).unwrap().zip().unwrap();
        let second = Snapshot::read(a.path()).unwrap().zip().unwrap();
        assert_eq!(first, second);
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(first)).unwrap();
        let mut names = Vec::new();
        for i in 0..z.len() {
            let f = z.by_index(i).unwrap();
            assert!(!f.is_dir());
            assert!(!f.name().starts_with('/'));
            let t = f.last_modified().unwrap();
            assert_eq!((t.year(), t.month(), t.day()), (1980, 1, 1));
            let mode = f.unix_mode().unwrap() & 0o777;
            if f.name() == "main.py" {
                assert_eq!(mode, 0o755);
            } else {
                assert_eq!(mode, 0o644);
            }
            names.push(f.name().to_string());
        }
        assert_eq!(names, ["lib/util.py", "main.py", "requirements.txt"]);
    }

    #[test]
    fn zips_of_the_same_content_with_different_mtimes_are_identical() {
        let a = sample();
        let b = sample();
        for rel in ["main.py", "lib/util.py", "requirements.txt"] {
            set_mtime(&b.path().join(rel), 86_400 * 365);
        }
        assert_eq!(
            Snapshot::read(a.path()).unwrap().zip().unwrap(),
            Snapshot::read(b.path()).unwrap().zip().unwrap()
        );
    }
}
