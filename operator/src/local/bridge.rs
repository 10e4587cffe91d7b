//! `sless-operator sandbox-exec`: the first program of every sandbox, run by
//! setpriv as the namespace's uid. It reads the process's environment from a
//! descriptor the operator filled (so the user's variables — `LD_PRELOAD`
//! among them — never reach bwrap and setpriv, which run as root, nor any
//! command line), closes it, and execs the command. For a service it instead
//! starts the command and stays in front of it as the bridge: it listens on
//! the sandbox's unix socket (the only way in from the operator) and copies
//! each connection to `127.0.0.1:<port>` inside the sandbox's own network
//! namespace. The bridge exits with the command's status (128 + signal when
//! it was killed) and ignores SIGTERM itself so that the command gets the
//! time to stop cleanly (the operator signals both; the command's exit ends
//! the bridge).

use crate::config::SandboxExecArgs;
use std::ffi::OsString;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Command;

extern "C" fn ignore(_: libc::c_int) {}

/// Runs `sandbox-exec`; returns an exit code only when it could not exec
/// (or, as the bridge, the command's).
pub fn sandbox_exec(args: &SandboxExecArgs) -> i32 {
    let env = match read_env(args.env_fd) {
        Ok(env) => env,
        Err(e) => {
            eprintln!(
                "sandbox-exec: cannot read the environment from fd {}: {e}",
                args.env_fd
            );
            return 1;
        }
    };
    match (&args.socket, args.port) {
        (Some(socket), Some(port)) => run_bridge(socket, port, &args.command, &env),
        _ => {
            let Some((program, rest)) = args.command.split_first() else {
                eprintln!("sandbox-exec: no command given");
                return 2;
            };
            use std::os::unix::process::CommandExt;
            let err = Command::new(program)
                .args(rest)
                .env_clear()
                .envs(env)
                .exec();
            eprintln!(
                "sandbox-exec: cannot run {}: {err}",
                program.to_string_lossy()
            );
            127
        }
    }
}

/// Reads NUL-separated `KEY=VALUE` pairs from `fd` (from its start) and
/// closes it.
fn read_env(fd: i32) -> io::Result<Vec<(OsString, OsString)>> {
    use std::io::{Read, Seek};
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStringExt;
    if fd < 3 {
        return Err(io::Error::other("not a descriptor of its own"));
    }
    // SAFETY: the operator handed this descriptor to this process alone.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.seek(io::SeekFrom::Start(0))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    drop(file);
    Ok(buf
        .split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .map(|kv| match kv.iter().position(|b| *b == b'=') {
            Some(i) => (
                OsString::from_vec(kv[..i].to_vec()),
                OsString::from_vec(kv[i + 1..].to_vec()),
            ),
            None => (OsString::from_vec(kv.to_vec()), OsString::new()),
        })
        .collect())
}

/// Starts the service and bridges; returns its exit code.
fn run_bridge(socket: &Path, port: u16, command: &[OsString], env: &[(OsString, OsString)]) -> i32 {
    let Some((program, args)) = command.split_first() else {
        eprintln!("sandbox-exec (bridge): no command given");
        return 2;
    };
    // A handler (not SIG_IGN, which exec would pass on to the command).
    // SAFETY: installing a handler that does nothing.
    unsafe {
        libc::signal(libc::SIGTERM, ignore as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, ignore as *const () as libc::sighandler_t);
    }
    let _ = std::fs::remove_file(socket);
    let listener = match UnixListener::bind(socket) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "sandbox-exec (bridge): cannot listen on {}: {e}",
                socket.display()
            );
            return 1;
        }
    };
    let mut child = match Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().cloned())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "sandbox-exec (bridge): cannot start {}: {e}",
                program.to_string_lossy()
            );
            return 127;
        }
    };
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            match conn {
                Ok(c) => {
                    std::thread::spawn(move || {
                        // An error means the user's server is not (yet)
                        // listening: the operator's readiness check retries.
                        let _ = forward(c, port);
                    });
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    });
    use std::os::unix::process::ExitStatusExt;
    match child.wait() {
        Ok(s) => s
            .code()
            .or_else(|| s.signal().map(|sig| 128 + sig))
            .unwrap_or(1),
        Err(_) => 1,
    }
}

/// Copies one connection both ways until both sides are done.
fn forward(client: UnixStream, port: u16) -> io::Result<()> {
    let server = TcpStream::connect(("127.0.0.1", port))?;
    server.set_nodelay(true)?;
    let (mut c_read, mut s_write) = (client.try_clone()?, server.try_clone()?);
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut c_read, &mut s_write);
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let (mut s_read, mut c_write) = (server, client);
    let _ = io::copy(&mut s_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}
