//! Polling the operator until a function settles (Ready or Failed) or is gone,
//! within a timeout, remembering what was last seen so a give-up says why.

use crate::client::{Client, ClientError};
use sless_wire::{Function, Phase};
use std::time::{Duration, Instant};

/// Why a wait ended without success.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// The function reached phase Failed.
    #[error("function {name} failed (phase Failed): {}", message.as_deref().unwrap_or("no message"))]
    Failed {
        /// Function name.
        name: String,
        /// The operator's message.
        message: Option<String>,
        /// The function as last read.
        function: Box<Function>,
    },
    /// The timeout passed first.
    #[error(
        "gave up after {waited_sec} s waiting for function {name} to become {target}; last seen: {last_seen}. Raise `wait_timeout_sec` (on the resource or the provider) if the build is just slow"
    )]
    Timeout {
        /// Function name.
        name: String,
        /// What the wait was for (`Ready`, `deleted`).
        target: &'static str,
        /// Seconds waited.
        waited_sec: u64,
        /// The last phase and message seen.
        last_seen: String,
        /// The function as last read, if it was read at all.
        function: Option<Box<Function>>,
    },
    /// The function disappeared while waiting for it to become Ready.
    #[error("function {name} was deleted while waiting for it to become Ready")]
    Gone {
        /// Function name.
        name: String,
    },
    /// The operator could not be asked.
    #[error(transparent)]
    Client(#[from] ClientError),
}

fn describe(f: &Function) -> String {
    match &f.status.message {
        Some(m) if !m.is_empty() => format!("phase {} ({m})", f.status.phase.as_str()),
        _ => format!("phase {}", f.status.phase.as_str()),
    }
}

fn next_delay(d: Duration) -> Duration {
    (d * 3 / 2).min(Duration::from_secs(2))
}

/// Waits until the function is Ready (and, when `code_sha256` is given, runs
/// that code), or fails with the reason.
pub async fn until_ready(
    client: &Client,
    ns: &str,
    name: &str,
    code_sha256: Option<&str>,
    timeout: Duration,
) -> Result<Function, WaitError> {
    let start = Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        let f = match client.get_function(ns, name).await? {
            None => {
                return Err(WaitError::Gone {
                    name: name.to_string(),
                });
            }
            Some(f) => f,
        };
        let code_matches = match (code_sha256, f.status.code_sha256.as_deref()) {
            (Some(want), Some(have)) => want == have,
            (Some(_), None) => false,
            (None, _) => true,
        };
        match f.status.phase {
            Phase::Ready if code_matches => return Ok(f),
            Phase::Failed if code_matches => {
                return Err(WaitError::Failed {
                    name: name.to_string(),
                    message: f.status.message.clone(),
                    function: Box::new(f),
                });
            }
            _ => {}
        }
        tracing::debug!(function = name, phase = f.status.phase.as_str(), "waiting");
        if start.elapsed() >= timeout {
            return Err(WaitError::Timeout {
                name: name.to_string(),
                target: "Ready",
                waited_sec: start.elapsed().as_secs(),
                last_seen: describe(&f),
                function: Some(Box::new(f)),
            });
        }
        tokio::time::sleep(delay.min(timeout.saturating_sub(start.elapsed()))).await;
        delay = next_delay(delay);
    }
}

/// Waits until the operator answers 404 for the function.
pub async fn until_gone(
    client: &Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let start = Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        let last = match client.get_function(ns, name).await? {
            None => return Ok(()),
            Some(f) => f,
        };
        if start.elapsed() >= timeout {
            return Err(WaitError::Timeout {
                name: name.to_string(),
                target: "deleted",
                waited_sec: start.elapsed().as_secs(),
                last_seen: describe(&last),
                function: Some(Box::new(last)),
            });
        }
        tokio::time::sleep(delay.min(timeout.saturating_sub(start.elapsed()))).await;
        delay = next_delay(delay);
    }
}
