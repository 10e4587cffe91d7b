//! Scale to zero: what a function's slot knows about demand. Requests take a
//! [`Lease`] (in flight until the answer has been streamed); the worker
//! waits in [`Scale::until_idle`] for `idle_timeout_sec` without one and then
//! stops the process; a request for a function at zero wakes the worker
//! ([`Scale::wake`]) and waits on [`Scale::subscribe`] until the cold start
//! has gone live or failed. See docs/local-backend.md, "Scale to zero".

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};

/// Demand on one function, shared by its slot, its worker and the leases
/// of requests in flight.
pub struct Scale {
    epoch: Instant,
    /// Milliseconds after `epoch` when the last request started or ended.
    last_used_ms: AtomicU64,
    in_flight: AtomicUsize,
    min_instances: AtomicU32,
    idle_timeout_ms: AtomicU64,
    wake: Notify,
    /// Bumped when a cold start went live or failed.
    changed: watch::Sender<u64>,
}

impl Default for Scale {
    fn default() -> Self {
        Scale {
            epoch: Instant::now(),
            last_used_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            min_instances: AtomicU32::new(1),
            idle_timeout_ms: AtomicU64::new(u64::MAX),
            wake: Notify::new(),
            changed: watch::channel(0).0,
        }
    }
}

impl std::fmt::Debug for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scale")
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .field("min_instances", &self.min_instances.load(Ordering::Relaxed))
            .finish()
    }
}

/// Held by a request while it is in flight: a function is never scaled
/// down under it. Dropping it counts the request as ended.
#[derive(Debug)]
pub struct Lease(Arc<Scale>);

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Scale {
    /// Applies the function's `min_instances` and `idle_timeout_sec`.
    pub fn configure(&self, min_instances: u32, idle_timeout_sec: u32) {
        self.min_instances.store(min_instances, Ordering::SeqCst);
        self.idle_timeout_ms
            .store(u64::from(idle_timeout_sec) * 1000, Ordering::SeqCst);
    }

    /// True when the function keeps a process even when idle.
    pub fn keeps_one(&self) -> bool {
        self.min_instances.load(Ordering::SeqCst) > 0
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Counts now as the last use.
    pub fn touch(&self) {
        self.last_used_ms.store(self.now_ms(), Ordering::SeqCst);
    }

    /// A request starts: it is in flight until the lease is dropped.
    pub fn lease(self: &Arc<Self>) -> Lease {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.touch();
        Lease(self.clone())
    }

    /// How long until the function counts as idle: `None` when it is idle
    /// now (no request in flight, none for `idle_timeout_sec`, and
    /// `min_instances = 0`), else how long to wait before asking again.
    pub fn idle_in(&self) -> Option<Duration> {
        const RECHECK: Duration = Duration::from_secs(1);
        if self.keeps_one() || self.in_flight.load(Ordering::SeqCst) > 0 {
            return Some(RECHECK);
        }
        let since = self
            .now_ms()
            .saturating_sub(self.last_used_ms.load(Ordering::SeqCst));
        let timeout = self.idle_timeout_ms.load(Ordering::SeqCst);
        if since >= timeout {
            return None;
        }
        // Re-read at least every second: the settings may change.
        Some(Duration::from_millis(timeout - since).min(RECHECK))
    }

    /// Returns once [`Scale::idle_in`] says idle. The caller decides under
    /// its slot's lock (a request may have started in between).
    pub async fn until_idle(&self) {
        while let Some(wait) = self.idle_in() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Wakes the worker of a function at zero (remembered when it is not
    /// waiting yet).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Waits for [`Scale::wake`].
    pub async fn woken(&self) {
        self.wake.notified().await;
    }

    /// A receiver that sees the next cold start go live or fail.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Tells the waiting requests that the cold start went live or failed.
    pub fn announce(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_only_without_requests_past_the_timeout_and_with_min_zero() {
        let s = Arc::new(Scale::default());
        // min_instances 1 is never idle.
        s.configure(1, 1);
        assert!(s.idle_in().is_some());
        s.configure(0, 3600);
        s.touch();
        let wait = s.idle_in().unwrap();
        assert!(wait <= Duration::from_secs(1), "re-checks every second");
        s.configure(0, 1);
        s.last_used_ms.store(0, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1100));
        assert!(s.idle_in().is_none());
        // A request in flight keeps it up, however long it takes.
        let lease = s.lease();
        s.last_used_ms.store(0, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1100));
        assert!(s.idle_in().is_some());
        // Its end counts as a use.
        drop(lease);
        assert!(s.idle_in().is_some());
        assert_eq!(s.in_flight.load(Ordering::SeqCst), 0);
    }
}
