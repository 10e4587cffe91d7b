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

/// `phase P (message)`, or `phase P` without a message.
fn describe(phase: Phase, message: Option<&str>) -> String {
    match message {
        Some(m) if !m.is_empty() => format!("phase {} ({m})", phase.as_str()),
        _ => format!("phase {}", phase.as_str()),
    }
}

/// Where something that becomes Ready (a function, a service) stands.
#[derive(Debug, Clone, Copy)]
pub struct Readiness<'a> {
    /// Its lifecycle phase.
    pub phase: Phase,
    /// The operator's message about the phase.
    pub message: Option<&'a str>,
    /// sha256 of the code it runs.
    pub code_sha256: Option<&'a str>,
}

/// Classifies one look at `t`, which must become Ready running the code
/// `want_sha256` (any code when `None`); `status` reads where it stands.
/// Ready or Failed while still on other code is not the end of the wait.
pub fn ready_look<T>(
    t: T,
    want_sha256: Option<&str>,
    status: impl Fn(&T) -> Readiness<'_>,
) -> Look<T> {
    let Readiness {
        phase,
        message,
        code_sha256,
    } = status(&t);
    let code_matches = match (want_sha256, code_sha256) {
        (Some(want), Some(have)) => want == have,
        (Some(_), None) => false,
        (None, _) => true,
    };
    match phase {
        Phase::Ready if code_matches => Look::Done(t),
        Phase::Failed if code_matches => {
            let why = message.unwrap_or_default().to_string();
            Look::Failed(t, why)
        }
        _ => {
            let seen = describe(phase, message);
            Look::Waiting(t, seen)
        }
    }
}

fn function_readiness(f: &Function) -> Readiness<'_> {
    Readiness {
        phase: f.status.phase,
        message: f.status.message.as_deref(),
        code_sha256: f.status.code_sha256.as_deref(),
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
    let look = || async move {
        let f = client.get::<Function>(ns, name).await?;
        Ok(f.map(|f| {
            let look = ready_look(f, code_sha256, function_readiness);
            if let Look::Waiting(f, _) = &look {
                tracing::debug!(function = name, phase = f.status.phase.as_str(), "waiting");
            }
            look
        }))
    };
    match poll(timeout, look).await? {
        Outcome::Done(f) => Ok(f),
        Outcome::Failed(f, _) => Err(WaitError::Failed {
            name: name.to_string(),
            message: f.status.message.clone(),
            function: Box::new(f),
        }),
        Outcome::Gone => Err(WaitError::Gone {
            name: name.to_string(),
        }),
        Outcome::TimedOut {
            waited_sec,
            last_seen,
            last,
        } => Err(WaitError::Timeout {
            name: name.to_string(),
            target: "Ready",
            waited_sec,
            last_seen,
            function: last.map(Box::new),
        }),
    }
}

/// Waits until the operator answers 404 for the function.
pub async fn until_gone(
    client: &Client,
    ns: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    let look = || async move {
        let f = client.get::<Function>(ns, name).await?;
        Ok(f.map(|f| {
            let seen = describe(f.status.phase, f.status.message.as_deref());
            Look::Waiting(f, seen)
        }))
    };
    match poll(timeout, look).await? {
        Outcome::TimedOut {
            waited_sec,
            last_seen,
            last,
        } => Err(WaitError::Timeout {
            name: name.to_string(),
            target: "deleted",
            waited_sec,
            last_seen,
            function: last.map(Box::new),
        }),
        _ => Ok(()),
    }
}

/// What one look at a resource being waited for says.
#[derive(Debug, Clone, PartialEq)]
pub enum Look<T> {
    /// The wait is over: the resource is where it should be.
    Done(T),
    /// The resource reached a state it will not leave by itself; the reason.
    Failed(T, String),
    /// Not there yet; a short description of what was seen.
    Waiting(T, String),
}

/// How a [`poll`] ended (a client error ends it as `Err`).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// [`Look::Done`] was seen.
    Done(T),
    /// [`Look::Failed`] was seen, with its reason.
    Failed(T, String),
    /// The resource answered 404.
    Gone,
    /// The timeout passed first.
    TimedOut {
        /// Seconds waited.
        waited_sec: u64,
        /// What was last seen ("not read yet" when nothing was).
        last_seen: String,
        /// The resource as last read.
        last: Option<T>,
    },
}

/// Calls `look` (a GET of the resource, `None` on 404, classified) with a
/// growing delay until it is done, failed, gone, or `timeout` passed.
pub async fn poll<T, F, Fut>(timeout: Duration, mut look: F) -> Result<Outcome<T>, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<Look<T>>, ClientError>>,
{
    let start = Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        let (last, seen) = match look().await? {
            None => return Ok(Outcome::Gone),
            Some(Look::Done(t)) => return Ok(Outcome::Done(t)),
            Some(Look::Failed(t, why)) => return Ok(Outcome::Failed(t, why)),
            Some(Look::Waiting(t, seen)) => (t, seen),
        };
        if start.elapsed() >= timeout {
            return Ok(Outcome::TimedOut {
                waited_sec: start.elapsed().as_secs(),
                last_seen: seen,
                last: Some(last),
            });
        }
        tokio::time::sleep(delay.min(timeout.saturating_sub(start.elapsed()))).await;
        delay = next_delay(delay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn poll_stops_at_done_and_reports_the_last_look_on_timeout() {
        let mut n = 0;
        let out = poll(Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move {
                Ok(Some(if n < 3 {
                    Look::Waiting(n, format!("look {n}"))
                } else {
                    Look::Done(n)
                }))
            }
        })
        .await
        .unwrap();
        assert_eq!(out, Outcome::Done(3));
        let out = poll(Duration::from_millis(300), || async {
            Ok(Some(Look::Waiting(1, "phase Building".to_string())))
        })
        .await
        .unwrap();
        match out {
            Outcome::TimedOut {
                last_seen, last, ..
            } => {
                assert_eq!(last_seen, "phase Building");
                assert_eq!(last, Some(1));
            }
            other => panic!("{other:?}"),
        }
        let out: Outcome<()> = poll(Duration::from_secs(1), || async { Ok(None) })
            .await
            .unwrap();
        assert_eq!(out, Outcome::Gone);
    }
}
