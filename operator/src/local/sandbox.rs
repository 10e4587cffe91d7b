//! The sandbox of every user process on the local backend (`--isolation
//! strict`, the default): bubblewrap builds new PID, mount, network, IPC, UTS
//! and cgroup namespaces over a read-only root made of the system directories
//! and the object's own code; setpriv drops to the namespace's unprivileged
//! uid with no capabilities and no-new-privs; a cgroup per process limits
//! memory, tasks and CPU. Functions and services are reached only through a
//! unix socket in a directory that exists in their sandbox and nowhere else
//! a user process can see. The design and its alternatives are in
//! docs/decisions.md ("One process model …").
//!
//! [`Sandbox::argv`] is a pure function of the [`Sandbox`] facts and a
//! [`Plan`], so what a process can see is unit-tested without starting one.

use super::cgroup::{self, Group, Hierarchy, Joiner, Limits};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

/// How user code is isolated on the local backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Isolation {
    /// Every user process in a bubblewrap sandbox under its namespace's own
    /// uid, with cgroup limits (the default).
    Strict,
    /// No isolation: user code runs as the operator's user, sees the host's
    /// file system and network. Only for trusted code.
    None,
}

/// Where the serving socket is inside a sandbox.
pub const SOCKET_DIR_INSIDE: &str = "/run/sless";
/// The socket a function's runtime server (or a service's bridge) listens on.
pub const SOCKET_INSIDE: &str = "/run/sless/http.sock";
/// The port a service listens on inside its own network namespace.
pub const SERVICE_PORT_INSIDE: u16 = 8080;
/// Where the operator's own binary is bound inside a sandbox (for the bridge).
pub const OPERATOR_INSIDE: &str = "/run/sless-bin/sless-operator";
/// The descriptor a sandbox's first program reads its environment from.
pub const ENV_FD: i32 = 3;
/// The environment of bwrap and setpriv themselves (they run as root: nothing
/// of the user's may reach them).
pub const ROOT_ENV: [(&str, &str); 1] = [("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")];
/// First uid (and gid) given to a namespace.
pub const UID_BASE: u32 = 200_000;

/// `/etc` entries bound read-only when present (name resolution, TLS roots,
/// the dynamic linker's cache, user names, time zone, alternatives).
const ETC_FILES: [&str; 17] = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/mime.types",
];

/// Whether a sandbox keeps the host's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Its own network namespace with only a loopback interface (functions,
    /// jobs, services).
    Isolated,
    /// The host's network (dependency installs: they reach package registries).
    Host,
}

/// Tunables of `--isolation strict` (from `serve` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Size of the private `/tmp` (also `HOME`) of a function, job or service, MiB.
    pub tmp_mb: u32,
    /// Most tasks (processes + threads) of one function, job or service.
    pub pids_max: u32,
    /// CPU quota per process tree, thousandths of a core.
    pub cpu_millis: u32,
    /// Memory of a dependency install, MiB.
    pub build_memory_mb: u32,
    /// Size of the private `/tmp` of a dependency install, MiB.
    pub build_tmp_mb: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tmp_mb: 64,
            pids_max: 256,
            cpu_millis: 1000,
            build_memory_mb: 2048,
            build_tmp_mb: 1024,
        }
    }
}

/// What one sandboxed process gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Its uid and gid.
    pub uid: u32,
    /// Host paths bound read-only at the same path (its code, dependencies,
    /// the runtime servers).
    pub ro: Vec<PathBuf>,
    /// Host paths bound writable at the same path (a job's run dir, an
    /// install's target dir). Must be owned by `uid` to be written.
    pub rw: Vec<PathBuf>,
    /// Its network.
    pub network: Network,
    /// The host directory bound at [`SOCKET_DIR_INSIDE`], if it serves.
    pub socket_dir: Option<PathBuf>,
    /// Run `sandbox-exec` as a bridge in front of the command: the socket is forwarded
    /// to this port inside (services).
    pub bridge_port: Option<u16>,
    /// Working directory (inside; one of the bound paths).
    pub cwd: PathBuf,
    /// Memory, tasks, CPU.
    pub limits: Limits,
    /// Size of the private `/tmp`, MiB.
    pub tmp_mb: u32,
}

/// What this machine gives the sandbox: the tools, the cgroup hierarchy, the
/// interpreters' locations. Found once at start by [`Sandbox::probe`].
#[derive(Debug)]
pub struct Sandbox {
    bwrap: PathBuf,
    setpriv: PathBuf,
    operator_exe: PathBuf,
    /// Interpreter install prefixes outside `/usr`, bound read-only.
    system_ro: Vec<PathBuf>,
    /// `PATH` inside.
    path: String,
    /// Interpreter names (`python3`, `node`, `npm`) → their real files.
    programs: Vec<(String, PathBuf)>,
    cgroups: Hierarchy,
    /// This data dir's parent group, relative to the hierarchy roots.
    cgroup_parent: PathBuf,
    /// Host directory of the per-process socket dirs.
    socket_root: PathBuf,
    counter: AtomicU64,
    /// The tunables.
    pub settings: Settings,
}

/// Interpreters the sandbox must resolve: the name the launch uses and how
/// to ask it where it lives.
#[derive(Debug, Clone)]
pub struct Interpreters {
    /// Python (e.g. `python3`).
    pub python: String,
    /// Node.js (e.g. `node`).
    pub node: String,
    /// npm (e.g. `npm`).
    pub npm: String,
}

impl Sandbox {
    /// Checks that strict isolation can work here and finds what it needs;
    /// the error says exactly what is missing and how to proceed.
    pub fn probe(
        data_dir: &Path,
        interpreters: &Interpreters,
        settings: Settings,
    ) -> Result<Sandbox, String> {
        const HOW: &str = "start with --isolation none (user code then runs unsandboxed as the operator's user; only for trusted code)";
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            return Err(format!(
                "strict isolation needs root (to run user code under per-namespace uids and cgroups); run the operator as root, or {HOW}"
            ));
        }
        let bwrap = which("bwrap").ok_or_else(|| {
            format!("bubblewrap (bwrap) is not installed: apt-get install bubblewrap, or {HOW}")
        })?;
        let setpriv = which("setpriv").ok_or_else(|| {
            format!("setpriv (util-linux) is not installed: apt-get install util-linux, or {HOW}")
        })?;
        let operator_exe = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .map_err(|e| format!("cannot find the operator's own binary: {e}"))?;
        let cgroups = cgroup::detect().map_err(|e| format!("{e}; or {HOW}"))?;
        let cgroup_parent = PathBuf::from(format!("sless-{}", short_hash(data_dir)));
        cgroups
            .prepare_parent(&cgroup_parent)
            .map_err(|e| format!("cgroups are not writable: {e}; or {HOW}"))?;
        cgroups.clear_children(&cgroup_parent);

        let mut system_ro = Vec::new();
        let mut programs = Vec::new();
        let mut bin_dirs = Vec::new();
        let python = python_locations(&interpreters.python)?;
        for p in &python.prefixes {
            push_outside_usr(&mut system_ro, p);
        }
        if let Some(bin) = python.executable.parent() {
            bin_dirs.push(bin.to_path_buf());
        }
        programs.push((interpreters.python.clone(), python.executable.clone()));
        for name in [&interpreters.node, &interpreters.npm] {
            if let Some(real) = which(name).and_then(|p| p.canonicalize().ok()) {
                // <prefix>/bin/node, <prefix>/lib/node_modules/npm/bin/npm-cli.js
                if let Some(prefix) = real
                    .ancestors()
                    .find(|a| a.ends_with("bin"))
                    .and_then(Path::parent)
                {
                    push_outside_usr(&mut system_ro, prefix);
                }
                if let Some(bin) = which(name).as_deref().and_then(Path::parent) {
                    bin_dirs.push(bin.to_path_buf());
                }
                programs.push((name.clone(), which(name).unwrap_or(real)));
            }
        }
        let mut path: Vec<String> = Vec::new();
        for d in bin_dirs
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .chain(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from))
        {
            if !path.contains(&d) {
                path.push(d);
            }
        }
        let socket_root = Path::new("/run/sless").join(short_hash(data_dir));
        let _ = std::fs::remove_dir_all(&socket_root);
        std::fs::create_dir_all(&socket_root)
            .map_err(|e| format!("cannot create {}: {e}", socket_root.display()))?;
        set_mode(&socket_root, 0o700)?;
        let sandbox = Sandbox {
            bwrap,
            setpriv,
            operator_exe,
            system_ro,
            path: path.join(":"),
            programs,
            cgroups,
            cgroup_parent,
            socket_root,
            counter: AtomicU64::new(0),
            settings,
        };
        sandbox.self_test()?;
        Ok(sandbox)
    }

    /// Runs `true` in a sandbox as a namespace uid: proves the kernel allows
    /// the namespaces and bwrap works, before any user code depends on it.
    fn self_test(&self) -> Result<(), String> {
        let plan = Plan {
            uid: UID_BASE,
            ro: vec![],
            rw: vec![],
            network: Network::Isolated,
            socket_dir: None,
            bridge_port: None,
            cwd: PathBuf::from("/"),
            limits: Limits {
                memory_mb: 64,
                pids_max: 16,
                cpu_millis: 1000,
            },
            tmp_mb: 1,
        };
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let argv = self.argv(&plan, Path::new("/bin/true"), &[]);
        let env = env_file(&[("PATH".to_string(), self.path.clone())])?;
        let fd = env.as_raw_fd();
        let mut cmd = std::process::Command::new(&self.bwrap);
        cmd.args(&argv)
            .env_clear()
            .envs(ROOT_ENV)
            .stdin(Stdio::null());
        // SAFETY: only dup2/fcntl between fork and exec.
        unsafe {
            cmd.pre_exec(move || hand_over_env_fd(fd));
        }
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bwrap.display()))?;
        drop(env);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "bubblewrap cannot create a sandbox here ({}): {}; the kernel must allow mount, PID and network namespaces; or start with --isolation none",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The real file of an interpreter name (`python3` → its executable);
    /// the name itself when unknown.
    pub fn program(&self, name: &str) -> PathBuf {
        self.programs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.clone())
            .unwrap_or_else(|| PathBuf::from(name))
    }

    /// `PATH` inside a sandbox: the interpreters' dirs, then the system's.
    pub fn path_env(&self) -> &str {
        &self.path
    }

    /// The `bwrap` binary.
    pub fn bwrap(&self) -> &Path {
        &self.bwrap
    }

    /// The arguments of `bwrap` that run `program args` under `plan`.
    pub fn argv(&self, plan: &Plan, program: &Path, args: &[OsString]) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |items: &[&str]| a.extend(items.iter().map(OsString::from));
        push(&[
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sless",
            "--die-with-parent",
        ]);
        if plan.network == Network::Isolated {
            push(&["--unshare-net"]);
        }
        push(&[
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/sbin",
            "/sbin",
            "--symlink",
            "usr/lib",
            "/lib",
        ]);
        if Path::new("/usr/lib64").exists() {
            push(&["--symlink", "usr/lib64", "/lib64"]);
        }
        if Path::new("/usr/lib32").exists() {
            push(&["--symlink", "usr/lib32", "/lib32"]);
        }
        for f in ETC_FILES {
            push(&["--ro-bind-try", f, f]);
        }
        push(&["--proc", "/proc", "--dev", "/dev"]);
        let tmp_bytes = (u64::from(plan.tmp_mb) * 1024 * 1024).to_string();
        push(&["--perms", "1777", "--size", &tmp_bytes, "--tmpfs", "/tmp"]);
        let mut bind = |flag: &str, p: &Path| {
            a.push(flag.into());
            a.push(p.into());
            a.push(p.into());
        };
        for p in &self.system_ro {
            bind("--ro-bind", p);
        }
        for p in &plan.ro {
            bind("--ro-bind", p);
        }
        for p in &plan.rw {
            bind("--bind", p);
        }
        if let Some(dir) = &plan.socket_dir {
            a.extend(["--bind".into(), dir.into(), SOCKET_DIR_INSIDE.into()]);
        }
        a.extend([
            "--ro-bind".into(),
            self.operator_exe.clone().into(),
            OPERATOR_INSIDE.into(),
        ]);
        // bwrap creates the parents of a bind's destination with the host
        // directories' modes: a 0700 data dir would hide the code from the
        // sandbox's uid. They hold nothing but the binds: make them 0755.
        let mut inside_only: Vec<PathBuf> = ETC_FILES.iter().map(PathBuf::from).collect();
        inside_only.extend(
            [
                plan.socket_dir
                    .as_ref()
                    .map(|_| PathBuf::from(SOCKET_DIR_INSIDE)),
                Some(PathBuf::from(OPERATOR_INSIDE)),
            ]
            .into_iter()
            .flatten(),
        );
        let all = self
            .system_ro
            .iter()
            .chain(&plan.ro)
            .chain(&plan.rw)
            .chain(&inside_only);
        for dir in bind_parents(all) {
            a.extend(["--chmod".into(), "0755".into(), dir.into()]);
        }
        a.extend(["--chdir".into(), plan.cwd.clone().into(), "--".into()]);
        let id = plan.uid.to_string();
        a.push(self.setpriv.clone().into());
        for x in [
            "--reuid",
            &id,
            "--regid",
            &id,
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ] {
            a.push(x.into());
        }
        let env_fd = ENV_FD.to_string();
        for x in [OPERATOR_INSIDE, "sandbox-exec", "--env-fd", &env_fd] {
            a.push(x.into());
        }
        if let Some(port) = plan.bridge_port {
            for x in ["--socket", SOCKET_INSIDE, "--port", &port.to_string()] {
                a.push(x.into());
            }
        }
        a.push("--".into());
        a.push(program.into());
        a.extend(args.iter().cloned());
        a
    }

    /// Creates what a process of `plan` needs on the host before it starts:
    /// its cgroups and (when it serves) its socket dir, owned by its uid.
    pub fn prepare(&self, plan: &mut Plan, serves: bool) -> Result<Prepared, String> {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let group = self
            .cgroups
            .create(&self.cgroup_parent.join(format!("p{n}")), plan.limits)?;
        let joiner = group.joiner()?;
        let socket = if serves {
            let dir = self.socket_root.join(format!("{n}"));
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            chown(&dir, plan.uid)?;
            set_mode(&dir, 0o700)?;
            let sock = dir.join("http.sock");
            if sock.as_os_str().len() >= 108 {
                return Err(format!("socket path {} is too long", sock.display()));
            }
            plan.socket_dir = Some(dir.clone());
            Some(SocketDir { dir, sock })
        } else {
            None
        };
        Ok(Prepared {
            group,
            joiner,
            socket,
        })
    }

    /// What a process forked by a zygote (in the zygote's sandbox, whose
    /// socket dir on the host is `zygote_dir`) needs: its own cgroups with
    /// `limits` and its own socket dir `zygote_dir/c<n>` owned by `uid`,
    /// seen inside as `/run/sless/c<n>/http.sock` (the second value).
    pub fn prepare_forked(
        &self,
        zygote_dir: &Path,
        uid: u32,
        limits: Limits,
    ) -> Result<(Prepared, String), String> {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let group = self
            .cgroups
            .create(&self.cgroup_parent.join(format!("p{n}")), limits)?;
        let joiner = group.joiner()?;
        let dir = zygote_dir.join(format!("c{n}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        chown(&dir, uid)?;
        set_mode(&dir, 0o700)?;
        let sock = dir.join("http.sock");
        if sock.as_os_str().len() >= 108 {
            return Err(format!("socket path {} is too long", sock.display()));
        }
        let inside = format!("{SOCKET_DIR_INSIDE}/c{n}/http.sock");
        let socket = Some(SocketDir { dir, sock });
        Ok((
            Prepared {
                group,
                joiner,
                socket,
            },
            inside,
        ))
    }
}

/// The environment of a sandboxed process in an anonymous memory file
/// (NUL-separated `KEY=VALUE`), handed to it as [`ENV_FD`]. Close-on-exec
/// here, so no other child the operator starts meanwhile inherits it.
pub fn env_file(env: &[(String, String)]) -> Result<std::os::fd::OwnedFd, String> {
    use std::io::Write;
    use std::os::fd::{FromRawFd, OwnedFd};
    let name = c"sless-env";
    // SAFETY: memfd_create with a NUL-terminated name; the fd is owned below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!(
            "cannot create the environment file: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    file.write_all(&env_block(env))
        .map_err(|e| format!("cannot write the environment file: {e}"))?;
    Ok(file.into())
}

/// An environment as NUL-separated `KEY=VALUE` (what `sandbox-exec`, the
/// zygote and a warm Node process read).
pub fn env_block(env: &[(String, String)]) -> Vec<u8> {
    let mut buf = Vec::new();
    for (k, v) in env {
        buf.extend_from_slice(k.as_bytes());
        buf.push(b'=');
        buf.extend_from_slice(v.as_bytes());
        buf.push(0);
    }
    buf
}

/// Makes `fd` the child's [`ENV_FD`], open across exec. Call only between
/// fork and exec (async-signal-safe: `dup2`, or `fcntl` when it already is
/// that number, since `dup2` onto itself would keep close-on-exec).
pub fn hand_over_env_fd(fd: i32) -> std::io::Result<()> {
    // SAFETY: plain syscalls on descriptors of this (forked) process.
    let rc = unsafe {
        if fd == ENV_FD {
            libc::fcntl(fd, libc::F_SETFD, 0)
        } else {
            libc::dup2(fd, ENV_FD)
        }
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What [`Sandbox::prepare`] made for one process; dropping it kills what
/// is left in its cgroup and removes the cgroup and the socket dir.
#[derive(Debug)]
pub struct Prepared {
    /// Its cgroups.
    pub group: Group,
    /// For the forked child.
    pub joiner: Joiner,
    /// Its socket dir, when it serves.
    pub socket: Option<SocketDir>,
}

/// A per-process socket directory on the host.
#[derive(Debug)]
pub struct SocketDir {
    dir: PathBuf,
    /// `<dir>/http.sock`, the host path of [`SOCKET_INSIDE`].
    pub sock: PathBuf,
}

impl SocketDir {
    /// The directory (host path).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prepared {
    /// Sends `signal` to the user's processes of the sandbox whose outer
    /// bwrap is `outer` (not to bwrap itself or its PID-1 reaper: their
    /// death would SIGKILL everything before the user's code could finish).
    pub fn signal_user_processes(&self, outer: u32, signal: i32) {
        for pid in self.group.pids() {
            if pid == outer || parent_of(pid) == Some(outer) {
                continue;
            }
            // SAFETY: plain syscall on a process of our own cgroup.
            unsafe {
                libc::kill(pid as libc::pid_t, signal);
            }
        }
    }
}

/// The directories bwrap creates to hold the binds `paths`: every ancestor
/// except `/`, `/tmp` (the private tmpfs) and anything inside `/usr` or inside
/// another bind (a chmod there would change a host directory).
fn bind_parents<'a>(paths: impl Iterator<Item = &'a PathBuf> + Clone) -> Vec<PathBuf> {
    let bound: Vec<&PathBuf> = paths.clone().collect();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        for anc in p.ancestors().skip(1) {
            let inside_bind = bound.iter().any(|b| anc.starts_with(b));
            if anc == Path::new("/")
                || anc == Path::new("/tmp")
                || anc.starts_with("/usr")
                || inside_bind
            {
                continue;
            }
            if !out.iter().any(|o| o == anc) {
                out.push(anc.to_path_buf());
            }
        }
    }
    out.sort();
    out
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The uid of namespace number `index` (0-based, allocated in `state.db`).
pub fn uid_for_index(index: u32) -> u32 {
    UID_BASE.saturating_add(index)
}

/// Gives `path` (and everything under it) to `uid`.
pub fn chown_tree(path: &Path, uid: u32) -> Result<(), String> {
    chown(path, uid)?;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        let entries =
            std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        for e in entries.flatten() {
            chown_tree(&e.path(), uid)?;
        }
    }
    Ok(())
}

fn chown(path: &Path, uid: u32) -> Result<(), String> {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))
        .map_err(|e| format!("cannot give {} to uid {uid}: {e}", path.display()))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot chmod {}: {e}", path.display()))
}

fn push_outside_usr(v: &mut Vec<PathBuf>, p: &Path) {
    let p = p.to_path_buf();
    if !p.starts_with("/usr") && p != Path::new("/") && !v.contains(&p) {
        v.push(p);
    }
}

/// A short stable name for a data dir (cgroup and socket dir names).
fn short_hash(data_dir: &Path) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(data_dir.as_os_str().as_encoded_bytes());
    hex::encode(&h[..6])
}

/// Finds `name` on `PATH` (or takes it as a path when it has a `/`).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

struct PythonLocations {
    executable: PathBuf,
    prefixes: Vec<PathBuf>,
}

/// Asks the Python interpreter where it really lives (a pyenv shim is a
/// script that cannot run inside a sandbox).
fn python_locations(python: &str) -> Result<PythonLocations, String> {
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import sys; print(sys.executable); print(sys.prefix); print(sys.base_prefix)",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{python} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().map(PathBuf::from);
    let executable = lines
        .next()
        .filter(|p| p.is_absolute())
        .ok_or_else(|| format!("{python} did not say where its executable is"))?;
    Ok(PythonLocations {
        executable,
        prefixes: lines.filter(|p| p.is_absolute()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox() -> Sandbox {
        Sandbox {
            bwrap: "/usr/bin/bwrap".into(),
            setpriv: "/usr/bin/setpriv".into(),
            operator_exe: "/opt/sless/sless-operator".into(),
            system_ro: vec!["/root/.pyenv/versions/3.11.7".into()],
            path: "/usr/bin:/bin".into(),
            programs: vec![],
            cgroups: Hierarchy::V2("/sys/fs/cgroup".into()),
            cgroup_parent: "sless-x".into(),
            socket_root: "/run/sless/x".into(),
            counter: AtomicU64::new(0),
            settings: Settings::default(),
        }
    }

    fn plan() -> Plan {
        Plan {
            uid: 200_003,
            ro: vec!["/data/builds/ns/f/abc/src".into()],
            rw: vec![],
            network: Network::Isolated,
            socket_dir: Some("/run/sless/x/7".into()),
            bridge_port: None,
            cwd: "/data/builds/ns/f/abc/src".into(),
            limits: Limits {
                memory_mb: 128,
                pids_max: 256,
                cpu_millis: 1000,
            },
            tmp_mb: 64,
        }
    }

    fn text(argv: &[OsString]) -> String {
        argv.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_function_sees_only_system_dirs_its_code_and_its_socket() {
        let argv = text(&sandbox().argv(&plan(), Path::new("/usr/bin/python3"), &["-u".into()]));
        for needed in [
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "--ro-bind /usr /usr",
            "--ro-bind /root/.pyenv/versions/3.11.7 /root/.pyenv/versions/3.11.7",
            "--ro-bind /data/builds/ns/f/abc/src /data/builds/ns/f/abc/src",
            "--bind /run/sless/x/7 /run/sless",
            "--perms 1777 --size 67108864 --tmpfs /tmp",
            "--proc /proc --dev /dev",
            "--chdir /data/builds/ns/f/abc/src --",
            "/usr/bin/setpriv --reuid 200003 --regid 200003 --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- /run/sless-bin/sless-operator sandbox-exec --env-fd 3 -- /usr/bin/python3 -u",
        ] {
            assert!(argv.contains(needed), "{needed:?} missing in {argv}");
        }
        // The parents bwrap makes are readable; /tmp stays the private tmpfs.
        assert!(argv.contains("--chmod 0755 /data/builds/ns/f "), "{argv}");
        assert!(argv.contains("--chmod 0755 /root/.pyenv "), "{argv}");
        assert!(!argv.contains("--chmod 0755 /tmp "), "{argv}");
        assert!(argv.contains("--chmod 0755 /run "), "{argv}");
        assert!(
            !argv.contains("--chmod 0755 /data/builds/ns/f/abc/src "),
            "{argv}"
        );
        // Nothing else of the data dir, never the whole root or /root.
        assert!(!argv.contains("--bind / "), "{argv}");
        assert!(!argv.contains(" /root /root"), "{argv}");
        assert!(!argv.contains("bind /data /data"), "{argv}");
        assert!(!argv.contains("bind /data/builds/ns "), "{argv}");
        // The private /tmp comes before the binds that may land inside it.
        let tmp = argv.find("--tmpfs /tmp").unwrap();
        assert!(tmp < argv.find("--ro-bind /data").unwrap());
    }

    #[test]
    fn installs_keep_the_host_network_and_services_get_the_bridge() {
        let mut p = plan();
        p.network = Network::Host;
        assert!(!text(&sandbox().argv(&p, Path::new("/bin/true"), &[])).contains("--unshare-net"));
        let mut p = plan();
        p.bridge_port = Some(8080);
        let argv = text(&sandbox().argv(&p, Path::new("/usr/bin/node"), &["main.js".into()]));
        assert!(
            argv.contains("--ro-bind /opt/sless/sless-operator /run/sless-bin/sless-operator"),
            "{argv}"
        );
        assert!(
            argv.ends_with("-- /run/sless-bin/sless-operator sandbox-exec --env-fd 3 --socket /run/sless/http.sock --port 8080 -- /usr/bin/node main.js"),
            "{argv}"
        );
    }

    #[test]
    fn namespace_uids_start_at_the_base() {
        assert_eq!(uid_for_index(0), 200_000);
        assert_eq!(uid_for_index(5), 200_005);
        assert_eq!(uid_for_index(u32::MAX), u32::MAX);
    }
}
