//! The arithmetic of the report: ratios, deltas, medians, and reading RFC 3339 times.

/// `value / baseline`, or `None` when the baseline is zero or not finite.
pub fn ratio(value: f64, baseline: f64) -> Option<f64> {
    if baseline == 0.0 || !baseline.is_finite() || !value.is_finite() {
        None
    } else {
        Some(value / baseline)
    }
}

/// The median of `samples` (mean of the two middle ones for an even count).
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let mid = s.len() / 2;
    Some(if s.len().is_multiple_of(2) {
        (s[mid - 1] + s[mid]) / 2.0
    } else {
        s[mid]
    })
}

/// Per-resource overhead: `(total(n) - total(empty)) / n`, `None` for `n == 0`.
pub fn per_item(total: f64, floor: f64, n: usize) -> Option<f64> {
    if n == 0 {
        None
    } else {
        Some((total - floor) / n as f64)
    }
}

/// Seconds since the Unix epoch of an RFC 3339 UTC time with whole seconds or a
/// fraction, e.g. `2026-12-02T14:55:00Z` or `2026-12-02T14:55:00.25Z`.
pub fn parse_rfc3339_utc(s: &str) -> Option<f64> {
    let s = s.trim().strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    let mut t = time.split(':');
    let hh: i64 = t.next()?.parse().ok()?;
    let mm: i64 = t.next()?.parse().ok()?;
    let ss: f64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60) as f64 + ss)
}

/// The `VmRSS` of a process in MiB, from `/proc/<pid>/status`.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss_kib(&text).map(|kib| kib as f64 / 1024.0)
}

/// The `VmRSS:` value in KiB of a `/proc/<pid>/status` text.
pub fn parse_vm_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// CPU time a process (all its threads) has used, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CpuTicks {
    /// In user mode.
    pub user: u64,
    /// In the kernel on its behalf (system calls, its sockets' work).
    pub system: u64,
}

impl CpuTicks {
    /// The ticks used since `earlier`.
    pub fn since(self, earlier: CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// The CPU time of a process so far, from `/proc/<pid>/stat`.
pub fn cpu_ticks(pid: u32) -> Option<CpuTicks> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu(&text)
}

/// The CPU time of `root` and every process below it so far (a sandboxed
/// function's server runs under bwrap, two processes down from the pid the
/// operator records). Only processes alive now are counted: the tree must not
/// change during a measurement.
pub fn tree_cpu_ticks(root: u32) -> Option<CpuTicks> {
    let mut stats: Vec<(u32, u32, CpuTicks)> = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let (Some(ppid), Some(t)) = (parse_stat_ppid(&text), parse_stat_cpu(&text)) {
            stats.push((pid, ppid, t));
        }
    }
    Some(sum_tree(root, &stats)).filter(|_| stats.iter().any(|(p, _, _)| *p == root))
}

/// The sum of `(pid, ppid, ticks)` rows over `root` and its descendants.
fn sum_tree(root: u32, rows: &[(u32, u32, CpuTicks)]) -> CpuTicks {
    let mut total = CpuTicks::default();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for (p, parent, t) in rows {
            if *p == pid {
                total.user += t.user;
                total.system += t.system;
            }
            if *parent == pid && *p != pid {
                todo.push(*p);
            }
        }
    }
    total
}

/// The parent pid (field 4) of a `/proc/<pid>/stat` line.
fn parse_stat_ppid(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `utime` and `stime` (fields 14 and 15) of a `/proc/<pid>/stat` line. The
/// command name (field 2) is in parentheses and may hold spaces or `)`, so
/// fields are counted after its last `)`.
pub fn parse_stat_cpu(stat: &str) -> Option<CpuTicks> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let user = fields.next()?.parse().ok()?;
    let system = fields.next()?.parse().ok()?;
    Some(CpuTicks { user, system })
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 when that fails, the
/// value on every Linux this runs on).
pub fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_after_the_command_name() {
        let stat = "4242 (tokio) (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 \
                    731 205 0 0 20 0 9 0 12345 100000 2000";
        assert_eq!(
            parse_stat_cpu(stat),
            Some(CpuTicks {
                user: 731,
                system: 205
            })
        );
        assert_eq!(parse_stat_cpu("4242 (short) S 1 2"), None);
        let own = cpu_ticks(std::process::id()).expect("this process's stat");
        assert!(own.since(own) == CpuTicks::default());
    }

    #[test]
    fn a_tree_sums_its_descendants_only() {
        let t = |user, system| CpuTicks { user, system };
        let rows = [
            (10, 1, t(5, 1)),
            (11, 10, t(1, 1)),
            (12, 11, t(100, 20)),
            (13, 1, t(1000, 1000)),
        ];
        assert_eq!(sum_tree(10, &rows), t(106, 22));
        assert_eq!(sum_tree(12, &rows), t(100, 20));
        let stat = "4242 (a b) c)) S 77 4242 4242 0 -1 4194560 1000 0 0 0 731 205";
        assert_eq!(parse_stat_ppid(stat), Some(77));
        let own = tree_cpu_ticks(std::process::id()).expect("this process's tree");
        assert!(own.user + own.system >= cpu_ticks(std::process::id()).unwrap().user);
        assert_eq!(tree_cpu_ticks(u32::MAX), None);
    }

    #[test]
    fn ratio_refuses_a_zero_baseline() {
        assert_eq!(ratio(3.0, 1.5), Some(2.0));
        assert_eq!(ratio(3.0, 0.0), None);
        assert_eq!(ratio(f64::NAN, 1.0), None);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn per_item_overhead_subtracts_the_floor() {
        assert_eq!(per_item(3500.0, 1500.0, 10), Some(200.0));
        assert_eq!(per_item(1.0, 0.0, 0), None);
    }

    #[test]
    fn rfc3339_times_are_read() {
        assert_eq!(parse_rfc3339_utc("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            parse_rfc3339_utc("2000-03-01T00:00:01Z"),
            Some(951_868_801.0)
        );
        assert_eq!(
            parse_rfc3339_utc("2026-12-02T14:55:00.5Z"),
            Some(1_796_223_300.5)
        );
        assert_eq!(parse_rfc3339_utc("2026-12-02 14:55:00"), None);
    }

    #[test]
    fn vm_rss_is_read_from_proc_status() {
        let s = "Name:\tx\nVmPeak:\t 9000 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(parse_vm_rss_kib(s), Some(2048));
        assert_eq!(parse_vm_rss_kib("Name: x\n"), None);
    }
}
