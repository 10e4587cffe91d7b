//! `sless-operator sandbox-bridge`: runs inside a service's sandbox, in front
//! of the user's server. It listens on the sandbox's unix socket (the only
//! way in from the operator), starts the user's command, and copies each
//! connection to `127.0.0.1:<port>` inside the sandbox's own network
//! namespace. It exits with the command's status (128 + signal when it was
//! killed), and ignores SIGTERM itself so that the command gets the time to
//! stop cleanly (the operator signals both; the command's exit ends the bridge).

use std::ffi::OsString;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Command;

extern "C" fn ignore(_: libc::c_int) {}

/// Runs the bridge; returns the exit code of the process.
pub fn run(socket: &Path, port: u16, command: &[OsString]) -> i32 {
    let Some((program, args)) = command.split_first() else {
        eprintln!("sandbox-bridge: no command given");
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
            eprintln!("sandbox-bridge: cannot listen on {}: {e}", socket.display());
            return 1;
        }
    };
    let mut child = match Command::new(program).args(args).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "sandbox-bridge: cannot start {}: {e}",
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
                        if let Err(e) = forward(c, port) {
                            // The user's server is not (yet) listening: the
                            // operator's readiness check retries.
                            let _ = e;
                        }
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
