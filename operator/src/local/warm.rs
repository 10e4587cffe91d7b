//! Warm Node processes: V8 cannot fork, so instead of a zygote each
//! namespace with Node functions at zero keeps one `node server.js --warm`
//! started ahead of need per memory size (the V8 heap limit is fixed at
//! start). It runs like any user process of its namespace (strict: its own
//! sandbox under the namespace's uid, seeing that namespace's builds and
//! Node dependency caches read-only, serving on its own socket) and waits
//! for a function's environment on stdin. A cold start takes it from the
//! pool, points its output at the function's run log, hands it the
//! environment, waits for its READY line, and starts a replacement.

use super::supervisor::{LineSink, Spawned};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A warm process and the switch its output goes through.
pub struct Member {
    /// The started, not yet assigned process (dropping it kills it).
    pub spawned: Spawned,
    /// Where its output goes; [`Member::route`] points it at a run log.
    pub sink: Arc<Mutex<LineSink>>,
}

impl Member {
    /// Sends the member's output to `sink` from now on.
    pub fn route(&self, sink: LineSink) {
        *self.sink.lock().unwrap_or_else(|p| p.into_inner()) = sink;
    }
}

/// A line sink that forwards to whatever `switch` holds (initially `first`).
pub fn switchable(first: LineSink) -> (Arc<Mutex<LineSink>>, LineSink) {
    let switch = Arc::new(Mutex::new(first));
    let forward = switch.clone();
    let sink: LineSink = Arc::new(move |line: &str| {
        let target = forward.lock().unwrap_or_else(|p| p.into_inner()).clone();
        target(line);
    });
    (switch, sink)
}

/// The warm members, at most one per (namespace, memory_mb).
#[derive(Default)]
pub struct WarmPool {
    map: Mutex<HashMap<(String, u32), Member>>,
}

impl WarmPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u32), Member>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the live member for (`ns`, `memory_mb`), if there is one.
    pub fn take(&self, ns: &str, memory_mb: u32) -> Option<Member> {
        let m = self.lock().remove(&(ns.to_string(), memory_mb))?;
        (!m.spawned.has_exited()).then_some(m)
    }

    /// True when a live member waits for (`ns`, `memory_mb`).
    pub fn has(&self, ns: &str, memory_mb: u32) -> bool {
        self.lock()
            .get(&(ns.to_string(), memory_mb))
            .is_some_and(|m| !m.spawned.has_exited())
    }

    /// Adds a member (replacing a dead one; a live one is kept and `m` dropped).
    pub fn put(&self, ns: &str, memory_mb: u32, m: Member) {
        let mut map = self.lock();
        let key = (ns.to_string(), memory_mb);
        if map.get(&key).is_none_or(|old| old.spawned.has_exited()) {
            map.insert(key, m);
        }
    }

    /// Kills every member (at shutdown).
    pub fn clear(&self) -> usize {
        let all: Vec<Member> = self.lock().drain().map(|(_, m)| m).collect();
        all.len()
    }
}
