//! The code of deployable resources (`sless_function`, `sless_job`,
//! `sless_service`): the plan-time `code_hash` of `source_dir`; at apply
//! time, the zip to upload (refused when the folder changed since the plan),
//! its upload, and the build log tail a failure shows.

use crate::client::Built;
use crate::fields::api_error;
use crate::provider::Configured;
use crate::source::{Snapshot, sha256_hex};
use std::path::Path;
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

/// A zipped `source_dir`, ready to upload.
#[derive(Debug, Clone)]
pub struct Package {
    /// The zip bytes.
    pub zip: Vec<u8>,
    /// sha256 (hex) of `zip`.
    pub sha256: String,
    /// The source hash (`code_hash`) of the folder.
    pub hash: String,
}

/// Reads `source_dir` and adds a pathed diagnostic when that fails.
pub fn snapshot(diags: &mut Diagnostics, dir: &str) -> Option<Snapshot> {
    match Snapshot::read(Path::new(dir)) {
        Ok(s) => Some(s),
        Err(e) => {
            diags.error(
                "Cannot read source_dir",
                e.to_string(),
                AttributePath::new("source_dir"),
            );
            None
        }
    }
}

/// The plan-time `code_hash`: unknown while `source_dir` is unknown.
pub fn plan_hash(diags: &mut Diagnostics, source_dir: &Value<String>) -> Option<Value<String>> {
    match source_dir {
        Value::Value(dir) => Some(Value::Value(snapshot(diags, dir)?.hash())),
        Value::Unknown => Some(Value::Unknown),
        Value::Null => Some(Value::Null),
    }
}

/// Reads the folder at apply time, checks it still has the planned hash
/// (`planned_hash`, when known), and zips it.
pub fn package(
    diags: &mut Diagnostics,
    source_dir: &Value<String>,
    planned_hash: &Value<String>,
) -> Option<Package> {
    let dir = source_dir.as_ref_option()?.clone();
    let snap = snapshot(diags, &dir)?;
    let hash = snap.hash();
    if let Value::Value(want) = planned_hash
        && *want != hash
    {
        diags.error(
            "source_dir changed after the plan",
            format!(
                "The content of {dir} hashed to {want} at plan time and to {hash} now. Run terraform plan/apply again so the plan shows what is deployed."
            ),
            AttributePath::new("source_dir"),
        );
        return None;
    }
    match snap.zip() {
        Ok(zip) => {
            let sha256 = sha256_hex(&zip);
            Some(Package { zip, sha256, hash })
        }
        Err(e) => {
            diags.error(
                "Cannot zip source_dir",
                e.to_string(),
                AttributePath::new("source_dir"),
            );
            None
        }
    }
}

/// Uploads `p` as the code of the `K` named `name`. An API error becomes a
/// diagnostic.
pub async fn upload<K: Built>(
    diags: &mut Diagnostics,
    c: &Configured,
    ns: &str,
    name: &str,
    p: Package,
) -> Option<K> {
    match c
        .client
        .upload_code::<K>(ns, name, p.zip, &p.sha256, &p.hash)
        .await
    {
        Ok(k) => Some(k),
        Err(e) => {
            api_error(
                diags,
                format!("Cannot upload the code of {} {name}", K::NOUN),
                &e,
            );
            None
        }
    }
}

/// The last `tail` lines of the build log of the `K` named `name`, for a
/// failure diagnostic, or a note saying why there are none.
pub async fn build_log<K: Built>(c: &Configured, ns: &str, name: &str, tail: usize) -> String {
    match c.client.log::<K>(ns, name, "build", tail).await {
        Ok(l) if !l.trim().is_empty() => l,
        Ok(_) => "(the build log is empty)".to_string(),
        Err(e) => format!("(could not fetch the build log: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_carries_the_planned_hash_and_the_zip_sha() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("main.py"), "x = 1\n").unwrap();
        let dir = Value::Value(d.path().to_str().unwrap().to_string());
        let mut diags = Diagnostics::default();
        let hash = plan_hash(&mut diags, &dir).unwrap();
        let p = package(&mut diags, &dir, &hash).unwrap();
        assert_eq!(Value::Value(p.hash.clone()), hash);
        assert_eq!(p.sha256, sha256_hex(&p.zip));
        std::fs::write(d.path().join("main.py"), "x = 2\n").unwrap();
        assert!(package(&mut diags, &dir, &hash).is_none());
        assert_eq!(diags.errors[0].attribute, AttributePath::new("source_dir"));
        assert_eq!(
            plan_hash(&mut Diagnostics::default(), &Value::Unknown),
            Some(Value::Unknown)
        );
    }
}
