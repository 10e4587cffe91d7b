//! Scale to zero on the Kubernetes backend, the decision part: how many
//! replicas a function's Deployment should have, from its spec and the two
//! activity annotations on its Function resource. No I/O; the Function
//! controller applies the answer, the invoke proxy ([`super::activity`]) and
//! the trigger controller (cron runs) write the annotations.
//!
//! - [`LAST_REQUEST`]: RFC 3339 time of the newest request an operator
//!   replica proxied to the function (throttled, see [`ACTIVITY_THROTTLE`]).
//! - [`KEEP_UNTIL`]: RFC 3339 time until which the function must run
//!   whatever its activity: the trigger controller sets it before a cron run
//!   ([`cron_warm`]).
//!
//! A function with `min_instances = 1` always has one replica. Otherwise it
//! has one while it was active within `idle_timeout_sec` (at least
//! [`MIN_IDLE`]) or `KEEP_UNTIL` lies ahead, and none after. Activity is the
//! newer of the last request and the time the function became Ready (so a
//! function that was never called still gets its idle period after a
//! rollout). Times from a clock ahead of this one count as now when at most
//! [`MAX_SKEW`] ahead and are ignored beyond (like unreadable values).

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// Annotation on a Function: RFC 3339 time of the last proxied request.
pub const LAST_REQUEST: &str = "sless.kube5s.ru/last-request";
/// Annotation on a Function: RFC 3339 time until which it must run (cron).
pub const KEEP_UNTIL: &str = "sless.kube5s.ru/keep-until";
/// An operator replica writes [`LAST_REQUEST`] of one function at most
/// once per this interval (a busy function costs one patch per interval per
/// replica); requests in flight refresh it at this interval, and the end of
/// a request is written at most this much later.
pub const ACTIVITY_THROTTLE: Duration = Duration::from_secs(5);
/// The shortest idle timeout applied: three throttle intervals, so that a
/// request in flight (refreshed every [`ACTIVITY_THROTTLE`]) is never
/// scaled down under, even with a slow patch or watch. Shorter
/// `idle_timeout_sec` values count as this.
pub const MIN_IDLE: Duration = Duration::from_secs(15);
/// A recorded time at most this far ahead of the controller's clock counts
/// as now (another replica's clock); further ahead it is ignored.
pub const MAX_SKEW: Duration = Duration::from_secs(60);
/// A [`KEEP_UNTIL`] further ahead than this is ignored (no cron run needs
/// it: the lead plus the longest timeout are far below).
pub const MAX_KEEP: Duration = Duration::from_secs(3600);
/// How long before a cron run its function (at zero) is woken: the cold
/// start (pod scheduling, image pull, runtime start) must fit in it.
pub const CRON_WARM_LEAD: Duration = Duration::from_secs(120);
/// How long after a cron run's scheduled time its function is kept beyond
/// its `timeout_sec` (the call's own start-up and network time).
pub const CRON_GRACE: Duration = Duration::from_secs(60);

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

fn unsigned(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(signed(d)).unwrap_or(Timestamp::MAX)
}

/// A recorded activity time read with the skew rule: a time at most
/// [`MAX_SKEW`] ahead of `now` is `now`, a later one (or an unreadable
/// value) is `None`.
pub fn activity_time(value: Option<&str>, now: Timestamp) -> Option<Timestamp> {
    let t: Timestamp = value?.trim().parse().ok()?;
    if t <= now {
        Some(t)
    } else if t <= plus(now, MAX_SKEW) {
        Some(now)
    } else {
        None
    }
}

/// The function's last activity: the newer of [`LAST_REQUEST`] and
/// `ready_since` (when the function became Ready), both read with
/// [`activity_time`].
pub fn last_activity(
    annotations: Option<&BTreeMap<String, String>>,
    ready_since: Option<Timestamp>,
    now: Timestamp,
) -> Option<Timestamp> {
    let requested = activity_time(
        annotations
            .and_then(|a| a.get(LAST_REQUEST))
            .map(String::as_str),
        now,
    );
    let ready = ready_since.and_then(|t| activity_time(Some(&t.to_string()), now));
    requested.max(ready)
}

/// [`KEEP_UNTIL`], unless unreadable or more than [`MAX_KEEP`] ahead.
pub fn keep_until(
    annotations: Option<&BTreeMap<String, String>>,
    now: Timestamp,
) -> Option<Timestamp> {
    let t: Timestamp = annotations?.get(KEEP_UNTIL)?.trim().parse().ok()?;
    (t <= plus(now, MAX_KEEP)).then_some(t)
}

/// The replicas a Ready function's Deployment should have (0 or 1), and
/// when to look again: at the moment it becomes idle (`None`: no change is
/// due by itself).
///
/// `min_instances >= 1` → 1. Otherwise 1 until `last_activity` plus the
/// idle timeout (`idle_timeout_sec`, at least [`MIN_IDLE`]) or `keep_until`,
/// whichever is later, and 0 from that instant on (exactly at the boundary
/// it is idle). No known activity (`None`) keeps 1: a function is only
/// scaled down once it is known to have been idle.
pub fn desired_replicas(
    min_instances: u32,
    idle_timeout_sec: u32,
    last_activity: Option<Timestamp>,
    keep_until: Option<Timestamp>,
    now: Timestamp,
) -> (i32, Option<Duration>) {
    if min_instances >= 1 {
        return (1, None);
    }
    let Some(last) = last_activity else {
        return (1, None);
    };
    let idle = Duration::from_secs(u64::from(idle_timeout_sec)).max(MIN_IDLE);
    let until = plus(last, idle).max(keep_until.unwrap_or(Timestamp::MIN));
    if now < until {
        (1, Some(unsigned(until.duration_since(now))))
    } else {
        (0, None)
    }
}

/// What the trigger controller does for a cron run at `next_run` of a
/// function that scales to zero, at `now`: within [`CRON_WARM_LEAD`] of the
/// run, keep the function running until the run's end (`Some(keep_until)`:
/// `next_run` + `timeout_sec` + [`CRON_GRACE`]); earlier, look again when
/// the lead starts (`Some(requeue)`). `(None, None)` without a next run.
pub fn cron_warm(
    next_run: Option<Timestamp>,
    now: Timestamp,
    timeout_sec: u32,
) -> (Option<Timestamp>, Option<Duration>) {
    let Some(next) = next_run else {
        return (None, None);
    };
    let lead_starts = next
        .checked_sub(signed(CRON_WARM_LEAD))
        .unwrap_or(Timestamp::MIN);
    if now >= lead_starts {
        let run = Duration::from_secs(u64::from(timeout_sec)) + CRON_GRACE;
        (Some(plus(next, run)), None)
    } else {
        (None, Some(unsigned(lead_starts.duration_since(now))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const NOW: &str = "2026-12-03T12:00:00Z";

    /// What, min_instances, idle_timeout_sec, last activity, keep-until →
    /// (replicas, requeue).
    type Case = (
        &'static str,
        u32,
        u32,
        Option<&'static str>,
        Option<&'static str>,
        (i32, Option<Duration>),
    );

    fn ann(k: &str, v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn desired_replicas_table() {
        let now = t(NOW);
        let secs = |n: u64| Some(Duration::from_secs(n));
        // (min, idle, last activity, keep until) → (replicas, requeue)
        let cases: Vec<Case> = vec![
            (
                "always on",
                1,
                300,
                Some("2026-12-01T00:00:00Z"),
                None,
                (1, None),
            ),
            ("always on, never used", 1, 300, None, None, (1, None)),
            ("no known activity", 0, 300, None, None, (1, None)),
            (
                "active 10 s ago",
                0,
                300,
                Some("2026-12-03T11:59:50Z"),
                None,
                (1, secs(290)),
            ),
            (
                "1 s before the boundary",
                0,
                300,
                Some("2026-12-03T11:55:01Z"),
                None,
                (1, secs(1)),
            ),
            (
                "exactly at the boundary",
                0,
                300,
                Some("2026-12-03T11:55:00Z"),
                None,
                (0, None),
            ),
            (
                "past the boundary",
                0,
                300,
                Some("2026-12-03T11:00:00Z"),
                None,
                (0, None),
            ),
            (
                "idle 1 s counts as 15 s",
                0,
                1,
                Some("2026-12-03T11:59:50Z"),
                None,
                (1, secs(5)),
            ),
            (
                "idle 1 s, 15 s later",
                0,
                1,
                Some("2026-12-03T11:59:45Z"),
                None,
                (0, None),
            ),
            (
                "kept for a cron run",
                0,
                300,
                Some("2026-12-03T11:00:00Z"),
                Some("2026-12-03T12:01:00Z"),
                (1, secs(60)),
            ),
            (
                "keep-until passed",
                0,
                300,
                Some("2026-12-03T11:00:00Z"),
                Some("2026-12-03T11:59:00Z"),
                (0, None),
            ),
            (
                "activity outlasts keep-until",
                0,
                300,
                Some("2026-12-03T11:59:00Z"),
                Some("2026-12-03T12:01:00Z"),
                (1, secs(240)),
            ),
            (
                "keep-until alone",
                0,
                300,
                None,
                Some("2026-12-03T12:01:00Z"),
                (1, None),
            ),
            (
                "a day of idle timeout",
                0,
                86400,
                Some("2026-12-02T12:00:01Z"),
                None,
                (1, secs(1)),
            ),
        ];
        for (what, min, idle, last, keep, want) in cases {
            let got = desired_replicas(min, idle, last.map(t), keep.map(t), now);
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn skewed_and_unreadable_times() {
        let now = t(NOW);
        assert_eq!(
            activity_time(Some("2026-12-03T11:00:00Z"), now),
            Some(t("2026-12-03T11:00:00Z"))
        );
        // Another replica's clock 30 s ahead: counts as now, not as the future.
        assert_eq!(activity_time(Some("2026-12-03T12:00:30Z"), now), Some(now));
        assert_eq!(
            activity_time(Some("2026-12-03T12:01:00Z"), now),
            Some(now),
            "at the skew bound"
        );
        // Far in the future (a hand edit): ignored rather than "active forever".
        assert_eq!(activity_time(Some("2027-01-01T00:00:00Z"), now), None);
        for bad in ["", "yesterday", "2026-13-01T00:00:00Z", "1733227200"] {
            assert_eq!(activity_time(Some(bad), now), None, "{bad:?}");
        }
        assert_eq!(activity_time(None, now), None);
        // With offsets and fractions, as other writers may format it.
        assert_eq!(
            activity_time(Some("2026-12-03T13:59:00.5+02:00"), now),
            Some(t("2026-12-03T11:59:00.5Z"))
        );
    }

    #[test]
    fn last_activity_is_the_newer_of_request_and_readiness() {
        let now = t(NOW);
        let ready = Some(t("2026-12-03T11:58:00Z"));
        let a = ann(LAST_REQUEST, "2026-12-03T11:59:00Z");
        assert_eq!(
            last_activity(Some(&a), ready, now),
            Some(t("2026-12-03T11:59:00Z"))
        );
        let a = ann(LAST_REQUEST, "2026-12-03T10:00:00Z");
        assert_eq!(
            last_activity(Some(&a), ready, now),
            ready,
            "rolled out after the last request"
        );
        let a = ann(LAST_REQUEST, "garbage");
        assert_eq!(
            last_activity(Some(&a), ready, now),
            ready,
            "unreadable: since Ready"
        );
        assert_eq!(
            last_activity(None, ready, now),
            ready,
            "never called: since Ready"
        );
        assert_eq!(last_activity(None, None, now), None);
        // An unreadable annotation on an idle function scales it down once
        // it has been Ready for the idle timeout, rather than never.
        let a = ann(LAST_REQUEST, "garbage");
        let last = last_activity(Some(&a), Some(t("2026-12-03T11:00:00Z")), now);
        assert_eq!(desired_replicas(0, 300, last, None, now), (0, None));
    }

    #[test]
    fn keep_until_is_bounded() {
        let now = t(NOW);
        let k = ann(KEEP_UNTIL, "2026-12-03T12:30:00Z");
        assert_eq!(keep_until(Some(&k), now), Some(t("2026-12-03T12:30:00Z")));
        let k = ann(KEEP_UNTIL, "2026-12-04T12:30:00Z");
        assert_eq!(keep_until(Some(&k), now), None, "more than an hour ahead");
        let k = ann(KEEP_UNTIL, "soon");
        assert_eq!(keep_until(Some(&k), now), None);
        assert_eq!(keep_until(None, now), None);
    }

    #[test]
    fn cron_runs_are_warmed_ahead() {
        let now = t(NOW);
        // Far ahead: look again when the lead starts.
        assert_eq!(
            cron_warm(Some(t("2026-12-03T13:00:00Z")), now, 30),
            (None, Some(Duration::from_secs(3600 - 120)))
        );
        // Within the lead (and at its start): keep it through the run.
        assert_eq!(
            cron_warm(Some(t("2026-12-03T12:01:00Z")), now, 30),
            (Some(t("2026-12-03T12:02:30Z")), None)
        );
        assert_eq!(
            cron_warm(Some(t("2026-12-03T12:02:00Z")), now, 900),
            (Some(t("2026-12-03T12:18:00Z")), None)
        );
        assert_eq!(cron_warm(None, now, 30), (None, None));
    }
}
