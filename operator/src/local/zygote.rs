//! Python zygotes: one pre-imported runtime per namespace (`runtimes/zygote.py`)
//! that forks the process of a function's cold start, so a cold start costs a
//! fork and the user's import instead of an interpreter start, the runtime
//! server's imports and (strict) a new sandbox.
//!
//! The zygote runs like any user process of its namespace (in strict: its
//! own bubblewrap sandbox under the namespace's uid, seeing that namespace's
//! builds and dependencies read-only), so a forked child has exactly what a
//! fresh start of that namespace could have had, and nothing of another
//! namespace. The operator talks to it over a `SOCK_SEQPACKET` socket pair
//! (its fd 4): "start ID" with the child's environment (memfd), stdout and
//! stderr (pipes to the run log) and a "go" pipe attached; the zygote
//! answers "forked ID PID" and, later, "exited PID STATUS". Before writing
//! "go", the operator moves the child into its own cgroup (its memory, pids
//! and CPU limits). The design is in docs/decisions.md.

use super::db::Db;
use super::process::GroupGuard;
use super::sandbox::{self, Sandbox};
use super::sockets;
use super::supervisor::{self, Launch, LineSink, Proc, Spawned, Tracked};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

/// How long a fork may take to be acknowledged.
const FORK_TIMEOUT: Duration = Duration::from_secs(5);

/// The zygotes of the backend, one per namespace, started on demand and
/// stopped when idle (see [`Zygotes::stop_idle`]).
#[derive(Default)]
pub struct Zygotes {
    /// One slot per namespace, locked while its zygote starts (so one
    /// namespace's start never holds up another's cold starts).
    map: Mutex<HashMap<String, Arc<ZygoteSlot>>>,
}

/// A namespace's zygote, if started (locked while it starts or stops), and
/// when a cold start or a scale-down last asked for it.
struct ZygoteSlot {
    zygote: tokio::sync::Mutex<Option<Arc<Zygote>>>,
    last_wanted: Mutex<Instant>,
}

impl Zygotes {
    /// The running zygote of `ns`, or a new one from `start` (also when the
    /// previous one has exited).
    pub async fn get_or_start<F>(&self, ns: &str, start: F) -> Result<Arc<Zygote>, String>
    where
        F: std::future::Future<Output = Result<Zygote, String>>,
    {
        let slot = lock(&self.map)
            .entry(ns.to_string())
            .or_insert_with(|| {
                Arc::new(ZygoteSlot {
                    zygote: Default::default(),
                    last_wanted: Mutex::new(Instant::now()),
                })
            })
            .clone();
        *lock(&slot.last_wanted) = Instant::now();
        let mut zygote = slot.zygote.lock().await;
        if let Some(z) = zygote.as_ref()
            && !z.proc.has_exited()
        {
            return Ok(z.clone());
        }
        let z = Arc::new(start.await?);
        *zygote = Some(z.clone());
        Ok(z)
    }

    /// Stops the zygotes nobody asked for since `cutoff` that have no child
    /// running (a zygote's children die with it); the number stopped. A
    /// later cold start in such a namespace starts its zygote again.
    pub async fn stop_idle(&self, cutoff: Instant, grace: Duration) -> usize {
        let slots: Vec<Arc<ZygoteSlot>> = lock(&self.map).values().cloned().collect();
        let mut stopped = 0;
        for slot in slots {
            // Locked: it is starting (or being asked for); not idle.
            let Ok(mut zygote) = slot.zygote.try_lock() else {
                continue;
            };
            let idle = *lock(&slot.last_wanted) < cutoff;
            if idle
                && zygote.as_ref().is_some_and(|z| z.children() == 0)
                && let Some(z) = zygote.take()
            {
                z.proc.stop(grace).await;
                stopped += 1;
            }
        }
        stopped
    }

    /// Stops every zygote (at shutdown; their children die with them).
    pub async fn stop_all(&self, grace: Duration) {
        let slots: Vec<_> = lock(&self.map).drain().map(|(_, s)| s).collect();
        for slot in slots {
            if let Some(z) = slot.zygote.lock().await.take() {
                z.proc.stop(grace).await;
            }
        }
    }
}

/// What the reader task and the forking side share.
#[derive(Default)]
struct Waiting {
    /// Forks asked for: the child's pid, or why the fork failed.
    forks: HashMap<u64, oneshot::Sender<Result<u32, String>>>,
    exits: HashMap<u32, oneshot::Sender<i32>>,
    /// Exits reported before their fork was acknowledged.
    early: HashMap<u32, i32>,
    /// Children of forks given up on (they exit: their "go" pipe closed).
    abandoned: std::collections::HashSet<u32>,
    closed: bool,
}

/// One running zygote.
pub struct Zygote {
    proc: Arc<Proc>,
    ctl: Arc<AsyncFd<OwnedFd>>,
    waiting: Arc<Mutex<Waiting>>,
    next_id: AtomicU64,
    /// Strict: its socket dir on the host (bound at /run/sless inside) and
    /// its namespace's uid.
    socket_dir: Option<(std::path::PathBuf, u32)>,
}

impl std::fmt::Debug for Zygote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zygote")
            .field("pid", &self.proc.pid)
            .finish()
    }
}

impl Zygote {
    /// Starts `launch` (the zygote's own launch: `python3 -u zygote.py 4`)
    /// with the control socket as its fd 4 and waits until it is ready.
    pub async fn start(mut launch: Launch, db: &Arc<Db>, sink: LineSink) -> Result<Zygote, String> {
        let (ours, theirs) = seqpacket_pair()?;
        launch.control_fd = Some(theirs.as_raw_fd());
        let proc = supervisor::start(&launch, db, sink).await?;
        drop(theirs);
        let socket_dir = match (&launch.sandbox, proc.socket_dir()) {
            (Some(sl), Some(dir)) => Some((dir, sl.plan.uid)),
            _ => None,
        };
        set_nonblocking(ours.as_raw_fd())?;
        // SAFETY: `ours` is an OwnedFd moved into the AsyncFd: it stays open
        // and the same descriptor for the AsyncFd's whole life.
        let ctl = unsafe { AsyncFd::register(ours) }
            .map_err(|e| format!("cannot watch the zygote's socket: {e}"))?;
        let ctl = Arc::new(ctl);
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        tokio::spawn(read_replies(ctl.clone(), waiting.clone()));
        Ok(Zygote {
            proc,
            ctl,
            waiting,
            next_id: AtomicU64::new(1),
            socket_dir,
        })
    }

    /// Children forked or being forked that have not exited.
    fn children(&self) -> usize {
        let w = lock(&self.waiting);
        w.forks.len() + w.exits.len()
    }

    /// Forks the process of `launch` (a function's launch, as a fresh start
    /// would run it): same environment, working directory, limits and run
    /// log; its own process group, cgroups and socket.
    pub async fn fork(
        &self,
        launch: &Launch,
        sandbox: Option<&Sandbox>,
        sink: LineSink,
    ) -> Result<Spawned, String> {
        let (socket, mut env) = supervisor::socket_env(launch);
        let prepared = match (&self.socket_dir, sandbox, &launch.sandbox) {
            (Some((dir, uid)), Some(sb), Some(sl)) => {
                let (prepared, inside) = sb.prepare_forked(dir, *uid, sl.plan.limits)?;
                env = sockets::with_socket(&env, std::path::Path::new(&inside));
                Some(prepared)
            }
            (None, None, None) => None,
            _ => return Err("the zygote and the function disagree on the sandbox".into()),
        };
        let env_file = sandbox::env_file(&env)?;
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        {
            let mut w = lock(&self.waiting);
            if w.closed {
                return Err("the zygote has exited".into());
            }
            w.forks.insert(id, tx);
        }
        let msg = format!("start {id}");
        let fds = [
            env_file.as_raw_fd(),
            out_w.as_raw_fd(),
            err_w.as_raw_fd(),
            go_r.as_raw_fd(),
        ];
        if let Err(e) = self.send(msg.as_bytes(), &fds).await {
            lock(&self.waiting).forks.remove(&id);
            return Err(e);
        }
        drop((env_file, out_w, err_w, go_r));
        let inner_pid = match tokio::time::timeout(FORK_TIMEOUT, rx).await {
            Ok(Ok(Ok(pid))) => pid,
            Ok(Ok(Err(why))) => return Err(format!("the zygote could not fork: {why}")),
            _ => {
                lock(&self.waiting).forks.remove(&id);
                return Err("the zygote did not acknowledge the fork".into());
            }
        };
        let pid = match &prepared {
            Some(_) => match self.host_pid(inner_pid) {
                Some(pid) => pid,
                None => {
                    // Dropping `go_w` makes the child exit.
                    self.abandon(inner_pid);
                    return Err(format!(
                        "forked pid {inner_pid} not found in the zygote's group"
                    ));
                }
            },
            None => inner_pid,
        };
        // Kills the child (its own group after setsid) if anything below fails.
        let guard = GroupGuard::new(pid);
        let (exit_tx, exit_rx) = oneshot::channel();
        {
            let mut w = lock(&self.waiting);
            match w.early.remove(&inner_pid) {
                Some(code) => {
                    let _ = exit_tx.send(code);
                }
                None => {
                    w.exits.insert(inner_pid, exit_tx);
                }
            }
        }
        if let Some(p) = &prepared {
            p.group.add(pid)?;
        }
        write_go(go_w)?;
        let exit = async move {
            match exit_rx.await {
                Ok(code) if code < 0 => format!("was killed by signal {}", -code),
                Ok(code) => format!("exited with status {code}"),
                Err(_) => "exited (its zygote is gone)".to_string(),
            }
        };
        let stdout = receiver(out_r)?;
        let stderr = receiver(err_r)?;
        Ok(supervisor::track(
            Tracked {
                pid,
                guard,
                sandboxed: prepared.map(Arc::new),
                forked: true,
                socket,
            },
            launch,
            Some(stdout),
            Some(stderr),
            exit,
            || {},
            sink,
        ))
    }

    /// Forgets the child `inner` (pid inside): its exit, when reported, is dropped.
    fn abandon(&self, inner: u32) {
        let mut w = lock(&self.waiting);
        if w.early.remove(&inner).is_none() {
            w.abandoned.insert(inner);
        }
    }

    /// The host pid of the zygote's child `inner` (its pid inside the
    /// zygote's PID namespace), found among the zygote's cgroup members.
    fn host_pid(&self, inner: u32) -> Option<u32> {
        self.proc.group_pids().into_iter().find(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|l| l.split_whitespace().last())
                .and_then(|p| p.parse::<u32>().ok())
                == Some(inner)
        })
    }

    async fn send(&self, msg: &[u8], fds: &[RawFd]) -> Result<(), String> {
        loop {
            let mut guard = self
                .ctl
                .writable()
                .await
                .map_err(|e| format!("the zygote's socket: {e}"))?;
            match guard.try_io(|fd| send_with_fds(fd.as_raw_fd(), msg, fds)) {
                Ok(r) => return r.map_err(|e| format!("cannot ask the zygote to fork: {e}")),
                Err(_would_block) => continue,
            }
        }
    }
}

/// Reads the zygote's replies until it closes its end.
async fn read_replies(ctl: Arc<AsyncFd<OwnedFd>>, waiting: Arc<Mutex<Waiting>>) {
    let mut buf = [0u8; 256];
    loop {
        let Ok(mut guard) = ctl.readable().await else {
            break;
        };
        let n = match guard.try_io(|fd| {
            // SAFETY: recv into a buffer we own, of its length.
            let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }) {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => n,
            Err(_would_block) => continue,
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut w = lock(&waiting);
        match words.as_slice() {
            ["forked", id, pid] => {
                if let (Ok(id), Ok(pid)) = (id.parse::<u64>(), pid.parse::<u32>()) {
                    let delivered = w
                        .forks
                        .remove(&id)
                        .is_some_and(|tx| tx.send(Ok(pid)).is_ok());
                    if !delivered {
                        // Given up on (timed out): its child exits unassigned.
                        w.abandoned.insert(pid);
                    }
                }
            }
            ["failed", id, why] => {
                if let Ok(id) = id.parse::<u64>()
                    && let Some(tx) = w.forks.remove(&id)
                {
                    let _ = tx.send(Err(why.to_string()));
                }
            }
            ["exited", pid, code] => {
                if let (Ok(pid), Ok(code)) = (pid.parse::<u32>(), code.parse::<i32>()) {
                    if w.abandoned.remove(&pid) {
                        continue;
                    }
                    match w.exits.remove(&pid) {
                        Some(tx) => {
                            let _ = tx.send(code);
                        }
                        None => {
                            w.early.insert(pid, code);
                        }
                    }
                }
            }
            _ => tracing::warn!(reply = %text, "unexpected reply from a zygote"),
        }
    }
    // Gone: pending forks fail, children count as exited (they die with it).
    let mut w = lock(&waiting);
    w.closed = true;
    w.forks.clear();
    w.exits.clear();
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A close-on-exec `SOCK_SEQPACKET` pair; the second end is numbered above
/// 10 so that handing it over as fd 4 cannot clobber fds 3 and 4.
fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills two descriptors we then own.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "cannot create the zygote's socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fresh descriptors nothing else owns.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own.
    let high = unsafe { libc::fcntl(b.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if high < 0 {
        return Err(format!(
            "cannot move the zygote's socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    drop(b);
    // SAFETY: as above.
    Ok((a, unsafe { OwnedFd::from_raw_fd(high) }))
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fresh descriptors nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn set_nonblocking(fd: RawFd) -> Result<(), String> {
    // SAFETY: fcntl on a descriptor we own.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cannot make a descriptor non-blocking: {}",
            std::io::Error::last_os_error()
        ))
    }
}

fn receiver(fd: OwnedFd) -> Result<tokio::net::unix::pipe::Receiver, String> {
    set_nonblocking(fd.as_raw_fd())?;
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
        .map_err(|e| format!("cannot read a forked process's output: {e}"))
}

/// Lets the child go (it waits for one byte).
fn write_go(go: OwnedFd) -> Result<(), String> {
    // SAFETY: write of one byte from a static buffer to a pipe we own.
    let n = unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(format!(
            "cannot start the forked process: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// `sendmsg` of `msg` with `fds` attached (`SCM_RIGHTS`).
fn send_with_fds(sock: RawFd, msg: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut cbuf = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = cbuf.as_mut_ptr().cast();
    hdr.msg_controllen = space as _;
    // SAFETY: the control buffer has room for one header with `fds`.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&hdr);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
    }
    // SAFETY: sendmsg with the header built above.
    let n = unsafe { libc::sendmsg(sock, &hdr, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
