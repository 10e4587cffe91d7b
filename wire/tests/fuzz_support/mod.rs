//! What every bolero harness file shares (wire, operator and provider tests
//! include this file with `#[path]`): the random-input budget under plain
//! `cargo test` and the tally of inputs tried and accepted.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Random inputs per harness under plain `cargo test`.
pub const TEST_TIME: Duration = Duration::from_secs(3);

/// Counts the inputs one harness tried and how many the code under test
/// accepted; prints them when the harness ends (`cargo test -- --nocapture`),
/// for the figures of docs/reliability.md.
pub struct Tally {
    name: &'static str,
    tried: AtomicU64,
    accepted: AtomicU64,
}

impl Tally {
    /// A tally printed as `fuzz <name>: ...`.
    pub fn new(name: &'static str) -> Self {
        Tally {
            name,
            tried: 0.into(),
            accepted: 0.into(),
        }
    }

    /// One input tried; `accepted` when the code under test took it.
    pub fn count(&self, accepted: bool) {
        self.tried.fetch_add(1, Relaxed);
        if accepted {
            self.accepted.fetch_add(1, Relaxed);
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        eprintln!(
            "fuzz {}: {} inputs tried, {} accepted",
            self.name,
            self.tried.get_mut(),
            self.accepted.get_mut()
        );
    }
}
