//! Generated-input harnesses (bolero) for the rules that judge outside input:
//! cron schedules and the create requests of every resource.
//!
//! Under `cargo test` each harness replays its corpus
//! (`tests/__fuzz__/<harness>/corpus`) and then runs random inputs for a few
//! seconds (`BOLERO_RANDOM_TEST_TIME_MS` sets another budget); under
//! `cargo bolero test` the same harness is driven by libFuzzer. See
//! docs/reliability.md.
//!
//! Properties, beyond "no panic":
//! - a refused input is refused with a [`FieldError`] naming a field of that
//!   request (or `env_vars.<KEY>`) and a message;
//! - an accepted input gives a spec within the limits, and the spec sent back
//!   as a request validates to the same spec;
//! - an accepted cron schedule's next run is computed in bounded time, and is
//!   after the start time.

use bolero::check;
use serde_json::{Map, Value, json};
use sless_wire::limits::*;
use sless_wire::*;
use std::time::Duration;

mod fuzz_support;
use fuzz_support::{TEST_TIME, Tally};

/// Pieces cron schedules are made of: valid fields, edge numbers, names,
/// nicknames and the punctuation of the syntax.
const CRON_TOKENS: &[&str] = &[
    "*",
    "*/5",
    "*/0",
    "0/0",
    "0",
    "1",
    "5",
    "7",
    "12",
    "23",
    "24",
    "29",
    "30",
    "31",
    "32",
    "59",
    "60",
    "61",
    "99999999999999999999",
    "-1",
    "1-5",
    "5-1",
    "1-",
    "-",
    "/",
    ",",
    "1,2,3",
    "?",
    "L",
    "W",
    "15W",
    "LW",
    "5L",
    "5#2",
    "5#6",
    "#",
    "MON",
    "mon",
    "SUN-SAT",
    "JAN",
    "FEB",
    "DEC",
    "JAN-DEC",
    "@hourly",
    "@daily",
    "@weekly",
    "@monthly",
    "@yearly",
    "@annually",
    "@reboot",
    "@",
    "é",
    "\t",
    " ",
    "",
    "\u{0}",
];

/// A schedule from token indices (one byte each) and field separators.
fn cron_text(tokens: &[u8], separators: &[u8]) -> String {
    let mut s = String::new();
    for (i, t) in tokens.iter().take(9).enumerate() {
        if i > 0 {
            s.push_str(match separators.get(i).map(|b| b % 8) {
                Some(0) => "",
                Some(1) => "  ",
                Some(2) => "\t",
                _ => " ",
            });
        }
        s.push_str(CRON_TOKENS[*t as usize % CRON_TOKENS.len()]);
    }
    s
}

/// Checks one schedule; whether it was accepted.
fn check_schedule(schedule: &str) -> bool {
    match validate::cron_schedule("schedule", schedule) {
        Err(e) => {
            assert_eq!(e.field, "schedule", "{schedule:?}: {e}");
            assert!(!e.message.is_empty(), "{schedule:?}");
            false
        }
        Ok(cron) => {
            let start = chrono::DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z")
                .expect("a fixed instant")
                .with_timezone(&chrono::Utc);
            // On a thread, so a search that never ends is a failure with
            // its input (libFuzzer saves it) instead of a silent hang. The
            // bound is generous (a search takes microseconds) so a loaded
            // machine cannot fail it; it is a hang detector, not a benchmark.
            let (tx, rx) = std::sync::mpsc::channel();
            let searched = cron.clone();
            std::thread::spawn(move || {
                let _ = tx.send(searched.find_next_occurrence(&start, false));
            });
            let next = rx
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("{schedule:?}: no next run after 5 s of searching"));
            if let Ok(next) = next {
                assert!(
                    next > start,
                    "{schedule:?}: next run {next} is not after {start}"
                );
            }
            // The trigger request with this schedule is accepted too.
            let t = CreateTrigger {
                name: Some("tick".into()),
                function: Some("hello".into()),
                trigger_type: Some("cron".into()),
                schedule: Some(schedule.to_string()),
                ..Default::default()
            };
            let (_, spec) = t.validate().unwrap_or_else(|e| panic!("{schedule:?}: {e}"));
            assert_eq!(spec.schedule.as_deref(), Some(schedule));
            true
        }
    }
}

#[test]
fn cron_schedules_from_tokens() {
    let tally = Tally::new("cron_schedules_from_tokens");
    check!()
        .with_type::<(Vec<u8>, Vec<u8>)>()
        .with_test_time(TEST_TIME)
        .for_each(|(tokens, separators)| {
            tally.count(check_schedule(&cron_text(tokens, separators)))
        });
}

#[test]
fn cron_schedules_from_bytes() {
    let tally = Tally::new("cron_schedules_from_bytes");
    check!()
        .with_test_time(TEST_TIME)
        .for_each(|bytes| tally.count(check_schedule(&String::from_utf8_lossy(bytes))));
}

/// Values a field of a request may be sent: right and wrong types, limits
/// and one past them, names that are and are not DNS labels.
fn field_value(pick: u8, n: u8) -> Value {
    let long = "a".repeat(64);
    let strings: [&str; 25] = [
        "hello",
        "a",
        "",
        "-a",
        "a-",
        "A",
        "a_b",
        &long,
        "python3.11",
        "nodejs20",
        "python2",
        "main.handler",
        "index.handler",
        "main",
        ".handler",
        "main.",
        "../x.handler",
        "run.py",
        "/abs.py",
        "http",
        "cron",
        "*/5 * * * *",
        "app.py",
        "{\"n\": 1}",
        "/healthz",
    ];
    let numbers: [i64; 16] = [
        0,
        1,
        -1,
        63,
        64,
        128,
        4096,
        4097,
        900,
        901,
        86_400,
        86_401,
        i64::MAX,
        i64::MIN,
        u32::MAX as i64 + 1,
        2,
    ];
    match pick % 10 {
        0..=2 => json!(strings[n as usize % strings.len()]),
        3 | 4 => json!(numbers[n as usize % numbers.len()]),
        5 => Value::Null,
        6 => json!(n.is_multiple_of(2)),
        7 => json!(1.5),
        8 => {
            let keys = ["FOO", "", "SLESS_X", "1A", "A=B", "a b", "Ü", "LONG"];
            let mut m = Map::new();
            for i in 0..(n % 4) {
                let k = keys[(n as usize + i as usize) % keys.len()];
                let v = if i % 2 == 0 {
                    json!("v")
                } else {
                    json!("nul\u{0}")
                };
                m.insert(k.to_string(), v);
            }
            Value::Object(m)
        }
        _ => json!([n]),
    }
}

/// A JSON object with some of `fields` (and sometimes an unknown one). Three
/// times in four it starts from `base`, a valid request, with at most two
/// fields changed, so that accepted requests are generated too; otherwise it
/// is made of up to twelve picks.
fn request(base: &Value, fields: &[&str], picks: &[(u8, u8, u8)]) -> Value {
    let (mut m, most) = match (base, picks.len() % 4) {
        (Value::Object(b), 1..) => (b.clone(), 2),
        _ => (Map::new(), 12),
    };
    for (f, pick, n) in picks.iter().take(most) {
        let name = if (*f as usize) < fields.len() * 4 {
            fields[*f as usize % fields.len()]
        } else {
            "unknown_field"
        };
        m.insert(name.to_string(), field_value(*pick, *n));
    }
    Value::Object(m)
}

/// `e` names one of `fields`, or an entry of one (`env_vars.FOO`, `command[0]`).
fn assert_names_a_field(kind: &str, body: &Value, fields: &[&str], e: &FieldError) {
    let ok = fields.iter().any(|f| {
        e.field == *f
            || e.field
                .strip_prefix(f)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    });
    assert!(
        ok,
        "{kind} {body}: the error names {:?}, not a field of the request: {e}",
        e.field
    );
    assert!(!e.message.is_empty(), "{kind} {body}: empty message");
}

fn within(v: u32, min: u32, max: u32) -> bool {
    (min..=max).contains(&v)
}

const FUNCTION_FIELDS: &[&str] = &[
    "name",
    "runtime",
    "entrypoint",
    "env_vars",
    "memory_mb",
    "timeout_sec",
    "min_instances",
    "idle_timeout_sec",
];

#[test]
fn create_function_requests() {
    let tally = Tally::new("create_function_requests");
    check!()
        .with_type::<Vec<(u8, u8, u8)>>()
        .with_test_time(TEST_TIME)
        .for_each(|picks| {
            let body = request(
                &json!({"name": "hello", "runtime": "python3.11", "entrypoint": "main.handler"}),
                FUNCTION_FIELDS,
                picks,
            );
            let Ok(req) = serde_json::from_value::<CreateFunction>(body.clone()) else {
                tally.count(false);
                return; // a type error: the operator's JSON extractor names the field
            };
            let validated = req.validate();
            tally.count(validated.is_ok());
            match validated {
                Err(e) => assert_names_a_field("function", &body, FUNCTION_FIELDS, &e),
                Ok((name, spec)) => {
                    assert!(validate::name("name", &name).is_ok(), "{body}");
                    assert!(
                        within(spec.memory_mb, MEMORY_MB_MIN, MEMORY_MB_MAX),
                        "{body}"
                    );
                    assert!(
                        within(spec.timeout_sec, TIMEOUT_SEC_MIN, TIMEOUT_SEC_MAX),
                        "{body}"
                    );
                    assert!(spec.min_instances <= MIN_INSTANCES_MAX, "{body}");
                    assert!(
                        within(
                            spec.idle_timeout_sec,
                            IDLE_TIMEOUT_SEC_MIN,
                            IDLE_TIMEOUT_SEC_MAX
                        ),
                        "{body}"
                    );
                    assert!(spec.env_vars.len() <= ENV_VARS_MAX, "{body}");
                    let again = CreateFunction {
                        name: Some(name.clone()),
                        runtime: Some(spec.runtime.to_string()),
                        entrypoint: Some(spec.entrypoint.clone()),
                        env_vars: spec.env_vars.clone(),
                        secret_env_vars: sless_wire::SecretValues(
                            spec.secret_env_vars.values.clone().unwrap_or_default(),
                        ),
                        memory_mb: Some(spec.memory_mb.into()),
                        timeout_sec: Some(spec.timeout_sec.into()),
                        min_instances: Some(spec.min_instances.into()),
                        idle_timeout_sec: Some(spec.idle_timeout_sec.into()),
                    };
                    let (name2, spec2) = again
                        .validate()
                        .unwrap_or_else(|e| panic!("{body}: its own spec is refused: {e}"));
                    assert_eq!((name2, spec2), (name, spec), "{body}");
                }
            }
        });
}

const TRIGGER_FIELDS: &[&str] = &["name", "function", "type", "schedule", "payload", "enabled"];

#[test]
fn create_trigger_requests() {
    let tally = Tally::new("create_trigger_requests");
    check!()
        .with_type::<Vec<(u8, u8, u8)>>()
        .with_test_time(TEST_TIME)
        .for_each(|picks| {
            let body = request(&json!({"name": "tick", "function": "hello", "type": "cron", "schedule": "*/5 * * * *"}), TRIGGER_FIELDS, picks);
            let Ok(req) = serde_json::from_value::<CreateTrigger>(body.clone()) else {
                tally.count(false);
                return;
            };
            let validated = req.validate();
            tally.count(validated.is_ok());
            match validated {
                Err(e) => assert_names_a_field("trigger", &body, TRIGGER_FIELDS, &e),
                Ok((name, spec)) => {
                    assert!(validate::name("name", &name).is_ok(), "{body}");
                    assert!(validate::name("function", &spec.function).is_ok(), "{body}");
                    match spec.trigger_type {
                        trigger::TriggerType::Cron => {
                            let s = spec.schedule.as_deref().expect("a cron trigger's schedule");
                            assert!(validate::cron_schedule("schedule", s).is_ok(), "{body}");
                        }
                        trigger::TriggerType::Http => {
                            assert!(spec.schedule.is_none() && spec.payload.is_none(), "{body}")
                        }
                    }
                }
            }
        });
}

const JOB_FIELDS: &[&str] = &[
    "name",
    "runtime",
    "entrypoint",
    "env_vars",
    "memory_mb",
    "timeout_sec",
    "input",
    "run_id",
];

/// A job or service request built from `picks` on `base`: whether it was
/// accepted; a refused one must name one of `fields`.
fn check_request<T: serde::de::DeserializeOwned>(
    kind: &str,
    base: &Value,
    fields: &[&str],
    picks: &[(u8, u8, u8)],
    validate: impl Fn(&T) -> Result<(), FieldError>,
) -> bool {
    let body = request(base, fields, picks);
    let Ok(req) = serde_json::from_value::<T>(body.clone()) else {
        return false;
    };
    match validate(&req) {
        Ok(()) => true,
        Err(e) => {
            assert_names_a_field(kind, &body, fields, &e);
            false
        }
    }
}

#[test]
fn create_job_requests() {
    let tally = Tally::new("create_job_requests");
    let base = json!({"name": "nightly", "runtime": "python3.11", "entrypoint": "main.handler"});
    check!()
        .with_type::<Vec<(u8, u8, u8)>>()
        .with_test_time(TEST_TIME)
        .for_each(|picks| {
            tally.count(check_request(
                "job",
                &base,
                JOB_FIELDS,
                picks,
                |r: &CreateJob| r.validate().map(drop),
            ))
        });
}

const SERVICE_FIELDS: &[&str] = &[
    "name",
    "runtime",
    "entrypoint",
    "command",
    "env_vars",
    "memory_mb",
    "timeout_sec",
    "health_path",
];

#[test]
fn create_service_requests() {
    let tally = Tally::new("create_service_requests");
    let base = json!({"name": "web", "runtime": "python3.11", "entrypoint": "app.py"});
    check!()
        .with_type::<Vec<(u8, u8, u8)>>()
        .with_test_time(TEST_TIME)
        .for_each(|picks| {
            tally.count(check_request(
                "service",
                &base,
                SERVICE_FIELDS,
                picks,
                |r: &CreateService| r.validate().map(drop),
            ))
        });
}
