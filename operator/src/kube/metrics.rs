//! Prometheus metrics of the controllers: reconciles, failures and reconcile
//! time per controller, rendered in the text exposition format by
//! [`Metrics::render`] (served by whoever exposes `/metrics`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// One metric family: name, help text, and how to read it from [`Counts`].
type Family = (&'static str, &'static str, fn(&Counts) -> String);

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    reconciles: u64,
    failures: u64,
    seconds: f64,
}

/// Counters shared by the controllers.
#[derive(Debug, Default)]
pub struct Metrics {
    counts: Mutex<BTreeMap<&'static str, Counts>>,
}

impl Metrics {
    /// Records one reconcile of `controller` that took `took`.
    pub fn record(&self, controller: &'static str, took: Duration, ok: bool) {
        if let Ok(mut m) = self.counts.lock() {
            let c = m.entry(controller).or_default();
            c.reconciles += 1;
            if !ok {
                c.failures += 1;
            }
            c.seconds += took.as_secs_f64();
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let counts = self.counts.lock().map(|m| m.clone()).unwrap_or_default();
        let mut out = String::new();
        let families: [Family; 3] = [
            (
                "sless_reconciles_total",
                "Reconciles run, per controller.",
                |c| c.reconciles.to_string(),
            ),
            (
                "sless_reconcile_failures_total",
                "Reconciles that failed, per controller.",
                |c| c.failures.to_string(),
            ),
            (
                "sless_reconcile_seconds_total",
                "Time spent reconciling, per controller.",
                |c| format!("{:.6}", c.seconds),
            ),
        ];
        for (name, help, value) in families {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for (controller, c) in &counts {
                out.push_str(&format!(
                    "{name}{{controller=\"{controller}\"}} {}\n",
                    value(c)
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_per_controller() {
        let m = Metrics::default();
        m.record("function", Duration::from_millis(500), true);
        m.record("function", Duration::from_millis(250), false);
        m.record("trigger", Duration::from_millis(10), true);
        let text = m.render();
        assert!(text.contains("# TYPE sless_reconciles_total counter"));
        assert!(text.contains("sless_reconciles_total{controller=\"function\"} 2\n"));
        assert!(text.contains("sless_reconcile_failures_total{controller=\"function\"} 1\n"));
        assert!(text.contains("sless_reconcile_failures_total{controller=\"trigger\"} 0\n"));
        assert!(text.contains("sless_reconcile_seconds_total{controller=\"function\"} 0.750000\n"));
    }
}
