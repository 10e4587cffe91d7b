//! Child processes in their own process group that die with the operator:
//! spawning (`PR_SET_PDEATHSIG` on Linux), killing a whole group, reclaiming
//! groups a crashed operator left behind, and reading a process's RSS.

use std::path::Path;
use tokio::process::Command;

/// Prepares `cmd` to run in its own process group and (on Linux) to be killed
/// when the operator dies.
pub fn isolate(cmd: &mut Command) {
    cmd.process_group(0).kill_on_drop(true);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe libc calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The operator may have died between fork and prctl.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
}

/// Prepares `cmd` (bwrap) to start a sandbox: a new session (so no
/// controlling terminal is reachable from inside, and the session is its own
/// process group), `PR_SET_PDEATHSIG`, and its cgroups joined before exec, so
/// nothing of the user's ever runs outside them.
///
/// `env_fd` (close-on-exec in the operator) becomes the child's
/// [`super::sandbox::ENV_FD`]; the command's own environment is
/// [`super::sandbox::ROOT_ENV`], nothing of the user's.
pub fn isolate_sandboxed(cmd: &mut Command, joiner: super::cgroup::Joiner, env_fd: i32) {
    cmd.kill_on_drop(true)
        .env_clear()
        .envs(super::sandbox::ROOT_ENV);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            super::sandbox::hand_over_env_fd(env_fd)?;
            joiner.join_self()
        });
    }
}

/// Sends `signal` to every process of group `pgid` (a no-op for pgid <= 1).
pub fn signal_group(pgid: u32, signal: i32) {
    if pgid > 1 {
        // SAFETY: plain syscall; errors (ESRCH) are expected when it is gone.
        unsafe {
            libc::killpg(pgid as libc::pid_t, signal);
        }
    }
}

/// Kills a process group with SIGKILL when dropped, unless disarmed.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: u32,
    armed: bool,
}

impl GroupGuard {
    /// Guards the group led by `pgid`.
    pub fn new(pgid: u32) -> GroupGuard {
        GroupGuard { pgid, armed: true }
    }

    /// The group id.
    pub fn pgid(&self) -> u32 {
        self.pgid
    }

    /// Stops guarding (the group is known to be gone).
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

/// Parses the process group id out of `/proc/<pid>/stat` content.
pub fn pgid_from_stat(stat: &str) -> Option<u32> {
    // pid (comm) state ppid pgrp ...; comm may contain spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let _ppid = fields.next()?;
    fields.next()?.parse().ok()
}

/// True when process `pid` belongs to this data dir: its command line
/// mentions `marker` or its working directory is under `data_dir`.
fn belongs_to(pid: u32, data_dir: &Path, marker: &str) -> bool {
    let proc_dir = Path::new("/proc").join(pid.to_string());
    let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    if !marker.is_empty() && cmdline.contains(marker) {
        return true;
    }
    std::fs::read_link(proc_dir.join("cwd"))
        .map(|cwd| cwd.starts_with(data_dir))
        .unwrap_or(false)
}

/// Kills (SIGKILL) every live process in one of `pgids` that belongs to this
/// data dir. Returns the pids killed. Used at start to reclaim what a crashed
/// operator left behind; the ownership check protects unrelated processes
/// that reused a recorded id.
pub fn reclaim_groups(pgids: &[u32], data_dir: &Path, marker: &str) -> Vec<u32> {
    let mut killed = Vec::new();
    if pgids.is_empty() {
        return killed;
    }
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return killed;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(pgid) = pgid_from_stat(&stat) else {
            continue;
        };
        if pgids.contains(&pgid) && belongs_to(pid, data_dir, marker) {
            // SAFETY: plain syscall on a process we verified as ours.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            killed.push(pid);
        }
    }
    killed
}

/// Resident set size of `pid` in KiB, from `/proc/<pid>/status`.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vmrss(&status)
}

/// Parses the `VmRSS:` line of `/proc/<pid>/status` (KiB).
pub fn parse_vmrss(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pgid_with_odd_comm() {
        let stat = "1234 (we ird) name)) S 1 4321 4321 0 -1 4194560";
        assert_eq!(pgid_from_stat(stat), Some(4321));
        assert_eq!(pgid_from_stat("garbage"), None);
    }

    #[test]
    fn parses_vmrss() {
        let s = "Name:\tpython3\nVmPeak:\t  20000 kB\nVmRSS:\t   12345 kB\n";
        assert_eq!(parse_vmrss(s), Some(12345));
        assert_eq!(parse_vmrss("Name: x\n"), None);
        assert!(rss_kib(std::process::id()).is_some_and(|k| k > 0));
    }
}
