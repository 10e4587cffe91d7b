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
    let op = Operator::start_with_env(
        &[
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
        ],
        &[("KUBECONFIG", &kubeconfig), ("HOME", &home)],
    );
    Some(KubeOperator {
        op,
        fake,
        moto,
        _dir: dir,
    })
}
