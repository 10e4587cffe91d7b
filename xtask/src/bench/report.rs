//! The benchmark report: figures with their same-run baselines, failures, the
//! machine, the printed table and `results.json`.

use std::path::Path;

use serde::Serialize;

use super::error::{Result, io};
use super::stats;

/// How a figure compares with its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compare {
    /// `sless / baseline` (×).
    Ratio,
    /// `sless - baseline` in the figure's unit.
    Delta,
}

/// One measured figure next to its baseline from the same run.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// Section number and name, e.g. `1 invoke`.
    pub section: String,
    /// What is measured, e.g. `python rps: operator invoke (b) vs direct (a)`.
    pub name: String,
    /// The sless side of the comparison.
    pub value: f64,
    /// The baseline measured in the same run.
    pub baseline: f64,
    /// The unit of `value` and `baseline`, e.g. `req/s`, `ms`, `MB/s`.
    pub unit: String,
    /// Ratio or delta.
    pub compare: Compare,
    /// The ratio or delta itself (`null` when the baseline was zero).
    pub result: Option<f64>,
    /// How to read it / what the baseline is.
    pub note: String,
}

/// Everything one run produced.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// Facts about the machine and its load.
    pub machine: Machine,
    /// Whether `--quick` was given.
    pub quick: bool,
    /// Every figure, in order.
    pub figures: Vec<Figure>,
    /// Everything that made the run invalid; non-empty → exit status 1.
    pub failures: Vec<String>,
    /// Raw measurements, by section, for whoever wants more than the table.
    pub raw: serde_json::Map<String, serde_json::Value>,
}

/// The machine a run happened on.
#[derive(Debug, Default, Serialize)]
pub struct Machine {
    /// `nproc`.
    pub cpus: usize,
    /// `MemTotal` in MiB.
    pub mem_total_mib: u64,
    /// The CPU model name.
    pub cpu_model: String,
    /// `/proc/loadavg` when the run started.
    pub loadavg_start: String,
    /// `/proc/loadavg` when the run ended.
    pub loadavg_end: String,
}

impl Machine {
    /// Reads the machine facts from `/proc`.
    pub fn probe() -> Machine {
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_total_mib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024);
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default();
        Machine {
            cpus,
            mem_total_mib,
            cpu_model,
            loadavg_start: loadavg(),
            loadavg_end: String::new(),
        }
    }
}

/// `/proc/loadavg` without its trailing newline.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

impl Report {
    /// Adds a figure compared by ratio.
    pub fn ratio(
        &mut self,
        section: &str,
        name: &str,
        value: f64,
        baseline: f64,
        unit: &str,
        note: &str,
    ) {
        self.push(section, name, value, baseline, unit, Compare::Ratio, note);
    }

    /// Adds a figure compared by difference.
    pub fn delta(
        &mut self,
        section: &str,
        name: &str,
        value: f64,
        baseline: f64,
        unit: &str,
        note: &str,
    ) {
        self.push(section, name, value, baseline, unit, Compare::Delta, note);
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        section: &str,
        name: &str,
        value: f64,
        baseline: f64,
        unit: &str,
        compare: Compare,
        note: &str,
    ) {
        let result = match compare {
            Compare::Ratio => stats::ratio(value, baseline),
            Compare::Delta => Some(value - baseline).filter(|d| d.is_finite()),
        };
        let line = render_row(section, name, value, baseline, unit, compare, result);
        println!("{line}");
        self.figures.push(Figure {
            section: section.to_owned(),
            name: name.to_owned(),
            value,
            baseline,
            unit: unit.to_owned(),
            compare,
            result,
            note: note.to_owned(),
        });
    }

    /// Records a failure (printed at once and again at the end).
    pub fn fail(&mut self, what: impl Into<String>) {
        let what = what.into();
        eprintln!("FAILURE: {what}");
        self.failures.push(what);
    }

    /// Stores raw data under `key`.
    pub fn raw(&mut self, key: &str, value: impl Serialize) {
        let v = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.raw.insert(key.to_owned(), v);
    }

    /// The whole table as Markdown, ordered by section (stable within one).
    pub fn table(&self) -> String {
        let mut s = String::from(
            "| section | figure | sless | baseline | unit | ratio / delta |\n|---|---|--:|--:|---|--:|\n",
        );
        let mut figures: Vec<&Figure> = self.figures.iter().collect();
        figures.sort_by(|a, b| a.section.cmp(&b.section));
        for f in figures {
            s.push_str(&render_row(
                &f.section, &f.name, f.value, f.baseline, &f.unit, f.compare, f.result,
            ));
            s.push('\n');
        }
        s
    }

    /// Writes `results.json` into `dir`.
    pub fn write_json(&self, dir: &Path) -> Result<()> {
        let path = dir.join("results.json");
        let text = serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".to_owned());
        std::fs::write(&path, text + "\n").map_err(io("write", path))
    }
}

/// Formats a number with a precision that suits its size.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "n/a".to_owned()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn render_row(
    section: &str,
    name: &str,
    value: f64,
    baseline: f64,
    unit: &str,
    compare: Compare,
    result: Option<f64>,
) -> String {
    let result = match (compare, result) {
        (_, None) => "n/a".to_owned(),
        (Compare::Ratio, Some(r)) => format!("{}×", num(r)),
        (Compare::Delta, Some(d)) => {
            format!("{}{} {unit}", if d >= 0.0 { "+" } else { "" }, num(d))
        }
    };
    format!(
        "| {section} | {name} | {} | {} | {unit} | {result} |",
        num(value),
        num(baseline)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_show_ratio_and_signed_delta() {
        let mut r = Report::default();
        r.ratio("1 invoke", "rps", 500.0, 1000.0, "req/s", "");
        r.delta("1 invoke", "p50", 1.5, 1.0, "ms", "");
        r.ratio("3 hash", "zero", 1.0, 0.0, "MB/s", "");
        let t = r.table();
        assert!(
            t.contains("| 1 invoke | rps | 500.0 | 1000 | req/s | 0.50× |"),
            "{t}"
        );
        assert!(t.contains("| +0.50 ms |"), "{t}");
        assert!(t.contains("| n/a |"), "{t}");
        assert_eq!(r.figures[2].result, None);
    }
}
