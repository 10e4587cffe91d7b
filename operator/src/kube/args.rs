//! Command-line options of the Kubernetes backend (`serve --backend kube`),
//! each also settable from an `SLESS_*` environment variable.

use super::{IngressOptions, KANIKO_IMAGE, KubeOptions, S3Options};

/// Options of `serve` used only with `--backend kube`.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct KubeArgs {
    /// Image registry prefix images are pushed to and pulled from, e.g.
    /// `registry.example.com/sless` (images are `<registry>/<ns>/<fn>:<tag>`).
    #[arg(long, env = "SLESS_REGISTRY")]
    pub registry: Option<String>,

    /// The registry speaks plain HTTP (kaniko `--insecure`).
    #[arg(long, env = "SLESS_REGISTRY_INSECURE")]
    pub registry_insecure: bool,

    /// A `kubernetes.io/dockerconfigjson` secret in the operator's namespace
    /// for pushing and pulling; copied into every deploy namespace.
    #[arg(long, env = "SLESS_REGISTRY_SECRET")]
    pub registry_secret: Option<String>,

    /// The namespace the operator runs in.
    #[arg(long, env = "SLESS_OPERATOR_NAMESPACE", default_value = "sless-system")]
    pub operator_namespace: String,

    /// The operator's own Service (in the operator's namespace): the
    /// Ingress of an http trigger whose function scales to zero points at it.
    #[arg(long, env = "SLESS_OPERATOR_SERVICE", default_value = "sless-operator")]
    pub operator_service: String,

    /// The port of the operator's Service.
    #[arg(long, env = "SLESS_OPERATOR_SERVICE_PORT", default_value_t = 80)]
    pub operator_service_port: u16,

    /// A secret in the operator's namespace with `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY` for kaniko; copied into deploy namespaces.
    #[arg(
        long,
        env = "SLESS_OBJECT_STORE_SECRET",
        default_value = "sless-object-store"
    )]
    pub object_store_secret: String,

    /// Endpoint of an S3-compatible object store (default: AWS S3).
    #[arg(long, env = "SLESS_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,

    /// Bucket for code and build contexts.
    #[arg(long, env = "SLESS_S3_BUCKET")]
    pub s3_bucket: Option<String>,

    /// Region of the bucket.
    #[arg(long, env = "SLESS_S3_REGION", default_value = "us-east-1")]
    pub s3_region: String,

    /// Access key id for the object store.
    #[arg(long, env = "SLESS_S3_ACCESS_KEY_ID")]
    pub s3_access_key_id: Option<String>,

    /// Secret access key for the object store.
    #[arg(long, env = "SLESS_S3_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub s3_secret_access_key: Option<String>,

    /// Host of http triggers' Ingress rules (default: any host).
    #[arg(long, env = "SLESS_INGRESS_HOST")]
    pub ingress_host: Option<String>,

    /// `ingressClassName` of http triggers' Ingresses.
    #[arg(long, env = "SLESS_INGRESS_CLASS")]
    pub ingress_class: Option<String>,

    /// Scheme of http trigger URLs.
    #[arg(long, env = "SLESS_INGRESS_SCHEME", default_value = "https")]
    pub ingress_scheme: String,

    /// Namespace of the ingress controller (admitted by the NetworkPolicy).
    #[arg(long, env = "SLESS_INGRESS_CONTROLLER_NAMESPACE")]
    pub ingress_controller_namespace: Option<String>,

    /// The kaniko image builds run in (pinned).
    #[arg(long, env = "SLESS_KANIKO_IMAGE", default_value = KANIKO_IMAGE)]
    pub kaniko_image: String,

    /// Run the controllers only in the replica holding the `sless-operator`
    /// Lease in the operator's namespace (`--leader-election=false`: always).
    #[arg(
        long,
        env = "SLESS_LEADER_ELECTION",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub leader_election: bool,
}

fn required(v: &Option<String>, flag: &str) -> Result<String, String> {
    match v.as_deref().map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(format!(
            "the Kubernetes backend (--backend kube) needs {flag}"
        )),
    }
}

impl KubeArgs {
    /// The backend options, or which required flag is missing or wrong.
    pub fn to_options(&self) -> Result<KubeOptions, String> {
        let endpoint = self.s3_endpoint.clone().filter(|e| !e.is_empty());
        if let Some(e) = &endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(format!(
                "--s3-endpoint {e:?} must start with http:// or https://"
            ));
        }
        if self.ingress_scheme != "http" && self.ingress_scheme != "https" {
            return Err("--ingress-scheme must be http or https".to_string());
        }
        if self.kaniko_image.ends_with(":latest") || !self.kaniko_image.contains(':') {
            return Err("--kaniko-image must be pinned to a version, never latest".to_string());
        }
        Ok(KubeOptions {
            registry: required(&self.registry, "--registry (SLESS_REGISTRY)")?,
            registry_insecure: self.registry_insecure,
            registry_secret: self.registry_secret.clone().filter(|s| !s.is_empty()),
            operator_namespace: self.operator_namespace.clone(),
            operator_service: self.operator_service.clone(),
            operator_service_port: self.operator_service_port,
            object_store_secret: self.object_store_secret.clone(),
            s3: S3Options {
                allow_http: endpoint
                    .as_deref()
                    .is_some_and(|e| e.starts_with("http://")),
                endpoint,
                bucket: required(&self.s3_bucket, "--s3-bucket (SLESS_S3_BUCKET)")?,
                region: self.s3_region.clone(),
                access_key_id: required(
                    &self.s3_access_key_id,
                    "--s3-access-key-id (SLESS_S3_ACCESS_KEY_ID)",
                )?,
                secret_access_key: required(
                    &self.s3_secret_access_key,
                    "--s3-secret-access-key (SLESS_S3_SECRET_ACCESS_KEY)",
                )?,
            },
            ingress: IngressOptions {
                host: self.ingress_host.clone().filter(|s| !s.is_empty()),
                class: self.ingress_class.clone().filter(|s| !s.is_empty()),
                scheme: self.ingress_scheme.clone(),
                controller_namespace: self
                    .ingress_controller_namespace
                    .clone()
                    .filter(|s| !s.is_empty()),
            },
            kaniko_image: self.kaniko_image.clone(),
            leader_election: self.leader_election,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        k: KubeArgs,
    }

    fn parse(args: &[&str]) -> KubeArgs {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        T::try_parse_from(v).unwrap().k
    }

    #[test]
    fn required_flags_are_named() {
        let err = parse(&[]).to_options().unwrap_err();
        assert!(err.contains("--registry"), "{err}");
        let err = parse(&["--registry", "r"]).to_options().unwrap_err();
        assert!(err.contains("--s3-bucket"), "{err}");
        let o = parse(&[
            "--registry",
            "r.test/sless",
            "--s3-bucket",
            "b",
            "--s3-access-key-id",
            "k",
            "--s3-secret-access-key",
            "s",
            "--s3-endpoint",
            "http://minio:9000",
            "--ingress-host",
            "fn.example.com",
        ])
        .to_options()
        .unwrap();
        assert!(o.s3.allow_http);
        assert_eq!(o.kaniko_image, KANIKO_IMAGE);
        assert_eq!(o.ingress.host.as_deref(), Some("fn.example.com"));
        assert_eq!(o.operator_namespace, "sless-system");
        // deploy/operator.yaml's Service.
        assert_eq!(o.operator_service, "sless-operator");
        assert_eq!(o.operator_service_port, 80);
    }

    #[test]
    fn unpinned_kaniko_and_bad_endpoint_are_refused() {
        let base = [
            "--registry",
            "r",
            "--s3-bucket",
            "b",
            "--s3-access-key-id",
            "k",
            "--s3-secret-access-key",
            "s",
        ];
        let mut a = base.to_vec();
        a.extend(["--kaniko-image", "ghcr.io/osscontainertools/kaniko:latest"]);
        assert!(parse(&a).to_options().unwrap_err().contains("pinned"));
        let mut a = base.to_vec();
        a.extend(["--s3-endpoint", "minio:9000"]);
        assert!(
            parse(&a)
                .to_options()
                .unwrap_err()
                .contains("--s3-endpoint")
        );
    }
}
