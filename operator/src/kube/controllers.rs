//! Running the four controllers (function, trigger, job, service) as one
//! unit that can be started and stopped repeatedly: once at startup when
//! leader election is off, or each time this replica wins or loses the
//! leader Lease ([`super::leader`]).

use super::KubeOptions;
use super::function::Ctx;
use super::leader::{LeaderElection, LeaderOptions};
use kube::Client;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a stopping controller may take before it is left behind.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// One term of running controllers.
struct Term {
    stop: watch::Sender<bool>,
    handles: Vec<JoinHandle<()>>,
}

/// The controllers of one operator process.
pub struct Controllers {
    ctx: Arc<Ctx>,
    term: tokio::sync::Mutex<Option<Term>>,
    /// Whether this process runs the controllers now (for `/metrics`).
    leading: Mutex<bool>,
}

impl Controllers {
    /// Controllers over `client` (not started).
    pub fn new(client: Client, opts: KubeOptions) -> Controllers {
        Controllers {
            ctx: Arc::new(Ctx::new(client, opts)),
            term: tokio::sync::Mutex::new(None),
            leading: Mutex::new(false),
        }
    }

    /// The shared context (metrics survive terms).
    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    /// Whether the controllers run now.
    pub fn running(&self) -> bool {
        self.leading.lock().map(|l| *l).unwrap_or(false)
    }

    /// Starts the controllers unless they run already.
    pub async fn start(&self) {
        let mut term = self.term.lock().await;
        if term.is_some() {
            return;
        }
        let (stop, _) = watch::channel(false);
        let until = |tx: &watch::Sender<bool>| {
            let mut rx = tx.subscribe();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let ctx = &self.ctx;
        let handles = vec![
            tokio::spawn(super::function::run(ctx.clone(), until(&stop))),
            tokio::spawn(super::trigger::run(ctx.clone(), until(&stop))),
            tokio::spawn(super::job::run(ctx.clone(), until(&stop))),
            tokio::spawn(super::service::run(ctx.clone(), until(&stop))),
        ];
        *term = Some(Term { stop, handles });
        if let Ok(mut l) = self.leading.lock() {
            *l = true;
        }
        tracing::info!("controllers started");
    }

    /// Stops the controllers (if running) and waits for them, each for at
    /// most 10 s.
    pub async fn stop(&self) {
        let Some(term) = self.term.lock().await.take() else {
            return;
        };
        if let Ok(mut l) = self.leading.lock() {
            *l = false;
        }
        let _ = term.stop.send(true);
        for h in term.handles {
            if tokio::time::timeout(STOP_TIMEOUT, h).await.is_err() {
                tracing::warn!("a controller did not stop within {STOP_TIMEOUT:?}");
            }
        }
        tracing::info!("controllers stopped");
    }

    /// Campaigns for the leader Lease until `shutdown` fires, running the
    /// controllers exactly while this process holds it. Returns after the
    /// controllers stopped and the Lease was released.
    pub async fn lead(
        self: Arc<Self>,
        client: Client,
        opts: LeaderOptions,
        shutdown: watch::Receiver<bool>,
    ) {
        let election = Arc::new(LeaderElection::new(client, opts));
        tracing::info!(identity = %election.identity(), "campaigning for the leader lease");
        let (leader_tx, mut leader_rx) = watch::channel(false);
        let campaign = {
            let election = election.clone();
            tokio::spawn(async move { election.run(leader_tx, shutdown).await })
        };
        // Follows leadership until the campaign ends (its sender is dropped).
        while leader_rx.changed().await.is_ok() {
            let leading = *leader_rx.borrow_and_update();
            if leading {
                self.start().await;
            } else {
                self.stop().await;
            }
        }
        self.stop().await;
        let _ = campaign.await;
        // Only now may another replica take over.
        if let Err(e) = election.release().await {
            tracing::warn!(error = %e, "could not release the leader lease");
        }
    }

    /// `sless_controllers_running` for `/metrics`, then the reconcile series.
    pub fn render_metrics(&self) -> String {
        format!(
            "# HELP sless_controllers_running 1 while this replica runs the controllers (holds the leader lease).\n\
             # TYPE sless_controllers_running gauge\n\
             sless_controllers_running {}\n{}",
            u8::from(self.running()),
            self.ctx.metrics.render()
        )
    }
}
