//! One function process: start a runtime server (docs/runtime-protocol.md),
//! wait for its `SLESS_READY port=N` line, forward its output to the run log,
//! watch its memory, and stop it (SIGTERM, then SIGKILL after a grace period).
//! The restart policy lives in [`Backoff`]; the backend's worker loop applies it.

use super::build::pump_lines;
use super::db::Db;
use super::process::{GroupGuard, isolate, isolate_sandboxed, rss_kib, signal_group};
use super::sandbox::{self, Plan, Prepared, Sandbox};
use super::sockets::{self, HostSockets, SocketFile};
use crate::api::upstream::Upstream;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::process::Command;
use tokio::sync::{oneshot, watch};

/// How to start a function process.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The interpreter (`python3`, `node`).
    pub program: String,
    /// Its arguments (interpreter flags, then the server script).
    pub args: Vec<OsString>,
    /// Working directory: the unpacked code.
    pub cwd: PathBuf,
    /// The complete environment (the operator's is not inherited).
    pub env: Vec<(String, String)>,
    /// How long to wait for the READY line.
    pub ready_timeout: Duration,
    /// Kill the process when its RSS exceeds this many MiB.
    pub memory_mb: u32,
    /// The function's per-invocation timeout (handed to the proxy).
    pub timeout: Duration,
    /// Namespace (for process records).
    pub ns: String,
    /// Function name (for process records).
    pub name: String,
    /// How readiness is detected.
    pub ready: Readiness,
    /// The sandbox it runs in (`--isolation strict`), or `None`.
    pub sandbox: Option<SandboxLaunch>,
    /// A descriptor to hand the process as its fd 4 (a zygote's control
    /// socket); the caller keeps it open until the spawn.
    pub control_fd: Option<std::os::fd::RawFd>,
    /// Its stdin is a pipe kept in [`Spawned`] (a warm Node process reads
    /// its function's environment from it, see [`Spawned::assign`]);
    /// otherwise `/dev/null`.
    pub stdin_pipe: bool,
    /// Unsandboxed and serving: where each process of this launch gets a
    /// unix socket of its own (`SLESS_SOCKET`, set when it is spawned or
    /// assigned); `None`: it serves on loopback TCP (or in its sandbox).
    pub socket: Option<Arc<HostSockets>>,
}

/// The descriptor number [`Launch::control_fd`] gets in the process.
pub const CONTROL_FD: i32 = 4;

/// A launch inside the strict sandbox.
#[derive(Debug, Clone)]
pub struct SandboxLaunch {
    /// The machine's sandbox facts.
    pub sandbox: Arc<Sandbox>,
    /// What this process may see and use.
    pub plan: Plan,
    /// True when it serves HTTP on the sandbox's unix socket.
    pub serves: bool,
}

/// Where a process's output lines go (the function's run log).
pub type LineSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Tells when a process has exited (see [`Proc::exit_watch`]).
#[derive(Debug, Clone)]
pub struct ExitWatch(watch::Receiver<Option<String>>);

impl ExitWatch {
    /// Waits up to `limit` for the exit; true when it happened.
    pub async fn wait(mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            // A closed channel means the waiter is gone: the process was reaped.
            let _ = self.0.wait_for(|s| s.is_some()).await;
        })
        .await
        .is_ok()
    }
}

/// A running function process. Dropping the last handle kills its group.
pub struct Proc {
    /// Process id (also its process group id).
    pub pid: u32,
    /// Loopback port it serves on.
    pub port: u16,
    /// The function's timeout at start.
    pub timeout: Duration,
    /// When it became ready.
    pub started: Instant,
    exited: watch::Receiver<Option<String>>,
    /// Bound to the process's unix socket (sandboxed servers, and
    /// unsandboxed ones given a [`SocketFile`]).
    client: Option<Upstream>,
    /// Its unix socket outside a sandbox, removed after the process.
    _socket: Option<SocketFile>,
    /// Its sandbox's cgroup and socket dir (dropped after the guard).
    _guard: GroupGuard,
    sandboxed: Option<Arc<Prepared>>,
    /// Forked by a zygote: `pid` is the user's process itself (no bwrap
    /// around it), signalled directly.
    forked: bool,
}

impl std::fmt::Debug for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proc")
            .field("pid", &self.pid)
            .field("port", &self.port)
            .finish()
    }
}

impl Proc {
    /// `http://127.0.0.1:<port>`, or `http://localhost` for a process
    /// behind a unix socket (reached with [`Proc::client`]).
    pub fn base_url(&self) -> String {
        if self.client.is_some() {
            "http://localhost".to_string()
        } else {
            format!("http://127.0.0.1:{}", self.port)
        }
    }

    /// The proxy's client bound to the process's unix socket, if it has one.
    pub fn client(&self) -> Option<Upstream> {
        self.client.clone()
    }

    /// Where it serves, for log lines.
    pub fn endpoint(&self) -> String {
        if self.client.is_some() {
            "its unix socket".to_string()
        } else {
            format!("127.0.0.1:{}", self.port)
        }
    }

    /// Its sandbox's socket dir on the host (strict, serving processes).
    pub fn socket_dir(&self) -> Option<PathBuf> {
        let socket = self.sandboxed.as_ref()?.socket.as_ref()?;
        Some(socket.dir().to_path_buf())
    }

    /// Host pids of the processes in its sandbox's cgroup (strict).
    pub fn group_pids(&self) -> Vec<u32> {
        self.sandboxed
            .as_ref()
            .map(|p| p.group.pids())
            .unwrap_or_default()
    }

    /// Waits until the process exits; returns how it exited.
    pub async fn wait_exit(&self) -> String {
        let mut rx = self.exited.clone();
        loop {
            if let Some(s) = rx.borrow_and_update().clone() {
                return s;
            }
            if rx.changed().await.is_err() {
                return "exited (status unknown)".to_string();
            }
        }
    }

    /// A handle that tells when the process has exited, usable after this
    /// `Proc` is dropped (dropping it kills the group; the exit follows).
    pub fn exit_watch(&self) -> ExitWatch {
        ExitWatch(self.exited.clone())
    }

    /// True once the process has exited.
    pub fn has_exited(&self) -> bool {
        self.exited.borrow().is_some()
    }

    /// Stops the process: SIGTERM to its group, SIGKILL after `grace`.
    pub async fn stop(&self, grace: Duration) {
        if !self.has_exited() {
            match &self.sandboxed {
                // Not bwrap itself: its death would kill the user's code at once.
                Some(p) if !self.forked => p.signal_user_processes(self.pid, libc::SIGTERM),
                _ => signal_group(self.pid, libc::SIGTERM),
            }
            if tokio::time::timeout(grace, self.wait_exit()).await.is_err() {
                tracing::warn!(
                    pid = self.pid,
                    "function process ignored SIGTERM; killing it"
                );
            }
        }
        // Whatever else is left in its group goes too.
        signal_group(self.pid, libc::SIGKILL);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.wait_exit()).await;
    }
}

/// Parses `SLESS_READY port=N` (the port) or `SLESS_READY socket=PATH` (0).
pub fn parse_ready(line: &str) -> Option<u16> {
    let rest = line.trim().strip_prefix("SLESS_READY ")?;
    if let Some(path) = rest.strip_prefix("socket=") {
        return (!path.trim().is_empty()).then_some(0);
    }
    rest.strip_prefix("port=")
        .and_then(|p| p.trim().parse().ok())
        .filter(|p| *p != 0)
}

/// Lines of stderr kept for the failure message.
const STDERR_TAIL: usize = 12;

/// How a started process shows it is ready to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// A runtime server: it prints `SLESS_READY port=N` on stdout.
    Line,
    /// A user's server listening on `port`: `GET path` answers below 500.
    Http {
        /// The loopback port it was told to listen on (`$PORT`).
        port: u16,
        /// The path polled, e.g. `/` or `/healthz`.
        path: String,
    },
}

/// A process that was started and whose output is being pumped, but that is
/// not known to be ready yet. Dropping it kills its process group.
pub struct Spawned {
    /// Process id (also its process group id).
    pub pid: u32,
    guard: GroupGuard,
    exit_rx: watch::Receiver<Option<String>>,
    ready_rx: Option<oneshot::Receiver<u16>>,
    tail: Arc<Mutex<VecDeque<String>>>,
    stderr_done: Option<tokio::task::JoinHandle<()>>,
    sink: LineSink,
    sandboxed: Option<Arc<Prepared>>,
    forked: bool,
    stdin: Option<tokio::process::ChildStdin>,
    /// Its unix socket outside a sandbox (see [`Launch::socket`]).
    socket: Option<SocketFile>,
}

/// Starts `launch` in its own process group: stdout (after a READY line) and
/// stderr go to `sink`, the exit is recorded, nothing is awaited.
pub fn spawn(launch: &Launch, db: &Arc<Db>, sink: LineSink) -> Result<Spawned, String> {
    let (socket, env) = socket_env(launch);
    // Kept open until the child has its copy (dropped when this returns).
    let (mut cmd, sandboxed, _env_file) = command(launch, env)?;
    cmd.stdin(if launch.stdin_pipe {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", launch.program))?;
    let pid = child.id().unwrap_or(0);
    let guard = GroupGuard::new(pid);
    if let Err(e) = db.record_process(pid, "run", &launch.ns, &launch.name) {
        tracing::warn!(error = %e, "cannot record a function process");
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let stdin = child.stdin.take();
    let is_sandboxed = sandboxed.is_some();
    let exit = async move {
        match child.wait().await {
            Ok(s) => describe_exit(s, is_sandboxed),
            Err(e) => format!("could not be waited for: {e}"),
        }
    };
    let db = db.clone();
    let forget = move || {
        let _ = db.forget_process(pid);
    };
    let mut spawned = track(
        Tracked {
            pid,
            guard,
            sandboxed,
            forked: false,
            socket,
        },
        launch,
        stdout,
        stderr,
        exit,
        forget,
        sink,
    );
    spawned.stdin = stdin;
    Ok(spawned)
}

/// A started process, before [`track`] watches it.
pub struct Tracked {
    /// Its host pid (also its process group id).
    pub pid: u32,
    /// Kills its group when dropped.
    pub guard: GroupGuard,
    /// Its sandbox's cgroups and socket dir.
    pub sandboxed: Option<Arc<Prepared>>,
    /// Forked by a zygote (see [`Proc`]).
    pub forked: bool,
    /// Its unix socket outside a sandbox ([`socket_env`]).
    pub socket: Option<SocketFile>,
}

/// The environment of the next process of `launch`, and the socket of its
/// own it is to serve on when it serves unsandboxed on one
/// ([`Launch::socket`]: then `SLESS_SOCKET` names it).
pub fn socket_env(launch: &Launch) -> (Option<SocketFile>, Vec<(String, String)>) {
    match (&launch.sandbox, &launch.socket) {
        (None, Some(sockets)) => {
            let socket = sockets.allocate();
            let env = sockets::with_socket(&launch.env, socket.path());
            (Some(socket), env)
        }
        _ => (None, launch.env.clone()),
    }
}

/// Pumps a started process's output to `sink` (stdout after the READY line),
/// keeps a tail of stderr, and records its exit (`exit` resolves to how it
/// exited; `forget` runs then).
pub fn track<O, E>(
    t: Tracked,
    launch: &Launch,
    stdout: Option<O>,
    stderr: Option<E>,
    exit: impl std::future::Future<Output = String> + Send + 'static,
    forget: impl FnOnce() + Send + 'static,
    sink: LineSink,
) -> Spawned
where
    O: tokio::io::AsyncRead + Unpin + Send + 'static,
    E: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    let Tracked {
        pid,
        guard,
        sandboxed,
        forked,
        socket,
    } = t;

    // stdout: the READY line (runtime servers only), then everything to the log.
    let (ready_tx, ready_rx) = oneshot::channel::<u16>();
    let watch_ready = launch.ready == Readiness::Line;
    {
        let sink = sink.clone();
        tokio::spawn(async move {
            if let Some(out) = stdout {
                let mut ready_tx = watch_ready.then_some(ready_tx);
                pump_lines(out, |line| {
                    if ready_tx.is_some()
                        && let Some(port) = parse_ready(line)
                    {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(port);
                        }
                        return;
                    }
                    sink(line);
                })
                .await;
            }
        });
    }
    // stderr: to the log, keeping a tail for failure messages.
    let tail = Arc::new(Mutex::new(VecDeque::<String>::new()));
    let stderr_done = {
        let sink = sink.clone();
        let tail = tail.clone();
        tokio::spawn(async move {
            if let Some(err) = stderr {
                pump_lines(err, |line| {
                    sink(line);
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line.to_string());
                })
                .await;
            }
        })
    };
    // Reaper: records the exit.
    let (exit_tx, exit_rx) = watch::channel::<Option<String>>(None);
    {
        let sandboxed = sandboxed.clone();
        let sink = sink.clone();
        let memory_mb = launch.memory_mb;
        tokio::spawn(async move {
            let mut desc = exit.await;
            if sandboxed.as_ref().is_some_and(|p| p.group.oom_killed()) {
                let why = format!(
                    "killed: memory use exceeds memory_mb {memory_mb} (the kernel's OOM killer stopped it)"
                );
                sink(&why);
                desc = format!("{desc}: {why}");
            }
            forget();
            let _ = exit_tx.send(Some(desc));
        });
    }
    Spawned {
        pid,
        guard,
        exit_rx,
        ready_rx: Some(ready_rx),
        tail,
        stderr_done: Some(stderr_done),
        sink,
        sandboxed,
        forked,
        stdin: None,
        socket,
    }
}

/// The command that starts `launch`: the program itself in its own process
/// group, or bwrap running it in its sandbox (after joining its cgroups).
/// A command ready to spawn, its sandbox (if any) and its environment file.
type Prepared3 = (Command, Option<Arc<Prepared>>, Option<std::os::fd::OwnedFd>);

/// Sandboxed, the environment travels in the returned file (see
/// [`sandbox::env_file`]), which must stay open until the spawn.
/// `env` is the process's environment ([`socket_env`]).
fn command(launch: &Launch, env: Vec<(String, String)>) -> Result<Prepared3, String> {
    let Some(sl) = &launch.sandbox else {
        let mut cmd = Command::new(&launch.program);
        cmd.args(&launch.args)
            .current_dir(&launch.cwd)
            .env_clear()
            .envs(env);
        isolate(&mut cmd);
        hand_over_control_fd(&mut cmd, launch.control_fd);
        return Ok((cmd, None, None));
    };
    let env_file = sandbox::env_file(&env)?;
    let mut plan = sl.plan.clone();
    let prepared = sl.sandbox.prepare(&mut plan, sl.serves)?;
    let program = sl.sandbox.program(&launch.program);
    let mut cmd = Command::new(sl.sandbox.bwrap());
    cmd.args(sl.sandbox.argv(&plan, &program, &launch.args))
        .current_dir("/");
    use std::os::fd::AsRawFd;
    isolate_sandboxed(&mut cmd, prepared.joiner.clone(), env_file.as_raw_fd());
    hand_over_control_fd(&mut cmd, launch.control_fd);
    Ok((cmd, Some(Arc::new(prepared)), Some(env_file)))
}

/// Makes `fd` the child's [`CONTROL_FD`], open across exec.
fn hand_over_control_fd(cmd: &mut Command, fd: Option<std::os::fd::RawFd>) {
    let Some(fd) = fd else { return };
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself would keep close-on-exec.
            let rc = if fd == CONTROL_FD {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, CONTROL_FD)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The client of the proxy for a process behind the unix socket `sock`.
fn socket_client(sock: &std::path::Path) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .unix_socket(sock)
        // Plain HTTP over a unix socket: loading TLS roots cost ~5-25 ms
        // per process start (a cold start waits for it).
        .tls_built_in_root_certs(false)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(64)
        .build()
        .map_err(|e| format!("cannot build a client for {}: {e}", sock.display()))
}

impl Spawned {
    /// True once the process has exited.
    pub fn has_exited(&self) -> bool {
        self.exit_rx.borrow().is_some()
    }

    /// Hands a warm process (`launch.stdin_pipe`) its function's environment:
    /// NUL-separated `KEY=VALUE` on stdin, then end of input. Unsandboxed,
    /// the environment names a unix socket of its own ([`Launch::socket`]).
    pub async fn assign(&mut self, launch: &Launch) -> Result<(), String> {
        use tokio::io::AsyncWriteExt;
        let mut stdin = self
            .stdin
            .take()
            .ok_or("the process has no stdin to take an environment from")?;
        let (socket, env) = socket_env(launch);
        self.socket = socket;
        stdin
            .write_all(&sandbox::env_block(&env))
            .await
            .map_err(|e| format!("cannot hand the warm process its environment: {e}"))?;
        drop(stdin);
        Ok(())
    }

    /// Waits for readiness (see [`Readiness`]) within `launch.ready_timeout`.
    /// The error is a status message ending with the last lines of stderr.
    pub async fn wait_ready(&mut self, launch: &Launch) -> Result<u16, String> {
        enum Outcome {
            Ready(u16),
            Exited,
            TimedOut,
        }
        let mut exit_rx = self.exit_rx.clone();
        let ready = async {
            match &launch.ready {
                Readiness::Line => match self.ready_rx.take() {
                    Some(rx) => rx.await.map(Outcome::Ready).unwrap_or(Outcome::Exited),
                    None => Outcome::Exited,
                },
                Readiness::Http { port, path } => {
                    poll_http(*port, path, self.socket_client()).await;
                    Outcome::Ready(*port)
                }
            }
        };
        let outcome = tokio::select! {
            o = ready => o,
            _ = exit_rx.wait_for(|s| s.is_some()) => Outcome::Exited,
            _ = tokio::time::sleep(launch.ready_timeout) => Outcome::TimedOut,
        };
        let timed_out = match outcome {
            Outcome::Ready(port) => return Ok(port),
            Outcome::Exited => false,
            Outcome::TimedOut => true,
        };
        if timed_out {
            signal_group(self.pid, libc::SIGKILL);
        }
        let mut exit_rx = self.exit_rx.clone();
        let _ =
            tokio::time::timeout(Duration::from_secs(5), exit_rx.wait_for(|s| s.is_some())).await;
        if let Some(done) = self.stderr_done.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), done).await;
        }
        let how = self
            .exit_rx
            .borrow()
            .clone()
            .unwrap_or_else(|| "exited".to_string());
        let what = match &launch.ready {
            Readiness::Line => "print SLESS_READY".to_string(),
            Readiness::Http { port, path } => {
                format!("answer GET {path} on port {port} (with a status below 500)")
            }
        };
        Err(if timed_out {
            format!(
                "the process did not {what} within {} s{}",
                launch.ready_timeout.as_secs(),
                format_tail(&self.tail)
            )
        } else {
            format!(
                "the process {how} before it was ready{}",
                format_tail(&self.tail)
            )
        })
    }

    /// The process as a running [`Proc`] on `port`, under the memory watchdog.
    pub fn into_proc(self, port: u16, launch: &Launch) -> Arc<Proc> {
        let client = match (&launch.sandbox, &self.socket) {
            (Some(s), _) if s.serves => self.socket_path().map(|sock| Upstream::unix(&sock)),
            // `SLESS_READY socket=…` reads as port 0.
            (None, Some(socket)) if port == 0 => Some(Upstream::unix(socket.path())),
            _ => None,
        };
        let proc = Arc::new(Proc {
            pid: self.pid,
            port,
            timeout: launch.timeout,
            started: Instant::now(),
            exited: self.exit_rx,
            client,
            _socket: self.socket,
            _guard: self.guard,
            sandboxed: self.sandboxed,
            forked: self.forked,
        });
        // Sandboxed, the cgroup's memory limit is exact (children and all);
        // the reaper names an OOM kill.
        if proc.sandboxed.is_none() {
            spawn_watchdog(Arc::downgrade(&proc), launch.memory_mb, self.sink);
        }
        proc
    }

    /// The sandbox's unix socket on the host, when it has one.
    fn socket_path(&self) -> Option<PathBuf> {
        Some(self.sandboxed.as_ref()?.socket.as_ref()?.sock.clone())
    }

    /// A client bound to the sandbox's unix socket, when it has one (for
    /// the readiness poll).
    fn socket_client(&self) -> Option<reqwest::Client> {
        let sock = self.socket_path()?;
        match socket_client(&sock) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::error!(error = %e, "no client for a sandboxed process");
                None
            }
        }
    }
}

/// Polls `GET http://127.0.0.1:port/path` every 200 ms until it answers with
/// a status below 500.
/// With `via` (a client bound to a sandbox's socket), through it instead.
async fn poll_http(port: u16, path: &str, via: Option<reqwest::Client>) {
    let (url, client) = match via {
        Some(c) => (format!("http://localhost{path}"), c),
        None => (
            format!("http://127.0.0.1:{port}{path}"),
            reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap_or_default(),
        ),
    };
    loop {
        if let Ok(r) = client
            .get(&url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            && r.status().as_u16() < 500
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Picks a free loopback port (the OS's choice; released before returning).
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free loopback port: {e}"))
}

/// Starts a process and waits until it is ready (see [`Readiness`]). The error
/// is a message for the status, ending with the last lines of its stderr.
pub async fn start(launch: &Launch, db: &Arc<Db>, sink: LineSink) -> Result<Arc<Proc>, String> {
    let mut spawned = spawn(launch, db, sink)?;
    let port = spawned.wait_ready(launch).await?;
    Ok(spawned.into_proc(port, launch))
}

fn format_tail(tail: &Mutex<VecDeque<String>>) -> String {
    let t = tail.lock().unwrap_or_else(|p| p.into_inner());
    if t.is_empty() {
        String::new()
    } else {
        format!(":\n{}", t.iter().cloned().collect::<Vec<_>>().join("\n"))
    }
}

/// How a process ended. bwrap reports a command killed by signal N as
/// status 128 + N, so a sandboxed process's status above 128 is read so.
fn describe_exit(status: std::process::ExitStatus, sandboxed: bool) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) if sandboxed && (129..=128 + 64).contains(&code) => {
            format!("was killed by signal {}", code - 128)
        }
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "exited".to_string(),
    }
}

/// Samples the process's RSS every 500 ms and kills its group when it exceeds
/// `memory_mb`, logging why.
fn spawn_watchdog(proc: std::sync::Weak<Proc>, memory_mb: u32, sink: LineSink) {
    tokio::spawn(async move {
        let limit_kib = u64::from(memory_mb) * 1024;
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let Some(p) = proc.upgrade() else { return };
            if p.has_exited() {
                return;
            }
            if let Some(rss) = rss_kib(p.pid)
                && rss > limit_kib
            {
                sink(&format!(
                    "killed: RSS {} MiB exceeds memory_mb {memory_mb}",
                    rss / 1024
                ));
                signal_group(p.pid, libc::SIGKILL);
                return;
            }
        }
    });
}

/// Exponential restart backoff: 0.5 s doubling to 30 s, back to 0.5 s after a
/// process stayed up for a minute.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

/// First delay.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);
/// Largest delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Uptime after which the delay resets.
pub const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(60);

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: BACKOFF_MIN }
    }
}

impl Backoff {
    /// The delay before the next restart of a process that was up for `uptime`.
    pub fn delay(&mut self, uptime: Duration) -> Duration {
        if uptime >= BACKOFF_RESET_AFTER {
            self.next = BACKOFF_MIN;
        }
        let d = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_parsing() {
        assert_eq!(parse_ready("SLESS_READY port=4321"), Some(4321));
        assert_eq!(parse_ready("SLESS_READY port=4321\r"), Some(4321));
        assert_eq!(parse_ready("SLESS_READY port=0"), None);
        assert_eq!(parse_ready("hello"), None);
        assert_eq!(parse_ready("SLESS_READY port=x"), None);
        assert_eq!(
            parse_ready("SLESS_READY socket=/run/sless/http.sock"),
            Some(0)
        );
        assert_eq!(parse_ready("SLESS_READY socket="), None);
    }

    #[test]
    fn backoff_doubles_caps_and_resets() {
        let mut b = Backoff::default();
        let short = Duration::from_secs(1);
        let seq: Vec<u64> = (0..9).map(|_| b.delay(short).as_millis() as u64).collect();
        assert_eq!(
            seq,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(b.delay(Duration::from_secs(61)), BACKOFF_MIN);
        assert_eq!(b.delay(short), Duration::from_secs(1));
    }
}
