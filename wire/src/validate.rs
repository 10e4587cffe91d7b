//! Validation rules shared by the operator (400 answers) and the provider
//! (plan-time diagnostics). Each rule returns a [`FieldError`] that names the
//! field and the rule it broke.

use crate::limits::*;
use crate::runtime::{Language, Runtime};
use std::collections::BTreeMap;
use std::fmt;

/// A field that broke a rule: which field, and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's name as the user wrote it, e.g. `memory_mb` or `env_vars.FOO`.
    pub field: String,
    /// What is wrong and what is allowed.
    pub message: String,
    /// True when the field was absent rather than wrong.
    pub missing: bool,
}

impl FieldError {
    /// A field whose value breaks a rule.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
            missing: false,
        }
    }

    /// A required field that was not given.
    pub fn missing(field: impl Into<String>) -> Self {
        let field = field.into();
        FieldError {
            message: format!("{field} is required"),
            field,
            missing: true,
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// A required string field: its value, or a "missing" error naming it.
pub fn required<'a>(field: &str, value: &'a Option<String>) -> Result<&'a str, FieldError> {
    value.as_deref().ok_or_else(|| FieldError::missing(field))
}

/// An optional `memory_mb`: checked when given, [`MEMORY_MB_DEFAULT`] otherwise.
pub fn memory_mb_or_default(field: &str, value: Option<i64>) -> Result<u32, FieldError> {
    value.map_or(Ok(MEMORY_MB_DEFAULT), |m| memory_mb(field, m))
}

/// An optional `timeout_sec`: checked when given, [`TIMEOUT_SEC_DEFAULT`] otherwise.
pub fn timeout_sec_or_default(field: &str, value: Option<i64>) -> Result<u32, FieldError> {
    value.map_or(Ok(TIMEOUT_SEC_DEFAULT), |t| timeout_sec(field, t))
}

/// An optional `min_instances`: checked when given, [`MIN_INSTANCES_DEFAULT`] otherwise.
pub fn min_instances_or_default(field: &str, value: Option<i64>) -> Result<u32, FieldError> {
    value.map_or(Ok(MIN_INSTANCES_DEFAULT), |m| min_instances(field, m))
}

/// An optional `idle_timeout_sec`: checked when given, [`IDLE_TIMEOUT_SEC_DEFAULT`] otherwise.
pub fn idle_timeout_sec_or_default(field: &str, value: Option<i64>) -> Result<u32, FieldError> {
    value.map_or(Ok(IDLE_TIMEOUT_SEC_DEFAULT), |t| idle_timeout_sec(field, t))
}

/// A DNS-1123 label: 1..=63 characters of `a-z`, `0-9` and `-`, starting and
/// ending with a letter or digit.
pub fn name(field: &str, value: &str) -> Result<(), FieldError> {
    let rule = "must be a DNS-1123 label: 1-63 characters of lowercase letters, digits and '-', starting and ending with a letter or digit";
    let ok = !value.is_empty()
        && value.len() <= NAME_MAX_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(FieldError::invalid(field, format!("{value:?} {rule}")))
    }
}

/// A runtime from [`Runtime::ALL`].
pub fn runtime(field: &str, value: &str) -> Result<Runtime, FieldError> {
    value
        .parse::<Runtime>()
        .map_err(|e| FieldError::invalid(field, e.to_string()))
}

fn is_identifier(s: &str, extra: &[u8]) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' || extra.contains(&b) => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || extra.contains(&b))
}

/// An entrypoint `module.function`.
///
/// Python: a dotted module path and a function name (`main.handler`,
/// `pkg.mod.handler`). Node.js: a file path without extension, relative to the
/// code root, and an exported function (`index.handler`, `src/app.handler`).
pub fn entrypoint(field: &str, runtime: Runtime, value: &str) -> Result<(), FieldError> {
    let fail = |why: &str| {
        Err(FieldError::invalid(
            field,
            format!("{value:?} is not a valid entrypoint for {runtime}: {why}"),
        ))
    };
    if value.is_empty() {
        return fail("it is empty");
    }
    if value.len() > ENTRYPOINT_MAX_LEN {
        return fail("it is longer than 255 characters");
    }
    let Some((module, function)) = value.rsplit_once('.') else {
        return fail("expected the form module.function, e.g. main.handler");
    };
    match runtime.language() {
        Language::Python => {
            if !is_identifier(function, b"") {
                return fail("the function name must be a Python identifier");
            }
            if module.is_empty() || !module.split('.').all(|p| is_identifier(p, b"")) {
                return fail(
                    "the module must be a dotted Python module path, e.g. main or pkg.main",
                );
            }
        }
        Language::Node => {
            if !is_identifier(function, b"$") {
                return fail("the export name must be a JavaScript identifier");
            }
            let segments_ok = !module.is_empty()
                && !module.starts_with('/')
                && module.split('/').all(|seg| {
                    !seg.is_empty()
                        && seg != "."
                        && seg != ".."
                        && seg
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
                });
            if !segments_ok {
                return fail(
                    "the module must be a relative file path without extension, e.g. index or src/app",
                );
            }
        }
    }
    Ok(())
}

/// `memory_mb` within [`MEMORY_MB_MIN`]..=[`MEMORY_MB_MAX`].
pub fn memory_mb(field: &str, value: i64) -> Result<u32, FieldError> {
    in_range(field, value, MEMORY_MB_MIN, MEMORY_MB_MAX, "MiB")
}

/// `timeout_sec` within [`TIMEOUT_SEC_MIN`]..=[`TIMEOUT_SEC_MAX`].
pub fn timeout_sec(field: &str, value: i64) -> Result<u32, FieldError> {
    in_range(field, value, TIMEOUT_SEC_MIN, TIMEOUT_SEC_MAX, "seconds")
}

/// `min_instances`: 0 (scale to zero when idle) or 1 (always one process).
pub fn min_instances(field: &str, value: i64) -> Result<u32, FieldError> {
    in_range(field, value, 0, MIN_INSTANCES_MAX, "instances")
}

/// `idle_timeout_sec` within [`IDLE_TIMEOUT_SEC_MIN`]..=[`IDLE_TIMEOUT_SEC_MAX`].
pub fn idle_timeout_sec(field: &str, value: i64) -> Result<u32, FieldError> {
    in_range(
        field,
        value,
        IDLE_TIMEOUT_SEC_MIN,
        IDLE_TIMEOUT_SEC_MAX,
        "seconds",
    )
}

fn in_range(field: &str, value: i64, min: u32, max: u32, unit: &str) -> Result<u32, FieldError> {
    if value < i64::from(min) || value > i64::from(max) {
        return Err(FieldError::invalid(
            field,
            format!("{value} is out of range: must be between {min} and {max} {unit}"),
        ));
    }
    Ok(value as u32)
}

/// Environment variables: POSIX-style names, no reserved `SLESS_` prefix,
/// bounded count and sizes.
pub fn env_vars(field: &str, vars: &BTreeMap<String, String>) -> Result<(), FieldError> {
    if vars.len() > ENV_VARS_MAX {
        return Err(FieldError::invalid(
            field,
            format!(
                "{} variables given, at most {ENV_VARS_MAX} are allowed",
                vars.len()
            ),
        ));
    }
    for (k, v) in vars {
        let path = format!("{field}.{k}");
        if k.len() > ENV_NAME_MAX_LEN || !is_identifier(k, b"") {
            return Err(FieldError::invalid(
                path,
                "variable names must start with a letter or '_' and contain only letters, digits and '_'",
            ));
        }
        if k.starts_with(ENV_RESERVED_PREFIX) {
            return Err(FieldError::invalid(
                path,
                format!("names starting with {ENV_RESERVED_PREFIX} are reserved for the platform"),
            ));
        }
        if v.len() > ENV_VALUE_MAX_BYTES {
            return Err(FieldError::invalid(
                path,
                format!(
                    "the value is {} bytes, at most {ENV_VALUE_MAX_BYTES} are allowed",
                    v.len()
                ),
            ));
        }
        if v.contains('\0') {
            return Err(FieldError::invalid(path, "values cannot contain NUL bytes"));
        }
    }
    Ok(())
}

/// A cron schedule: five fields (`minute hour day-of-month month day-of-week`),
/// or six with a leading seconds field; names (`MON`, `JAN`) and nicknames
/// (`@hourly`, `@daily`, ...) are accepted. Returns the parsed schedule so the
/// caller can compute run times.
pub fn cron_schedule(field: &str, value: &str) -> Result<croner::Cron, FieldError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(FieldError::invalid(field, "the schedule is empty"));
    }
    let cron = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(trimmed)
        .map_err(|e| {
            FieldError::invalid(
                field,
                format!(
                    "{value:?} is not a valid cron schedule ({e}): use five fields \"minute hour day-of-month month day-of-week\" (e.g. \"*/5 * * * *\"), or six with leading seconds"
                ),
            )
        })?;
    if let Some(which) = empty_cron_field(&cron.pattern) {
        return Err(FieldError::invalid(
            field,
            format!("{value:?} is not a valid cron schedule: its {which} field matches no value"),
        ));
    }
    Ok(cron)
}

/// The first field of a parsed schedule that can match nothing (croner
/// parses `,` as an empty list, and then searches for its next run forever).
fn empty_cron_field(p: &croner::CronPattern) -> Option<&'static str> {
    let empty = |c: &croner::CronComponent| c.values().is_empty() && !c.has_modifiers();
    [
        ("seconds", &p.seconds),
        ("minute", &p.minutes),
        ("hour", &p.hours),
        ("day-of-month", &p.days),
        ("month", &p.months),
        ("day-of-week", &p.days_of_week),
    ]
    .into_iter()
    .find(|(_, c)| empty(c))
    .map(|(which, _)| which)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the coverage-guided fuzzer (`cron_schedules_from_tokens`):
    /// `", * * * * *"` was accepted and its next run searched for forever.
    #[test]
    fn a_cron_field_that_matches_nothing_is_refused() {
        for bad in [
            ", * * * * *",
            "* , * * * *",
            ", * * * *",
            "* , * * *",
            "* * , * *",
            "* * * , *",
            "* * * * ,",
            ",,, * * * *",
        ] {
            let e = cron_schedule("schedule", bad).unwrap_err();
            assert_eq!(e.field, "schedule");
            assert!(e.message.contains("matches no value"), "{bad:?}: {e}");
        }
        for ok in [
            "*/5 * * * *",
            "0 0 L * *",
            "0 0 * * 5#2",
            "0 0 15W * *",
            "30 * * * * *",
        ] {
            let cron = cron_schedule("schedule", ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            let start = chrono::Utc::now();
            assert!(cron.find_next_occurrence(&start, false).is_ok(), "{ok}");
        }
    }

    #[test]
    fn names_follow_dns_1123() {
        for ok in ["a", "hello", "hello-world", "f1", &"a".repeat(63)] {
            assert!(name("name", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Hello",
            "-a",
            "a-",
            "a_b",
            "a.b",
            &"a".repeat(64),
            "héllo",
        ] {
            let err = name("name", bad).unwrap_err();
            assert_eq!(err.field, "name");
        }
    }

    #[test]
    fn entrypoints_per_language() {
        let py = Runtime::Python311;
        let js = Runtime::Nodejs20;
        assert!(entrypoint("entrypoint", py, "main.handler").is_ok());
        assert!(entrypoint("entrypoint", py, "pkg.mod.handler").is_ok());
        assert!(entrypoint("entrypoint", py, "handler").is_err());
        assert!(entrypoint("entrypoint", py, "main.").is_err());
        assert!(entrypoint("entrypoint", py, "ma-in.handler").is_err());
        assert!(entrypoint("entrypoint", py, "../x.handler").is_err());
        assert!(entrypoint("entrypoint", js, "index.handler").is_ok());
        assert!(entrypoint("entrypoint", js, "src/app.$h").is_ok());
        assert!(entrypoint("entrypoint", js, "../index.handler").is_err());
        assert!(entrypoint("entrypoint", js, "/etc/passwd.x").is_err());
        assert!(entrypoint("entrypoint", js, "index.").is_err());
    }

    #[test]
    fn ranges_name_the_bounds() {
        assert_eq!(memory_mb("memory_mb", 128), Ok(128));
        let err = memory_mb("memory_mb", 1).unwrap_err();
        assert!(err.message.contains("64") && err.message.contains("4096"));
        assert!(timeout_sec("timeout_sec", 0).is_err());
        assert!(timeout_sec("timeout_sec", 901).is_err());
        assert!(timeout_sec("timeout_sec", -5).is_err());
    }

    #[test]
    fn optional_limits_default_or_check() {
        assert_eq!(
            memory_mb_or_default("memory_mb", None),
            Ok(MEMORY_MB_DEFAULT)
        );
        assert_eq!(timeout_sec_or_default("timeout_sec", Some(60)), Ok(60));
        assert_eq!(
            memory_mb_or_default("memory_mb", Some(1))
                .unwrap_err()
                .field,
            "memory_mb"
        );
        let err = required("name", &None).unwrap_err();
        assert!(err.missing && err.field == "name");
        assert_eq!(required("name", &Some("x".to_string())), Ok("x"));
    }

    #[test]
    fn cron_schedules() {
        for ok in [
            "*/5 * * * *",
            "0 0 * * FRI",
            "*/2 * * * * *",
            "@hourly",
            "0 9-17 * * 1-5",
        ] {
            assert!(cron_schedule("schedule", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "* * *",
            "61 * * * *",
            "*/5 * * * * * * *",
            "every minute",
            "0 0 32 * *",
        ] {
            let err = cron_schedule("schedule", bad).unwrap_err();
            assert_eq!(err.field, "schedule", "{bad}");
        }
    }

    #[test]
    fn env_var_rules() {
        let mut vars = BTreeMap::new();
        vars.insert("GREETING".to_string(), "hi".to_string());
        assert!(env_vars("env_vars", &vars).is_ok());
        vars.insert("SLESS_ENTRYPOINT".to_string(), "x".to_string());
        assert_eq!(
            env_vars("env_vars", &vars).unwrap_err().field,
            "env_vars.SLESS_ENTRYPOINT"
        );
        let mut bad = BTreeMap::new();
        bad.insert("1X".to_string(), String::new());
        assert!(env_vars("env_vars", &bad).is_err());
    }
}
