//! Leader election between operator replicas, against the in-memory fake API
//! server (it enforces resourceVersion on replace like the real one): one
//! leader at a time, a clean stop hands over at once, a crashed leader is
//! replaced once its lease expires.

mod fake_kube;
mod moto;
mod support;

use fake_kube::{FakeKube, Key};
use serde_json::json;
use sless_operator::kube::leader::{LeaderElection, LeaderOptions};
use std::time::{Duration, Instant};
use tokio::sync::watch;

const NS: &str = "sless-system";

fn options(identity: &str) -> LeaderOptions {
    LeaderOptions {
        namespace: NS.into(),
        name: "sless-operator".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(2),
        renew_every: Duration::from_millis(200),
    }
}

struct Candidate {
    leader: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Campaigns; a stopped candidate releases the lease (what the operator does
/// after its controllers stopped), an aborted one (a crash) does not.
fn campaign(fake: &FakeKube, identity: &str) -> Candidate {
    let (leader_tx, leader) = watch::channel(false);
    let (stop, stop_rx) = watch::channel(false);
    let election = LeaderElection::new(fake.client(), options(identity));
    let task = tokio::spawn(async move {
        election.run(leader_tx, stop_rx).await;
        election.release().await.expect("release");
    });
    Candidate { leader, stop, task }
}

fn holder(fake: &FakeKube) -> Option<String> {
    fake.get(&Key::new(
        "coordination.k8s.io/v1",
        "leases",
        NS,
        "sless-operator",
    ))
    .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
}

/// Waits until exactly one of `cs` leads, checking all along that two never
/// do; returns the leader's index.
async fn one_leader(cs: &[&Candidate], within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let leading: Vec<usize> = cs
            .iter()
            .enumerate()
            .filter(|(_, c)| *c.leader.borrow())
            .map(|(i, _)| i)
            .collect();
        assert!(leading.len() <= 1, "two leaders at once: {leading:?}");
        if leading.len() == 1 {
            return leading[0];
        }
        assert!(Instant::now() < deadline, "no leader within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn one_leader_a_clean_handover_and_a_takeover_after_a_crash() {
    let fake = FakeKube::new();
    fake.put(
        "v1",
        "namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    let a = campaign(&fake, "replica-a");
    let b = campaign(&fake, "replica-b");
    let first = one_leader(&[&a, &b], Duration::from_secs(5)).await;
    let names = ["replica-a", "replica-b"];
    assert_eq!(holder(&fake).as_deref(), Some(names[first]));
    // Leadership is stable while the leader renews (several lease periods).
    let stable_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < stable_until {
        assert_eq!(one_leader(&[&a, &b], Duration::from_secs(1)).await, first);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A clean stop releases the lease: the other takes over well before
    // the lease would have expired.
    let (leader, follower) = if first == 0 { (a, b) } else { (b, a) };
    let stopped = Instant::now();
    let _ = leader.stop.send(true);
    leader.task.await.expect("election task");
    assert!(
        !*leader.leader.borrow(),
        "a stopped candidate does not lead"
    );
    one_leader(&[&follower], Duration::from_secs(1)).await;
    assert!(
        stopped.elapsed() < Duration::from_millis(1500),
        "handover took {:?}",
        stopped.elapsed()
    );
    assert_eq!(holder(&fake).as_deref(), Some(names[1 - first]));

    // A crash (no release): a new candidate waits for the lease to expire.
    let c = campaign(&fake, "replica-c");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!*c.leader.borrow(), "the lease is held and renewed");
    follower.task.abort();
    let crashed = Instant::now();
    one_leader(&[&c], Duration::from_secs(5)).await;
    assert!(
        crashed.elapsed() >= Duration::from_millis(1500),
        "took over a live lease after {:?}",
        crashed.elapsed()
    );
    assert_eq!(holder(&fake).as_deref(), Some("replica-c"));
    let lease = fake
        .get(&Key::new(
            "coordination.k8s.io/v1",
            "leases",
            NS,
            "sless-operator",
        ))
        .expect("lease");
    assert_eq!(lease["spec"]["leaseTransitions"], 2, "{lease}");
    let _ = c.stop.send(true);
    let _ = c.task.await;
    fake_kube::rbac::assert_covered(&fake);
}
