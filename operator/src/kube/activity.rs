//! Request activity of functions that scale to zero, recorded by this
//! operator replica's invoke proxy in the [`LAST_REQUEST`] annotation of
//! their Function resource (a JSON merge patch of the annotation only),
//! which the Function controller reads ([`super::scale`]).
//!
//! Throttled per function: a request patches at once unless this replica
//! patched the function within the throttle ([`ACTIVITY_THROTTLE`]), in
//! which case one trailing patch follows when the interval ends. A request
//! holds an [`ActivityLease`] until its answer has been streamed: while any
//! lease of a function is held the annotation is refreshed every interval,
//! and dropping one counts as activity (a long request's end is recorded,
//! at most one interval late). Patch failures are logged, never fail a
//! request. Background work holds only a weak reference, so dropping the
//! [`Activity`] (the backend) ends it.

use super::crd::Function;
use super::scale::{ACTIVITY_THROTTLE, LAST_REQUEST};
use crate::backend::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// Longest a request waits for its activity patch.
const PATCH_TIMEOUT: Duration = Duration::from_secs(5);

type Key = (String, String);

/// Per function: when this replica last patched, leases held, whether a
/// request since then is unrecorded, whether the background task runs.
#[derive(Debug, Default)]
struct Entry {
    last_patch: Option<Instant>,
    in_flight: u32,
    dirty: bool,
    task: bool,
}

struct Inner {
    client: Client,
    throttle: Duration,
    entries: Mutex<HashMap<Key, Entry>>,
}

/// This replica's activity recorder (see the module docs).
#[derive(Clone)]
pub struct Activity {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activity")
            .field("throttle", &self.inner.throttle)
            .finish()
    }
}

/// Held by a request in flight (the [`InvokeTarget`](crate::backend::InvokeTarget)'s
/// lease); its drop records the request's end.
pub struct ActivityLease {
    inner: Weak<Inner>,
    key: Key,
}

impl Drop for ActivityLease {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            let spawn = inner.with_entry(&self.key, |e| {
                e.in_flight = e.in_flight.saturating_sub(1);
                e.dirty = true;
                !std::mem::replace(&mut e.task, true)
            });
            if spawn {
                inner.spawn_task(self.key.clone());
            }
        }
    }
}

impl Inner {
    fn with_entry<T>(&self, key: &Key, f: impl FnOnce(&mut Entry) -> T) -> T {
        let mut entries = match self.entries.lock() {
            Ok(e) => e,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(entries.entry(key.clone()).or_default())
    }

    /// Writes the annotation (now); a failure is logged.
    async fn patch(&self, (ns, name): &Key) {
        let patch = serde_json::json!({
            "metadata": { "annotations": { LAST_REQUEST: Timestamp::now().to_string() } }
        });
        let api: Api<Function> = Api::namespaced(self.client.clone(), ns);
        let pp = PatchParams::default();
        let patch = Patch::Merge(&patch);
        let call = api.patch(name, &pp, &patch);
        match tokio::time::timeout(PATCH_TIMEOUT, call).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(function = %format!("{ns}/{name}"), error = %e, "cannot record activity")
            }
            Err(_) => {
                tracing::warn!(function = %format!("{ns}/{name}"), "recording activity timed out")
            }
        }
    }

    /// The trailing and heartbeat patches of `key`: at the end of each
    /// throttle interval, patches again while leases are held or a request
    /// went unrecorded; ends (forgetting the function) once neither is true.
    fn spawn_task(self: &Arc<Self>, key: Key) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(self);
        rt.spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let last = inner.with_entry(&key, |e| e.last_patch);
                let throttle = inner.throttle;
                drop(inner);
                let due = last.map_or_else(Instant::now, |t| t + throttle);
                tokio::time::sleep_until(due).await;
                let Some(inner) = weak.upgrade() else { return };
                let again = {
                    let mut entries = match inner.entries.lock() {
                        Ok(e) => e,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    let Some(e) = entries.get_mut(&key) else {
                        return;
                    };
                    if e.in_flight > 0 || e.dirty {
                        e.dirty = false;
                        e.last_patch = Some(Instant::now());
                        true
                    } else {
                        entries.remove(&key);
                        false
                    }
                };
                if !again {
                    return;
                }
                inner.patch(&key).await;
            }
        });
    }
}

impl Activity {
    /// A recorder patching through `client` at most once per `throttle` per
    /// function ([`ACTIVITY_THROTTLE`] in production).
    pub fn new(client: Client, throttle: Duration) -> Activity {
        Activity {
            inner: Arc::new(Inner {
                client,
                throttle,
                entries: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// [`Activity::new`] with [`ACTIVITY_THROTTLE`].
    pub fn with_default_throttle(client: Client) -> Activity {
        Activity::new(client, ACTIVITY_THROTTLE)
    }

    /// Records a request for `ns/name` now: patches (and waits for it, at
    /// most a few seconds) unless this replica patched within the throttle,
    /// in which case a trailing patch is scheduled instead.
    pub async fn touch(&self, ns: &str, name: &str) {
        let key = (ns.to_string(), name.to_string());
        let throttle = self.inner.throttle;
        let (patch_now, spawn) = self.inner.with_entry(&key, |e| {
            if e.last_patch.is_none_or(|t| t.elapsed() >= throttle) {
                e.last_patch = Some(Instant::now());
                (true, false)
            } else {
                e.dirty = true;
                (false, !std::mem::replace(&mut e.task, true))
            }
        });
        if spawn {
            self.inner.spawn_task(key.clone());
        }
        if patch_now {
            self.inner.patch(&key).await;
        }
    }

    /// A lease for a request to `ns/name` in flight: refreshes the
    /// annotation every throttle interval while held, records the end when
    /// dropped.
    pub fn lease(&self, ns: &str, name: &str) -> Lease {
        let key = (ns.to_string(), name.to_string());
        let spawn = self.inner.with_entry(&key, |e| {
            e.in_flight = e.in_flight.saturating_add(1);
            !std::mem::replace(&mut e.task, true)
        });
        if spawn {
            self.inner.spawn_task(key.clone());
        }
        Arc::new(ActivityLease {
            inner: Arc::downgrade(&self.inner),
            key,
        })
    }

    /// Leases of `ns/name` held now (tests).
    pub fn in_flight(&self, ns: &str, name: &str) -> u32 {
        let key = (ns.to_string(), name.to_string());
        match self.inner.entries.lock() {
            Ok(e) => e.get(&key).map_or(0, |e| e.in_flight),
            Err(poisoned) => poisoned.into_inner().get(&key).map_or(0, |e| e.in_flight),
        }
    }
}
