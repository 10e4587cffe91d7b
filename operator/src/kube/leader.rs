//! Leader election over a `coordination.k8s.io/v1` Lease, so several
//! operator replicas can serve the REST API while exactly one runs the
//! controllers.
//!
//! The protocol is the usual one (client-go's, simplified): the holder renews
//! `renewTime` every [`LeaderOptions::renew_every`]; anyone may take the
//! lease once `renewTime + leaseDurationSeconds` has passed, or when its
//! holder is empty (a holder that shuts down cleanly releases it). Every
//! write is a `replace` carrying the read `resourceVersion`, so two
//! candidates racing for an expired lease cannot both win: the API server
//! answers the slower one 409.
//!
//! A leader that fails to renew for a whole lease duration stops acting as
//! leader before anyone else may take over (it gives up after
//! `lease_duration - renew_every` without a successful renew).

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use std::time::Duration;
use tokio::sync::watch;

/// Settings of the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderOptions {
    /// Namespace of the Lease (the operator's own).
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (pod name + a random suffix).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews (and candidates retry).
    pub renew_every: Duration,
}

impl LeaderOptions {
    /// Defaults for `namespace`: Lease `sless-operator`, 15 s lease renewed
    /// every 5 s, identity from `POD_NAME` (or the host name) plus a random
    /// suffix, so two processes never share one.
    pub fn new(namespace: &str) -> LeaderOptions {
        let base = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "sless-operator".to_string());
        let mut suffix = [0u8; 4];
        // A failed getrandom leaves zeros: still unique enough with the pid.
        let _ = getrandom::fill(&mut suffix);
        LeaderOptions {
            namespace: namespace.to_string(),
            name: "sless-operator".to_string(),
            identity: format!("{base}-{}-{}", std::process::id(), hex::encode(suffix)),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        }
    }
}

/// One candidate in the election.
pub struct LeaderElection {
    api: Api<Lease>,
    opts: LeaderOptions,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn expired(spec: &LeaseSpec, at: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let secs = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    renewed.0 + SignedDuration::from_secs(secs) <= at
}

impl LeaderElection {
    /// A candidate using `client`.
    pub fn new(client: Client, opts: LeaderOptions) -> LeaderElection {
        LeaderElection {
            api: Api::namespaced(client, &opts.namespace),
            opts,
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.opts.identity
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.opts.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// One round: takes, renews or observes the lease. `Ok(true)` when this
    /// candidate holds it afterwards.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let me = self.opts.identity.clone();
        let Some(mut lease) = self.api.get_opt(&self.opts.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.opts.name.clone()),
                    namespace: Some(self.opts.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(self.duration_secs()),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder == me {
            spec.renew_time = Some(now());
            spec.lease_duration_seconds = Some(self.duration_secs());
        } else if holder.is_empty() || expired(spec, Timestamp::now()) {
            spec.holder_identity = Some(me);
            spec.acquire_time = Some(now());
            spec.renew_time = Some(now());
            spec.lease_duration_seconds = Some(self.duration_secs());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        } else {
            return Ok(false);
        }
        // The read resourceVersion rides along: a concurrent writer wins, we get 409.
        match self
            .api
            .replace(&self.opts.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up if this candidate holds it (clean shutdown), so
    /// another replica takes over at once instead of after the lease expires.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.opts.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.opts.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        spec.acquire_time = None;
        match self
            .api
            .replace(&self.opts.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Campaigns until `stop` fires, publishing leadership on `leader`
    /// (`true` while this candidate may run the controllers). A leader whose
    /// renewals fail for longer than `lease_duration - renew_every` steps
    /// down first. On the way out it publishes `false` but keeps the lease:
    /// call [`LeaderElection::release`] once what the lease guards has
    /// stopped, so no other replica starts while this one still runs.
    pub async fn run(&self, leader: watch::Sender<bool>, mut stop: watch::Receiver<bool>) {
        let grace = self
            .opts
            .lease_duration
            .saturating_sub(self.opts.renew_every);
        let mut last_success = tokio::time::Instant::now();
        loop {
            let held = match self.try_acquire_or_renew().await {
                Ok(held) => {
                    last_success = tokio::time::Instant::now();
                    held
                }
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.opts.name, "leader election: lease call failed");
                    // Keep leading only while the lease surely has not expired.
                    *leader.borrow() && last_success.elapsed() < grace
                }
            };
            if *leader.borrow() != held {
                tracing::info!(identity = %self.opts.identity, leader = held, "leadership changed");
                let _ = leader.send(held);
            }
            tokio::select! {
                _ = tokio::time::sleep(self.opts.renew_every) => {}
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        if *leader.borrow() {
            let _ = leader.send(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(renewed_secs_ago: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some("other".into()),
            renew_time: Some(MicroTime(
                Timestamp::now() - SignedDuration::from_secs(renewed_secs_ago),
            )),
            lease_duration_seconds: Some(duration),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_expires_after_its_duration_without_renewal() {
        assert!(!expired(&spec(5, 15), Timestamp::now()));
        assert!(expired(&spec(16, 15), Timestamp::now()));
        assert!(
            expired(&LeaseSpec::default(), Timestamp::now()),
            "never renewed"
        );
    }

    #[test]
    fn identities_are_unique_per_process_and_call() {
        let a = LeaderOptions::new("sless-system");
        let b = LeaderOptions::new("sless-system");
        assert_ne!(a.identity, b.identity);
        assert_eq!(a.name, "sless-operator");
        assert!(a.renew_every < a.lease_duration);
    }
}
