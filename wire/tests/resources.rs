//! Validation of trigger, job and service requests: each rule names its field.

use sless_wire::*;

fn cron(schedule: &str) -> CreateTrigger {
    CreateTrigger {
        name: Some("tick".into()),
        function: Some("hello".into()),
        trigger_type: Some("cron".into()),
        schedule: Some(schedule.into()),
        ..Default::default()
    }
}

#[test]
fn trigger_rules_name_their_field() {
    let (name, spec) = cron("*/5 * * * *").validate().unwrap();
    assert_eq!(name, "tick");
    assert!(spec.enabled);
    assert_eq!(cron("*/61 * * *").validate().unwrap_err().field, "schedule");
    let mut t = cron("* * * * *");
    t.payload = Some("{not json".into());
    assert_eq!(t.validate().unwrap_err().field, "payload");
    let mut t = cron("* * * * *");
    t.trigger_type = Some("queue".into());
    assert_eq!(t.validate().unwrap_err().field, "type");
    let mut t = cron("* * * * *");
    t.trigger_type = Some("http".into());
    assert_eq!(t.validate().unwrap_err().field, "schedule");
    t.schedule = None;
    assert!(t.validate().is_ok());
    let mut t = cron("* * * * *");
    t.schedule = None;
    let err = t.validate().unwrap_err();
    assert!(err.missing && err.field == "schedule");
}

#[test]
fn trigger_json_uses_type_key() {
    let body = serde_json::json!({"name": "web", "function": "hello", "type": "http"});
    let t: CreateTrigger = serde_json::from_value(body).unwrap();
    let (_, spec) = t.validate().unwrap();
    assert_eq!(serde_json::to_value(&spec).unwrap()["type"], "http");
}

#[test]
fn trigger_update_keeps_and_checks() {
    let (_, spec) = cron("*/5 * * * *").validate().unwrap();
    let next = UpdateTrigger {
        enabled: Some(false),
        ..Default::default()
    }
    .apply_to(&spec)
    .unwrap();
    assert!(!next.enabled);
    assert_eq!(next.schedule.as_deref(), Some("*/5 * * * *"));
    let err = UpdateTrigger {
        schedule: Some("nope".into()),
        ..Default::default()
    }
    .apply_to(&spec)
    .unwrap_err();
    assert_eq!(err.field, "schedule");
}

#[test]
fn job_defaults_and_input_rules() {
    let job = CreateJob {
        name: Some("sum".into()),
        runtime: Some("python3.11".into()),
        entrypoint: Some("main.handler".into()),
        ..Default::default()
    };
    let (_, spec) = job.validate().unwrap();
    assert_eq!(spec.input, "null");
    assert_eq!(spec.run_id, 0);
    let mut bad = job.clone();
    bad.input = Some("{oops".into());
    assert_eq!(bad.validate().unwrap_err().field, "input");
    let next = UpdateJob {
        run_id: Some(2),
        ..Default::default()
    }
    .apply_to(&spec)
    .unwrap();
    assert_eq!(next.run_id, 2);
    assert_eq!(next.entrypoint, "main.handler");
}

#[test]
fn service_needs_entrypoint_or_command() {
    let svc = CreateService {
        name: Some("api".into()),
        runtime: Some("python3.11".into()),
        entrypoint: Some("app.py".into()),
        ..Default::default()
    };
    let (_, spec) = svc.validate().unwrap();
    assert_eq!(spec.health_path, "/");
    let mut none = svc.clone();
    none.entrypoint = None;
    assert_eq!(none.validate().unwrap_err().field, "entrypoint");
    let mut both = svc.clone();
    both.command = Some(vec!["python3".into()]);
    assert_eq!(both.validate().unwrap_err().field, "command");
    let mut escape = svc.clone();
    escape.entrypoint = Some("../app.py".into());
    assert_eq!(escape.validate().unwrap_err().field, "entrypoint");
    let mut health = svc.clone();
    health.health_path = Some("healthz".into());
    assert_eq!(health.validate().unwrap_err().field, "health_path");
    let next = UpdateService {
        memory_mb: Some(256),
        ..Default::default()
    }
    .apply_to(&spec)
    .unwrap();
    assert_eq!(next.memory_mb, 256);
    assert_eq!(next.entrypoint.as_deref(), Some("app.py"));
}
