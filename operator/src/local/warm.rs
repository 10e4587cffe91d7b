//! Warm Node processes: V8 cannot fork, so instead of a zygote each
//! namespace with Node functions at zero keeps one `node server.js --warm`
//! started ahead of need per memory size (the V8 heap limit is fixed at
//! start). It runs like any user process of its namespace (strict: its own
//! sandbox under the namespace's uid, seeing that namespace's builds and
//! Node dependency caches read-only, serving on its own socket) and waits
//! for a function's environment on stdin. A cold start takes it from the
//! pool, points its output at the function's run log, hands it the
//! environment, waits for its READY line, and only then starts a
//! replacement (so the replacement's boot does not compete for the CPU with
//! the start being waited for).
//!
//! Warm state follows demand: a namespace keeps at most
//! [`SIZES_PER_NAMESPACE`] memory sizes warm (the least recently used one is
//! dropped), and a member nobody asked for within the operator's
//! `warm_idle` is stopped (see [`WarmPool::expire`]).

use super::supervisor::{LineSink, Spawned};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Most memory sizes one namespace keeps a warm process for.
pub const SIZES_PER_NAMESPACE: usize = 2;

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

/// A line sink that forwards to whatever the returned switch holds
/// (initially `first`).
pub fn switchable(first: LineSink) -> (Arc<Mutex<LineSink>>, LineSink) {
    let switch = Arc::new(Mutex::new(first));
    let forward = switch.clone();
    let sink: LineSink = Arc::new(move |line: &str| {
        let target = forward.lock().unwrap_or_else(|p| p.into_inner()).clone();
        target(line);
    });
    (switch, sink)
}

/// A (namespace, memory_mb) entry: its member, if any, and when a cold start
/// or a scale-down last asked for it.
struct Entry {
    member: Option<Member>,
    last_wanted: Instant,
}

/// The warm members, at most one per (namespace, memory_mb).
#[derive(Default)]
pub struct WarmPool {
    map: Mutex<HashMap<(String, u32), Entry>>,
}

impl WarmPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u32), Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the live member for (`ns`, `memory_mb`), if there is one, and
    /// notes the demand.
    pub fn take(&self, ns: &str, memory_mb: u32) -> Option<Member> {
        let mut map = self.lock();
        let e = map.get_mut(&(ns.to_string(), memory_mb))?;
        e.last_wanted = Instant::now();
        let m = e.member.take()?;
        (!m.spawned.has_exited()).then_some(m)
    }

    /// Notes a demand for (`ns`, `memory_mb`) and says whether a member must
    /// be started for it (none there, or the one there has exited).
    pub fn wants(&self, ns: &str, memory_mb: u32) -> bool {
        let mut map = self.lock();
        let e = map.entry((ns.to_string(), memory_mb)).or_insert(Entry {
            member: None,
            last_wanted: Instant::now(),
        });
        e.last_wanted = Instant::now();
        e.member.as_ref().is_none_or(|m| m.spawned.has_exited())
    }

    /// Adds a member (replacing a dead one; a live one is kept and `m`
    /// dropped). When the namespace then has more than
    /// [`SIZES_PER_NAMESPACE`] sizes warm, the least recently wanted other
    /// one is dropped (killed).
    pub fn put(&self, ns: &str, memory_mb: u32, m: Member) {
        let dropped = {
            let mut map = self.lock();
            let key = (ns.to_string(), memory_mb);
            let e = map.entry(key.clone()).or_insert(Entry {
                member: None,
                last_wanted: Instant::now(),
            });
            if e.member.as_ref().is_none_or(|old| old.spawned.has_exited()) {
                e.member = Some(m);
            }
            let mut warm: Vec<(&(String, u32), Instant)> = map
                .iter()
                .filter(|(k, e)| k.0 == ns && **k != key && e.member.is_some())
                .map(|(k, e)| (k, e.last_wanted))
                .collect();
            warm.sort_by_key(|(_, t)| *t);
            let excess = (warm.len() + 1).saturating_sub(SIZES_PER_NAMESPACE);
            let evict: Vec<(String, u32)> = warm
                .into_iter()
                .take(excess)
                .map(|(k, _)| k.clone())
                .collect();
            evict
                .into_iter()
                .filter_map(|k| map.remove(&k).and_then(|e| e.member))
                .collect::<Vec<Member>>()
        };
        drop(dropped);
    }

    /// Stops members nobody wanted since `cutoff`; the number stopped.
    pub fn expire(&self, cutoff: Instant) -> usize {
        let gone: Vec<Member> = {
            let mut map = self.lock();
            let old: Vec<(String, u32)> = map
                .iter()
                .filter(|(_, e)| e.last_wanted < cutoff)
                .map(|(k, _)| k.clone())
                .collect();
            old.into_iter()
                .filter_map(|k| map.remove(&k).and_then(|e| e.member))
                .collect()
        };
        gone.len()
    }

    /// Kills every member (at shutdown).
    pub fn clear(&self) -> usize {
        let all: Vec<Member> = self.lock().drain().filter_map(|(_, e)| e.member).collect();
        all.len()
    }
}
