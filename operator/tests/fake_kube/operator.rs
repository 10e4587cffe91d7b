//! The real `sless-operator --backend kube` binary wired to a [`FakeKube`]
//! (through a kubeconfig) and a real S3-compatible server (moto). A test
//! crate using this declares `mod support; mod moto; mod fake_kube;`.

use super::FakeKube;
use crate::moto::{self, Moto};
use crate::support::Operator;
use serde_json::json;

/// The bucket code and build contexts go to.
pub const BUCKET: &str = "sless-code";
/// The image registry prefix the operator is given.
pub const REGISTRY: &str = "registry.test/sless";

/// A running kube-backend operator and what it talks to.
pub struct KubeOperator {
    /// The operator process (its controllers run against `fake`).
    pub op: Operator,
    /// The fake API server.
    pub fake: FakeKube,
    /// The object store.
    pub moto: Moto,
    args: Vec<String>,
    env: Vec<(String, String)>,
    _dir: tempfile::TempDir,
}

/// Starts moto, a fake API server seeded with what an installation has
/// before the operator starts (its namespace and object-store secret), and
/// the operator; `None` (said loudly) when moto cannot be installed.
pub async fn start() -> Option<KubeOperator> {
    let moto = moto::moto(BUCKET).await?;
    let fake = FakeKube::new();
    fake.put(
        "v1",
        "namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sless-system"}}),
    );
    fake.put(
        "v1",
        "secrets",
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "sless-object-store", "namespace": "sless-system"},
               "data": {"AWS_ACCESS_KEY_ID": "dGVzdGluZw==", "AWS_SECRET_ACCESS_KEY": "dGVzdGluZw=="}}),
    );
    let server = fake.serve().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = FakeKube::kubeconfig(&server, dir.path());
    let kubeconfig = kubeconfig.to_string_lossy().to_string();
    let home = dir.path().to_string_lossy().to_string();
    let args: Vec<String> = [
        "--backend",
        "kube",
        "--registry",
        REGISTRY,
        "--s3-endpoint",
        &moto.endpoint,
        "--s3-bucket",
        BUCKET,
        "--s3-access-key-id",
        "testing",
        "--s3-secret-access-key",
        "testing",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env = vec![
        ("KUBECONFIG".to_string(), kubeconfig),
        ("HOME".to_string(), home),
    ];
    Some(KubeOperator {
        op: start_process(&args, &env),
        fake,
        moto,
        args,
        env,
        _dir: dir,
    })
}

fn start_process(args: &[String], env: &[(String, String)]) -> Operator {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Operator::start_with_env(&args, &env)
}

impl KubeOperator {
    /// Starts another operator process against the same API server and
    /// object store (a second replica), with its own data dir.
    pub fn replica(&self) -> Operator {
        start_process(&self.args, &self.env)
    }
}
