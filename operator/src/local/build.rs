//! A build: unpack the code zip into a fresh directory, then install
//! dependencies (`requirements.txt` with pip, `package.json` with npm) into a
//! cache keyed by the manifests' hash. Every command and its output goes to
//! the function's build log. Cancelling the future (a newer upload, a
//! delete) kills the whole process group of a running pip/npm.

use super::db::Db;
use super::logs::Logs;
use super::process::{GroupGuard, isolate};
use crate::codezip;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sless_wire::Runtime;
use sless_wire::function::LogKind;
use sless_wire::runtime::Language;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;

/// Name of the file in a build dir that marks it complete.
const BUILD_INFO: &str = "build.json";

/// What a finished build produced (stored as `build.json` in its dir).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Built {
    /// The runtime it was built for.
    pub runtime: Runtime,
    /// The unpacked code (the process's working directory).
    pub src: PathBuf,
    /// The Python dependency dir for `PYTHONPATH`, if any.
    pub python_deps: Option<PathBuf>,
}

/// Everything a build needs from the backend.
pub struct BuildEnv {
    /// The data dir root.
    pub data_dir: PathBuf,
    /// State database (records pip/npm process groups).
    pub db: Arc<Db>,
    /// Function logs.
    pub logs: Arc<Logs>,
    /// Namespace of the function.
    pub ns: String,
    /// Name of the function.
    pub name: String,
    /// The Python interpreter, e.g. `python3`.
    pub python: String,
    /// The npm command.
    pub npm: String,
    /// Longest a dependency install may take.
    pub timeout: Duration,
    /// The sandbox installs run in (`--isolation strict`) and the
    /// namespace's uid, or `None`.
    pub sandbox: Option<(Arc<super::sandbox::Sandbox>, u32)>,
}

/// One dependency install command.
struct InstallCommand {
    program: String,
    args: Vec<std::ffi::OsString>,
    cwd: PathBuf,
    /// Read-only in the sandbox (the unpacked code).
    readable: Vec<PathBuf>,
    /// Writable in the sandbox (the cache dir being filled; given to the
    /// namespace's uid).
    writable: Vec<PathBuf>,
}

impl BuildEnv {
    fn log(&self, text: &str) {
        self.logs.append(&self.ns, &self.name, LogKind::Build, text);
    }
}

/// `<data-dir>/builds/<ns>/<name>/<first 12 hex of sha>`.
pub fn build_dir(data_dir: &Path, ns: &str, name: &str, sha256: &str) -> PathBuf {
    data_dir
        .join("builds")
        .join(ns)
        .join(name)
        .join(short_sha(sha256))
}

/// The first 12 hex characters of a digest.
pub fn short_sha(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}

/// A previous complete build of this code for this runtime, if it is intact.
pub fn load_built(
    data_dir: &Path,
    ns: &str,
    name: &str,
    sha256: &str,
    runtime: Runtime,
) -> Option<Built> {
    let dir = build_dir(data_dir, ns, name, sha256);
    let text = std::fs::read_to_string(dir.join(BUILD_INFO)).ok()?;
    let built: Built = serde_json::from_str(&text).ok()?;
    let deps_ok = built.python_deps.as_ref().is_none_or(|d| d.is_dir());
    (built.runtime == runtime && built.src.is_dir() && deps_ok).then_some(built)
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_suffix() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs a build of `zip_path` (code `sha256`) for `runtime`. The error is the
/// message for the function's status; details are in the build log.
pub async fn build(
    env: &BuildEnv,
    sha256: &str,
    runtime: Runtime,
    zip_path: &Path,
) -> Result<Built, String> {
    let dir = build_dir(&env.data_dir, &env.ns, &env.name, sha256);
    let src = dir.join("src");
    env.log(&format!(
        "unpacking code {} into {}",
        short_sha(sha256),
        src.display()
    ));
    {
        let dir = dir.clone();
        let zip_path = zip_path.to_path_buf();
        // Dropped when this future is (the object was deleted or got newer
        // code): the unpacking thread cannot be interrupted, so it checks
        // the flag and removes what it made (see `unpack`).
        let cancelled = CancelOnDrop::default();
        let flag = cancelled.0.clone();
        let res = tokio::task::spawn_blocking(move || unpack(&zip_path, &dir, &flag))
            .await
            .map_err(|e| format!("unpack task failed: {e}"))?;
        drop(cancelled);
        match res {
            Ok(x) => env.log(&format!("unpacked {} files, {} bytes", x.files, x.bytes)),
            Err(e) => {
                env.log(&e);
                return Err(e);
            }
        }
    }
    if let Some((_, uid)) = &env.sandbox {
        // The namespace's uid can read its code whatever the zip's modes and
        // the umask; the sandbox binds it read-only.
        super::sandbox::chown_tree(&src, *uid)?;
    }
    let python_deps = match runtime.language() {
        Language::Python => python_deps(env, &src, sha256, runtime).await?,
        Language::Node => {
            node_deps(env, &src, sha256, runtime).await?;
            None
        }
    };
    let built = Built {
        runtime,
        src,
        python_deps,
    };
    let info = serde_json::to_string_pretty(&built).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(BUILD_INFO), info)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(BUILD_INFO).display()))?;
    Ok(built)
}

/// True when a requirements file refers to files of the code itself (wheels,
/// paths, other requirement files), so its cache key must include the code.
pub fn requirements_reference_files(text: &str) -> bool {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .any(|l| {
            let remote = l.contains("://") && !l.contains("file://");
            l.starts_with('.')
                || l.starts_with('/')
                || l.starts_with("-r")
                || l.starts_with("-c")
                || l.starts_with("-e")
                || l.starts_with("--requirement")
                || l.starts_with("--constraint")
                || l.starts_with("--editable")
                || l.contains("file:")
                || (!remote
                    && (l.ends_with(".whl") || l.ends_with(".tar.gz") || l.ends_with(".zip")))
        })
}

fn has_requirements(text: &str) -> bool {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .any(|l| !l.is_empty())
}

/// Cache key: sha256 over the runtime, the manifests and (when they refer to
/// the code's own files) the code hash.
pub fn deps_key(runtime: Runtime, manifests: &[&[u8]], code_sha: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(runtime.as_str().as_bytes());
    for m in manifests {
        h.update(b"\0");
        h.update((m.len() as u64).to_le_bytes());
        h.update(m);
    }
    if let Some(sha) = code_sha {
        h.update(b"\0code\0");
        h.update(sha.as_bytes());
    }
    hex::encode(h.finalize())
}

async fn python_deps(
    env: &BuildEnv,
    src: &Path,
    sha256: &str,
    runtime: Runtime,
) -> Result<Option<PathBuf>, String> {
    let req = src.join("requirements.txt");
    let Ok(text) = std::fs::read_to_string(&req) else {
        env.log("no requirements.txt: no dependencies to install");
        return Ok(None);
    };
    if !has_requirements(&text) {
        env.log("requirements.txt lists nothing: no dependencies to install");
        return Ok(None);
    }
    let local = requirements_reference_files(&text);
    let key = deps_key(runtime, &[text.as_bytes()], local.then_some(sha256));
    // Per namespace: an install runs user-chosen code, which must never
    // reach another namespace's functions through a shared cache.
    let cache = env.data_dir.join("deps").join("python").join(&env.ns);
    let target = cache.join(&key);
    if target.is_dir() {
        env.log(&format!("using cached dependencies {}", target.display()));
        return Ok(Some(target));
    }
    std::fs::create_dir_all(&cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let tmp = cache.join(format!(".tmp-{key}-{}", unique_suffix()));
    // A cancelled build (delete, newer code) leaves no half-installed dir.
    let _cleanup = RemoveOnDrop(tmp.clone());
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let mut args: Vec<std::ffi::OsString> = [
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--target",
    ]
    .map(Into::into)
    .to_vec();
    args.push(tmp.clone().into());
    args.extend(["-r".into(), "requirements.txt".into()]);
    let cmd = InstallCommand {
        program: env.python.clone(),
        args,
        cwd: src.to_path_buf(),
        readable: vec![src.to_path_buf()],
        writable: vec![tmp.clone()],
    };
    let shown = format!(
        "{} -m pip install --disable-pip-version-check --no-input --target {} -r requirements.txt",
        env.python,
        tmp.display()
    );
    let res = run_logged(env, cmd, &shown).await;
    finish_cache_dir(env, res, &tmp, &target, "pip install")?;
    Ok(Some(target))
}

/// Moves a finished tmp dir into place (or drops it when the install failed or
/// another build won the race).
fn finish_cache_dir(
    env: &BuildEnv,
    res: Result<(), String>,
    tmp: &Path,
    target: &Path,
    what: &str,
) -> Result<(), String> {
    if let Err(e) = res {
        let _ = std::fs::remove_dir_all(tmp);
        let msg = format!("{what} failed: {e} (see the build log)");
        env.log(&msg);
        return Err(msg);
    }
    if let Err(e) = std::fs::rename(tmp, target) {
        let _ = std::fs::remove_dir_all(tmp);
        if !target.is_dir() {
            let msg = format!("cannot move dependencies into {}: {e}", target.display());
            env.log(&msg);
            return Err(msg);
        }
    }
    env.log(&format!("dependencies installed into {}", target.display()));
    Ok(())
}

/// Local paths a package.json dependency refers to (`file:x`, `./x`), which
/// must be copied next to the manifest in the cache build dir.
fn node_local_refs(pkg: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for section in ["dependencies", "optionalDependencies"] {
        if let Some(map) = pkg.get(section).and_then(|v| v.as_object()) {
            for (name, spec) in map {
                if let Some(spec) = spec.as_str() {
                    let path = spec
                        .strip_prefix("file:")
                        .or_else(|| spec.strip_prefix("link:"))
                        .or_else(|| {
                            (spec.starts_with("./")
                                || spec.starts_with("../")
                                || spec.starts_with('/'))
                            .then_some(spec)
                        });
                    if let Some(p) = path {
                        out.push((name.clone(), p.to_string()));
                    }
                }
            }
        }
    }
    out
}

fn copy_recursively(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.is_dir() {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_recursively(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else if meta.is_file() {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(from, to)?;
    }
    Ok(())
}

async fn node_deps(
    env: &BuildEnv,
    src: &Path,
    sha256: &str,
    runtime: Runtime,
) -> Result<(), String> {
    let manifest = src.join("package.json");
    let Ok(text) = std::fs::read(&manifest) else {
        env.log("no package.json: no dependencies to install");
        return Ok(());
    };
    let pkg: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
        let msg = format!("package.json is not valid JSON: {e}");
        env.log(&msg);
        msg
    })?;
    if std::fs::symlink_metadata(src.join("node_modules")).is_ok() {
        env.log("node_modules is in the code zip: using it as is, npm install skipped");
        return Ok(());
    }
    let has_deps = ["dependencies", "optionalDependencies"].iter().any(|s| {
        pkg.get(*s)
            .and_then(|v| v.as_object())
            .is_some_and(|m| !m.is_empty())
    });
    if !has_deps {
        env.log("package.json has no dependencies: npm install skipped");
        return Ok(());
    }
    let lock = std::fs::read(src.join("package-lock.json")).ok();
    let refs = node_local_refs(&pkg);
    let mut manifests: Vec<&[u8]> = vec![&text];
    if let Some(l) = &lock {
        manifests.push(l);
    }
    let key = deps_key(runtime, &manifests, (!refs.is_empty()).then_some(sha256));
    let cache = env.data_dir.join("deps").join("node").join(&env.ns);
    let target = cache.join(&key);
    if target.join("node_modules").is_dir() {
        env.log(&format!("using cached dependencies {}", target.display()));
    } else {
        std::fs::create_dir_all(&cache)
            .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
        let tmp = cache.join(format!(".tmp-{key}-{}", unique_suffix()));
        let _cleanup = RemoveOnDrop(tmp.clone());
        let prepare = || -> Result<(), String> {
            std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
            std::fs::write(tmp.join("package.json"), &text).map_err(|e| e.to_string())?;
            if let Some(l) = &lock {
                std::fs::write(tmp.join("package-lock.json"), l).map_err(|e| e.to_string())?;
            }
            for (dep, path) in &refs {
                let rel = Path::new(path);
                let clean = rel.components().all(|c| {
                    matches!(
                        c,
                        std::path::Component::Normal(_) | std::path::Component::CurDir
                    )
                });
                if !clean {
                    return Err(format!(
                        "dependency {dep:?}: local path {path:?} must be inside the code zip"
                    ));
                }
                copy_recursively(&src.join(rel), &tmp.join(rel))
                    .map_err(|e| format!("dependency {dep:?}: cannot copy {path:?}: {e}"))?;
            }
            Ok(())
        };
        if let Err(e) = prepare() {
            let _ = std::fs::remove_dir_all(&tmp);
            env.log(&e);
            return Err(e);
        }
        let cmd = InstallCommand {
            program: env.npm.clone(),
            args: [
                "install",
                "--omit=dev",
                "--no-audit",
                "--no-fund",
                "--no-update-notifier",
            ]
            .map(Into::into)
            .to_vec(),
            cwd: tmp.clone(),
            readable: Vec::new(),
            writable: vec![tmp.clone()],
        };
        let shown = format!(
            "(cd {} && {} install --omit=dev --no-audit --no-fund --no-update-notifier)",
            tmp.display(),
            env.npm
        );
        let res = run_logged(env, cmd, &shown).await;
        finish_cache_dir(env, res, &tmp, &target, "npm install")?;
    }
    let modules = target.join("node_modules");
    if !modules.is_dir() {
        std::fs::create_dir_all(&modules)
            .map_err(|e| format!("cannot create {}: {e}", modules.display()))?;
    }
    std::os::unix::fs::symlink(&modules, src.join("node_modules"))
        .map_err(|e| format!("cannot link node_modules: {e}"))?;
    env.log(&format!("linked node_modules -> {}", modules.display()));
    Ok(())
}

/// Sets its flag when dropped: tells a blocking task its caller is gone.
#[derive(Debug, Default)]
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Unpacks the zip at `zip_path` into `dir/src` (blocking): into a fresh
/// temporary directory beside `dir` first, which then replaces `dir`. When
/// `cancelled` is set (the build was dropped: a delete, newer code), it
/// removes what it made instead — also after the rename, so a delete that
/// removed the build tree while this ran cannot be undone by it.
fn unpack(
    zip_path: &Path,
    dir: &Path,
    cancelled: &AtomicBool,
) -> Result<codezip::Extracted, String> {
    let parent = dir.parent().unwrap_or(dir);
    let tmp = parent.join(format!(
        "{}.unpack-{}",
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("build"),
        unique_suffix()
    ));
    let abandon = |path: &Path| {
        let _ = std::fs::remove_dir_all(path);
        // The parent is the object's build tree; leave nothing behind a delete.
        let _ = std::fs::remove_dir(parent);
        Err("the build was cancelled".to_string())
    };
    let src = tmp.join("src");
    std::fs::create_dir_all(&src).map_err(|e| format!("cannot create {}: {e}", src.display()))?;
    let bytes = std::fs::read(zip_path)
        .map_err(|e| format!("cannot read stored code {}: {e}", zip_path.display()))?;
    let extracted = codezip::extract(&bytes, &src);
    if cancelled.load(Ordering::SeqCst) {
        return abandon(&tmp);
    }
    let extracted = match extracted {
        Ok(x) => x,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(format!("cannot unpack the code zip: {e}"));
        }
    };
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| format!("cannot remove the old build dir {}: {e}", dir.display()))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| {
        let _ = std::fs::remove_dir_all(&tmp);
        format!("cannot move the unpacked code to {}: {e}", dir.display())
    })?;
    if cancelled.load(Ordering::SeqCst) {
        return abandon(dir);
    }
    Ok(extracted)
}

/// Removes a directory tree when dropped, also when the future owning it is
/// cancelled (a removal after a successful rename finds nothing to remove).
#[derive(Debug)]
pub struct RemoveOnDrop(pub PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reads lines (lossy UTF-8) until EOF, handing each to `on_line`.
pub async fn pump_lines<R: AsyncRead + Unpin>(r: R, mut on_line: impl FnMut(&str)) {
    let mut reader = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                on_line(line.trim_end_matches(['\n', '\r']));
            }
        }
    }
}

/// Runs a build command in its own process group with its output in the
/// build log. Dropping the future kills the group.
async fn run_logged(env: &BuildEnv, install: InstallCommand, shown: &str) -> Result<(), String> {
    env.log(&format!("$ {shown}"));
    // Kept until the command is done: its cgroup (killed and removed on drop).
    let mut _sandboxed = None;
    let mut cmd = match &env.sandbox {
        None => {
            let mut cmd = Command::new(&install.program);
            cmd.args(&install.args).current_dir(&install.cwd);
            isolate(&mut cmd);
            cmd
        }
        Some((sb, uid)) => {
            for w in &install.writable {
                super::sandbox::chown_tree(w, *uid)?;
            }
            let mut plan = super::sandbox::Plan {
                uid: *uid,
                ro: install.readable.clone(),
                rw: install.writable.clone(),
                network: super::sandbox::Network::Host,
                socket_dir: None,
                bridge_port: None,
                cwd: install.cwd.clone(),
                limits: super::cgroup::Limits {
                    memory_mb: sb.settings.build_memory_mb,
                    pids_max: sb.settings.pids_max.max(512),
                    cpu_millis: sb.settings.cpu_millis,
                },
                tmp_mb: sb.settings.build_tmp_mb,
            };
            let prepared = sb.prepare(&mut plan, false)?;
            let env_file = super::sandbox::env_file(&install_env(sb))?;
            let mut cmd = Command::new(sb.bwrap());
            cmd.args(sb.argv(&plan, &sb.program(&install.program), &install.args))
                .current_dir("/");
            use std::os::fd::AsRawFd;
            super::process::isolate_sandboxed(
                &mut cmd,
                prepared.joiner.clone(),
                env_file.as_raw_fd(),
            );
            _sandboxed = Some((prepared, env_file));
            cmd
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    let pgid = child.id().unwrap_or(0);
    let _guard = GroupGuard::new(pgid);
    if let Err(e) = env.db.record_process(pgid, "build", &env.ns, &env.name) {
        tracing::warn!(error = %e, "cannot record a build process");
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let log = |line: &str| env.log(line);
    let run = async {
        let out = async {
            if let Some(s) = stdout {
                pump_lines(s, log).await;
            }
        };
        let err = async {
            if let Some(s) = stderr {
                pump_lines(s, log).await;
            }
        };
        let (status, _, _) = tokio::join!(child.wait(), out, err);
        status
    };
    let res = tokio::time::timeout(env.timeout, run).await;
    let _ = env.db.forget_process(pgid);
    match res {
        Err(_) => Err(format!("timed out after {} s", env.timeout.as_secs())),
        Ok(Err(e)) => Err(format!("waiting for it failed: {e}")),
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("it exited with {status}")),
    }
}

/// The environment of a sandboxed install: the sandbox's `PATH`, its
/// private `/tmp` as `HOME`, and the operator's package-manager and proxy
/// settings (`PIP_*`, `npm_config_*`, `*_proxy`) — nothing else of the
/// operator's environment.
fn install_env(sb: &super::sandbox::Sandbox) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_string(), sb.path_env().to_string()),
        ("HOME".to_string(), "/tmp".to_string()),
    ];
    for (k, v) in std::env::vars() {
        let lower = k.to_ascii_lowercase();
        if k == "LANG"
            || k.starts_with("PIP_")
            || lower.starts_with("npm_config_")
            || matches!(lower.as_str(), "http_proxy" | "https_proxy" | "no_proxy")
        {
            env.push((k, v));
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zip_file(dir: &Path) -> PathBuf {
        let mut buf = std::io::Cursor::new(Vec::new());
        {
            let mut w = zip::ZipWriter::new(&mut buf);
            w.start_file("main.py", zip::write::SimpleFileOptions::default())
                .unwrap();
            std::io::Write::write_all(&mut w, b"x = 1\n").unwrap();
            w.finish().unwrap();
        }
        let path = dir.join("code.zip");
        std::fs::write(&path, buf.into_inner()).unwrap();
        path
    }

    fn entries(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn unpack_replaces_the_build_dir_through_a_temporary_one() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = zip_file(tmp.path());
        let dir = tmp.path().join("builds/ns/f/0123456789ab");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stale.txt"), "old build").unwrap();
        let x = unpack(&zip, &dir, &AtomicBool::new(false)).unwrap();
        assert_eq!(x.files, 1);
        assert!(dir.join("src/main.py").is_file());
        assert!(!dir.join("stale.txt").exists(), "the old build is replaced");
        assert_eq!(
            entries(dir.parent().unwrap()),
            ["0123456789ab"],
            "no temporary left"
        );
    }

    #[test]
    fn a_cancelled_unpack_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = zip_file(tmp.path());
        // The delete removed the object's build tree while unpacking ran.
        let dir = tmp.path().join("builds/ns/f/0123456789ab");
        let err = unpack(&zip, &dir, &AtomicBool::new(true)).unwrap_err();
        assert!(err.contains("cancelled"), "{err}");
        assert!(
            !tmp.path().join("builds/ns/f").exists(),
            "the deleted object's build tree is not recreated: {:?}",
            entries(&tmp.path().join("builds/ns"))
        );
    }

    #[test]
    fn local_requirements_are_detected() {
        assert!(requirements_reference_files(
            "./tinydep-1.0-py3-none-any.whl\n"
        ));
        assert!(requirements_reference_files("-r other.txt"));
        assert!(requirements_reference_files("pkg @ file:///x/y.whl"));
        assert!(!requirements_reference_files("requests==2.31\n# ./x.whl\n"));
        assert!(!requirements_reference_files(
            "https://example.com/pkg-1.0-py3-none-any.whl"
        ));
    }

    #[test]
    fn deps_key_depends_on_runtime_manifest_and_code() {
        let a = deps_key(Runtime::Python311, &[b"x==1"], None);
        assert_eq!(a, deps_key(Runtime::Python311, &[b"x==1"], None));
        assert_ne!(a, deps_key(Runtime::Nodejs20, &[b"x==1"], None));
        assert_ne!(a, deps_key(Runtime::Python311, &[b"x==2"], None));
        assert_ne!(a, deps_key(Runtime::Python311, &[b"x==1"], Some("abc")));
        // Manifest boundaries matter.
        assert_ne!(
            deps_key(Runtime::Nodejs20, &[b"ab", b"c"], None),
            deps_key(Runtime::Nodejs20, &[b"a", b"bc"], None)
        );
    }

    #[test]
    fn node_local_refs_found() {
        let pkg =
            serde_json::json!({"dependencies": {"a": "file:./a.tgz", "b": "^1.0.0", "c": "./c"}});
        let refs = node_local_refs(&pkg);
        assert_eq!(refs.len(), 2);
    }
}
