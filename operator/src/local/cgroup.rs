//! Resource limits of sandboxed processes through cgroups: one group per
//! started process, under a parent group per data dir. cgroup v2 is used when
//! a cgroup2 hierarchy carries the memory and pids controllers; otherwise the
//! v1 `memory`, `pids` and `cpu` hierarchies (as on hybrid machines, where v1
//! holds the controllers). Only plain cgroupfs file writes; the forked child
//! joins its groups before exec (see [`Joiner`]).

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The limits of one process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Memory (including tmpfs pages it writes, and swap where accounted), MiB.
    pub memory_mb: u32,
    /// Most tasks (processes and threads) at once.
    pub pids_max: u32,
    /// CPU quota in thousandths of a core (1000 = one core).
    pub cpu_millis: u32,
}

/// Where the cgroup controllers are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// One cgroup2 hierarchy (mount point) with memory, pids and cpu.
    V2(PathBuf),
    /// The v1 hierarchies of each controller.
    V1 {
        /// e.g. `/sys/fs/cgroup/memory`
        memory: PathBuf,
        /// e.g. `/sys/fs/cgroup/pids`
        pids: PathBuf,
        /// e.g. `/sys/fs/cgroup/cpu` (optional: no CPU quota without it)
        cpu: Option<PathBuf>,
    },
}

/// Reads `/proc/self/mounts` and picks the hierarchy to use, or says why none fits.
pub fn detect() -> Result<Hierarchy, String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| format!("cannot read /proc/self/mounts: {e}"))?;
    detect_from(&mounts, |p| std::fs::read_to_string(p).ok())
}

/// [`detect`] over the text of a mounts table; `read` reads a cgroupfs file.
pub fn detect_from(
    mounts: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Result<Hierarchy, String> {
    let mut v1: Vec<(PathBuf, Vec<String>)> = Vec::new();
    let mut v2_seen = Vec::new();
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let path = PathBuf::from(f[1]);
        match f[2] {
            "cgroup2" => {
                let controllers = read(&path.join("cgroup.controllers")).unwrap_or_default();
                let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
                if has("memory") && has("pids") {
                    return Ok(Hierarchy::V2(path));
                }
                v2_seen.push(path);
            }
            "cgroup" => {
                let opts = f[3].split(',').map(str::to_string).collect();
                v1.push((path, opts));
            }
            _ => {}
        }
    }
    let find = |c: &str| {
        v1.iter()
            .find(|(_, o)| o.iter().any(|x| x == c))
            .map(|(p, _)| p.clone())
    };
    match (find("memory"), find("pids")) {
        (Some(memory), Some(pids)) => Ok(Hierarchy::V1 {
            memory,
            pids,
            cpu: find("cpu"),
        }),
        _ => Err(format!(
            "no cgroup hierarchy with the memory and pids controllers is mounted \
             (cgroup2 without them at {:?}; v1 memory: {}, pids: {})",
            v2_seen,
            find("memory").is_some(),
            find("pids").is_some()
        )),
    }
}

/// The files written to set `limits` on a group whose directories are
/// `dirs` (one per v1 controller, or the single v2 dir): (path, contents).
pub fn limit_files(h: &Hierarchy, dirs: &[PathBuf], limits: Limits) -> Vec<(PathBuf, String)> {
    let bytes = u64::from(limits.memory_mb) * 1024 * 1024;
    let period: u64 = 100_000;
    let quota = u64::from(limits.cpu_millis) * period / 1000;
    match h {
        Hierarchy::V2(_) => {
            let d = &dirs[0];
            vec![
                (d.join("memory.max"), bytes.to_string()),
                (d.join("memory.swap.max"), "0".to_string()),
                (d.join("pids.max"), limits.pids_max.to_string()),
                (d.join("cpu.max"), format!("{quota} {period}")),
            ]
        }
        Hierarchy::V1 { cpu, .. } => {
            let mut out = vec![
                (dirs[0].join("memory.limit_in_bytes"), bytes.to_string()),
                (
                    dirs[0].join("memory.memsw.limit_in_bytes"),
                    bytes.to_string(),
                ),
                (dirs[1].join("pids.max"), limits.pids_max.to_string()),
            ];
            if cpu.is_some() && dirs.len() > 2 {
                out.push((dirs[2].join("cpu.cfs_period_us"), period.to_string()));
                out.push((dirs[2].join("cpu.cfs_quota_us"), quota.to_string()));
            }
            out
        }
    }
}

impl Hierarchy {
    /// The directories of group `rel` (relative to each hierarchy's root).
    pub fn dirs(&self, rel: &Path) -> Vec<PathBuf> {
        match self {
            Hierarchy::V2(root) => vec![root.join(rel)],
            Hierarchy::V1 { memory, pids, cpu } => {
                let mut v = vec![memory.join(rel), pids.join(rel)];
                if let Some(c) = cpu {
                    v.push(c.join(rel));
                }
                v
            }
        }
    }

    /// Creates the parent group `rel` (enabling the v2 controllers for its
    /// children); checks the hierarchy is writable.
    pub fn prepare_parent(&self, rel: &Path) -> Result<(), String> {
        if let Hierarchy::V2(root) = self {
            // The root group is exempt from "no internal processes".
            write(&root.join("cgroup.subtree_control"), "+memory +pids +cpu")
                .or_else(|_| write(&root.join("cgroup.subtree_control"), "+memory +pids"))?;
        }
        for d in self.dirs(rel) {
            std::fs::create_dir_all(&d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        if let Hierarchy::V2(root) = self {
            let d = root.join(rel);
            write(&d.join("cgroup.subtree_control"), "+memory +pids +cpu")
                .or_else(|_| write(&d.join("cgroup.subtree_control"), "+memory +pids"))?;
        }
        Ok(())
    }

    /// Removes every group left under `rel` by an earlier run (killing what
    /// is still in them).
    pub fn clear_children(&self, rel: &Path) {
        for d in self.dirs(rel) {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                if e.path().is_dir() {
                    kill_all_in(&e.path());
                    let _ = std::fs::remove_dir(e.path());
                }
            }
        }
    }

    /// Creates group `rel` with `limits`.
    pub fn create(&self, rel: &Path, limits: Limits) -> Result<Group, String> {
        let dirs = self.dirs(rel);
        for d in &dirs {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let group = Group {
            hierarchy: self.clone(),
            dirs,
        };
        for (path, value) in limit_files(self, &group.dirs, limits) {
            // Swap accounting files exist only when the kernel accounts swap.
            let optional = path
                .file_name()
                .is_some_and(|n| n == "memory.memsw.limit_in_bytes" || n == "memory.swap.max");
            match write(&path, &value) {
                Ok(()) => {}
                Err(_) if optional && !path.exists() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(group)
    }
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value)
        .map_err(|e| format!("cannot write {value:?} to {}: {e}", path.display()))
}

/// SIGKILLs every process listed in `dir/cgroup.procs` until none is left
/// (bounded: a group cannot grow past its pids limit).
fn kill_all_in(dir: &Path) {
    for _ in 0..50 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            // SAFETY: plain syscall; these processes are in our own group.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The groups of one process. Dropping it kills what is left in them and
/// removes them.
#[derive(Debug)]
pub struct Group {
    hierarchy: Hierarchy,
    dirs: Vec<PathBuf>,
}

impl Group {
    /// What a forked child needs to join these groups before exec.
    pub fn joiner(&self) -> Result<Joiner, String> {
        let paths = self
            .dirs
            .iter()
            .map(|d| {
                CString::new(d.join("cgroup.procs").as_os_str().as_encoded_bytes())
                    .map_err(|_| format!("cgroup path {} has a NUL byte", d.display()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Joiner { paths })
    }

    /// True when the kernel's OOM killer ended a process of this group.
    pub fn oom_killed(&self) -> bool {
        let (file, key) = match self.hierarchy {
            Hierarchy::V2(_) => ("memory.events", "oom_kill"),
            Hierarchy::V1 { .. } => ("memory.oom_control", "oom_kill"),
        };
        let text = std::fs::read_to_string(self.dirs[0].join(file)).unwrap_or_default();
        let count = text.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(key)).then(|| it.next()?.parse::<u64>().ok())?
        });
        match count {
            Some(n) => n > 0,
            // Older v1 kernels: any failed charge at the limit.
            None => std::fs::read_to_string(self.dirs[0].join("memory.failcnt"))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .is_some_and(|n| n > 0),
        }
    }

    /// Moves the process `pid` (host pid) and nothing else into the groups.
    pub fn add(&self, pid: u32) -> Result<(), String> {
        for d in &self.dirs {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Host pids of the processes in the group.
    pub fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dirs[0].join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for d in &self.dirs {
            kill_all_in(d);
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// Joins cgroups from a forked child: only `open`/`write`/`close` on
/// prepared paths (async-signal-safe, no allocation).
#[derive(Debug, Clone)]
pub struct Joiner {
    paths: Vec<CString>,
}

impl Joiner {
    /// Moves the calling process into every group. Call only between fork and exec.
    pub fn join_self(&self) -> std::io::Result<()> {
        for p in &self.paths {
            // SAFETY: async-signal-safe syscalls on a NUL-terminated path.
            unsafe {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(err);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";

    #[test]
    fn hybrid_machines_use_v1_when_v2_has_no_controllers() {
        let h = detect_from(HYBRID, |_| Some("hugetlb\n".into())).unwrap();
        assert_eq!(
            h,
            Hierarchy::V1 {
                memory: "/sys/fs/cgroup/memory".into(),
                pids: "/sys/fs/cgroup/pids".into(),
                cpu: Some("/sys/fs/cgroup/cpu".into()),
            }
        );
    }

    #[test]
    fn v2_with_memory_and_pids_wins() {
        let mounts = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        let h = detect_from(mounts, |p| {
            (p == Path::new("/sys/fs/cgroup/cgroup.controllers"))
                .then(|| "cpuset cpu io memory pids\n".to_string())
        })
        .unwrap();
        assert_eq!(h, Hierarchy::V2("/sys/fs/cgroup".into()));
    }

    #[test]
    fn no_usable_hierarchy_says_what_is_missing() {
        let err = detect_from("proc /proc proc rw 0 0\n", |_| None).unwrap_err();
        assert!(err.contains("memory and pids"), "{err}");
    }

    #[test]
    fn limit_files_for_both_versions() {
        let limits = Limits {
            memory_mb: 128,
            pids_max: 64,
            cpu_millis: 500,
        };
        let v2 = Hierarchy::V2("/cg".into());
        let files = limit_files(&v2, &v2.dirs(Path::new("p/x")), limits);
        assert!(files.contains(&("/cg/p/x/memory.max".into(), "134217728".into())));
        assert!(files.contains(&("/cg/p/x/pids.max".into(), "64".into())));
        assert!(files.contains(&("/cg/p/x/cpu.max".into(), "50000 100000".into())));
        let v1 = Hierarchy::V1 {
            memory: "/m".into(),
            pids: "/p".into(),
            cpu: Some("/c".into()),
        };
        let files = limit_files(&v1, &v1.dirs(Path::new("g")), limits);
        assert!(files.contains(&("/m/g/memory.limit_in_bytes".into(), "134217728".into())));
        assert!(files.contains(&("/p/g/pids.max".into(), "64".into())));
        assert!(files.contains(&("/c/g/cpu.cfs_quota_us".into(), "50000".into())));
    }
}
