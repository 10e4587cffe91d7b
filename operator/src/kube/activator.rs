//! The activator: a request for a function at zero is held until its
//! Deployment has an available replica again. The request itself has
//! already been recorded ([`super::activity`]), which makes the Function
//! controller scale the Deployment to one; the activator only watches the
//! Deployment (a GET every [`POLL`]) until it has an available replica,
//! bounded by the function's timeout. Concurrent requests for one function
//! in this replica share one wait (one poll loop, run as its own task so a
//! caller going away does not stop it for the others).

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::Api;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Interval between two looks at a waking function's Deployment.
pub const POLL: Duration = Duration::from_millis(500);

type Key = (String, String);
/// `None` while waiting; then `Ok` (available) or what was seen last.
type Outcome = Option<Result<(), String>>;

/// Shared waits for functions scaling up from zero (see the module docs).
pub struct Activator {
    client: Client,
    poll: Duration,
    waits: Arc<Mutex<HashMap<Key, watch::Receiver<Outcome>>>>,
}

impl std::fmt::Debug for Activator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activator")
            .field("poll", &self.poll)
            .finish()
    }
}

/// Whether a Deployment can serve a request: it wants at least one replica
/// and has one available.
pub fn has_available_replica(d: &Deployment) -> bool {
    let wanted = d.spec.replicas.unwrap_or(1);
    let available = d
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    wanted >= 1 && available >= 1
}

/// What a waiting request saw of the Deployment `name`, for the 503.
fn describe(name: &str, d: &Deployment) -> String {
    let wanted = d.spec.replicas.unwrap_or(1);
    let st = d.status.clone().unwrap_or_default();
    format!(
        "Deployment {name} wants {wanted} replica(s), has {} available ({} existing)",
        st.available_replicas.unwrap_or(0),
        st.replicas.unwrap_or(0)
    )
}

impl Activator {
    /// An activator reading Deployments through `client`, every [`POLL`].
    pub fn new(client: Client) -> Activator {
        Activator {
            client,
            poll: POLL,
            waits: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Waits until the Deployment `deployment` in `deploy_ns` has an
    /// available replica, at most `timeout` (measured from the first of
    /// the concurrent callers); `Err` says what was seen last. Every
    /// caller for the same Deployment in the meantime joins that wait.
    pub async fn wait_available(
        &self,
        deploy_ns: &str,
        deployment: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        let key = (deploy_ns.to_string(), deployment.to_string());
        let mut rx = {
            let mut waits = match self.waits.lock() {
                Ok(w) => w,
                Err(poisoned) => poisoned.into_inner(),
            };
            match waits.get(&key) {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    waits.insert(key.clone(), rx.clone());
                    self.spawn_wait(key, tx, timeout);
                    rx
                }
            }
        };
        match rx.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.clone().unwrap_or(Ok(())),
            Err(_) => Err(format!("the wait for Deployment {deployment} ended")),
        }
    }

    fn spawn_wait(&self, key: Key, tx: watch::Sender<Outcome>, timeout: Duration) {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &key.0);
        let waits = self.waits.clone();
        let poll = self.poll;
        tokio::spawn(async move {
            let deadline = Instant::now() + timeout;
            let name = key.1.as_str();
            let outcome = loop {
                let seen = match api.get_opt(name).await {
                    Ok(Some(d)) if has_available_replica(&d) => break Ok(()),
                    Ok(Some(d)) => describe(name, &d),
                    Ok(None) => format!("Deployment {name} does not exist"),
                    Err(e) => format!("cannot read Deployment {name}: {e}"),
                };
                if Instant::now() + poll > deadline {
                    break Err(seen);
                }
                tokio::time::sleep(poll).await;
            };
            // Later requests start a wait of their own.
            match waits.lock() {
                Ok(mut w) => w.remove(&key),
                Err(poisoned) => poisoned.into_inner().remove(&key),
            };
            let _ = tx.send(Some(outcome));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i32, available: Option<i32>) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "fn-hello"},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
            "status": {"replicas": replicas, "availableReplicas": available},
        }))
        .unwrap()
    }

    #[test]
    fn available_means_wanted_and_available() {
        assert!(has_available_replica(&deployment(1, Some(1))));
        assert!(!has_available_replica(&deployment(1, Some(0))));
        assert!(!has_available_replica(&deployment(1, None)));
        // A terminating pod still counted while scaling down does not serve.
        assert!(!has_available_replica(&deployment(0, Some(1))));
        assert_eq!(
            describe("fn-hello", &deployment(1, Some(0))),
            "Deployment fn-hello wants 1 replica(s), has 0 available (1 existing)"
        );
    }
}
