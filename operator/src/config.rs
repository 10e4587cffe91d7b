//! Command-line options of `sless-operator` (`serve`, `token`, `openapi`).
//! Every `serve` option can also come from an `SLESS_*` environment variable.

use clap::{Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The default data dir, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "./.sless";

/// `sless-operator`: runs the sless REST API over a backend.
#[derive(Debug, Parser)]
#[command(name = "sless-operator", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the operator: the REST API over the chosen backend.
    Serve(ServeArgs),
    /// Prints a token (JWT) that an operator with the same data dir accepts.
    Token(TokenArgs),
    /// Prints the OpenAPI document of the REST API as JSON.
    Openapi,
    /// Prints the CustomResourceDefinitions of the Kubernetes backend as YAML.
    Crds,
    /// Internal: the first program inside a sandbox, already unprivileged:
    /// takes the environment from a file descriptor (so nothing of the user's
    /// reaches the root-run bwrap and setpriv) and execs the command, or for
    /// services starts it and forwards the sandbox's socket to its port.
    #[command(hide = true)]
    SandboxExec(SandboxExecArgs),
}

/// Options of the internal `sandbox-exec` command.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxExecArgs {
    /// The descriptor holding the environment as NUL-separated `KEY=VALUE`.
    #[arg(long)]
    pub env_fd: i32,
    /// Forward this unix socket to `--port` (services).
    #[arg(long, requires = "port")]
    pub socket: Option<PathBuf>,
    /// The port of `127.0.0.1` to forward connections to.
    #[arg(long, requires = "socket")]
    pub port: Option<u16>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// The backend the operator drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// Functions run as processes on this machine (embedded mode).
    Local,
    /// Functions run on a Kubernetes cluster (see docs/kubernetes.md).
    Kube,
}

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Options of `sless-operator serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port. The bound address is
    /// written to `<data-dir>/operator.addr`.
    #[arg(long, env = "SLESS_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Directory of all state (database, code, logs, the local token key);
    /// created if missing.
    #[arg(long, env = "SLESS_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,

    /// Which backend runs the functions.
    #[arg(long, env = "SLESS_BACKEND", value_enum, default_value_t = BackendKind::Local)]
    pub backend: BackendKind,

    /// Log format on stderr.
    #[arg(long, env = "SLESS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Base URL clients reach the operator at, used in returned URLs
    /// (default `http://<bound address>`).
    #[arg(long, env = "SLESS_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Token verification options.
    #[command(flatten)]
    pub auth: AuthArgs,

    /// Options of `--backend kube`.
    #[command(flatten)]
    pub kube: Box<crate::kube::args::KubeArgs>,

    /// Options of the local backend's sandbox.
    #[command(flatten)]
    pub sandbox: SandboxArgs,

    /// Limits of the HTTP server against slow and numerous clients.
    #[command(flatten)]
    pub http: HttpArgs,
}

/// Limits of the operator's HTTP server (docs/local-backend.md, "HTTP server limits").
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// Seconds a connection may take to send a whole request head (new, idle
    /// between keep-alive requests, or sending slowly); then it is closed.
    #[arg(long, env = "SLESS_HEADER_READ_TIMEOUT_SEC", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_read_timeout_sec: u64,

    /// Most client connections served at once; more wait in the listen
    /// backlog until one closes.
    #[arg(long, env = "SLESS_MAX_CONNECTIONS", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
}

/// How the local backend isolates user code (docs/local-backend.md).
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// `strict`: every user process (function, job, service, dependency
    /// install) in a bubblewrap sandbox under its namespace's own uid with
    /// cgroup limits; refuses to start when the machine cannot do that.
    /// `none`: user code runs as the operator's user (trusted code only).
    #[arg(long, env = "SLESS_ISOLATION", value_enum, default_value_t = crate::local::sandbox::Isolation::Strict)]
    pub isolation: crate::local::sandbox::Isolation,

    /// Size of each sandbox's private /tmp (also HOME), MiB.
    #[arg(long, env = "SLESS_SANDBOX_TMP_MB", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub sandbox_tmp_mb: u32,

    /// Most processes and threads one function, job or service may have at once.
    #[arg(long, env = "SLESS_SANDBOX_PIDS_MAX", default_value_t = 256, value_parser = clap::value_parser!(u32).range(8..=65536))]
    pub sandbox_pids_max: u32,

    /// CPU quota of one function, job or service, in cores (e.g. 0.5, 1, 2).
    #[arg(long, env = "SLESS_SANDBOX_CPUS", default_value_t = 1.0, value_parser = parse_cpus)]
    pub sandbox_cpus: f64,

    /// Cold-start Python functions by forking a pre-imported zygote of
    /// their namespace (`on`), or start every process fresh (`off`).
    #[arg(long, env = "SLESS_ZYGOTE", value_enum, default_value_t = Toggle::On)]
    pub zygote: Toggle,

    /// Seconds a namespace's zygote or warm Node process is kept without a
    /// cold start asking for it (0: until shutdown).
    #[arg(long, env = "SLESS_WARM_IDLE_SEC", default_value_t = 900)]
    pub warm_idle_sec: u64,
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Toggle {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

impl SandboxArgs {
    /// The sandbox tunables these flags set.
    pub fn settings(&self) -> crate::local::sandbox::Settings {
        crate::local::sandbox::Settings {
            tmp_mb: self.sandbox_tmp_mb,
            pids_max: self.sandbox_pids_max,
            cpu_millis: (self.sandbox_cpus * 1000.0).round() as u32,
            ..Default::default()
        }
    }
}

fn parse_cpus(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("invalid number of cores {s:?}"))?;
    if !(0.01..=256.0).contains(&v) {
        return Err("the CPU quota must be between 0.01 and 256 cores".to_string());
    }
    Ok(v)
}

/// Token verification options of `serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AuthArgs {
    /// A JWKS file with the RS256/ES256/EdDSA (Ed25519) keys tokens are signed with.
    #[arg(long, env = "SLESS_JWKS_FILE", conflicts_with = "jwks_url")]
    pub jwks_file: Option<PathBuf>,

    /// A JWKS URL (fetched at startup and again when a token names an unknown key).
    #[arg(long, env = "SLESS_JWKS_URL")]
    pub jwks_url: Option<String>,

    /// Required `iss` claim of JWKS-signed tokens.
    #[arg(long, env = "SLESS_ISSUER")]
    pub issuer: Option<String>,

    /// Required `aud` claim of JWKS-signed tokens.
    #[arg(long, env = "SLESS_AUDIENCE")]
    pub audience: Option<String>,

    /// Also accept tokens from `sless-operator token` when a JWKS is configured
    /// (without a JWKS they are always accepted).
    #[arg(long, env = "SLESS_ALLOW_LOCAL_TOKENS")]
    pub allow_local_tokens: bool,
}

/// Options of `sless-operator token`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenArgs {
    /// The token's subject; the namespace is derived from it.
    #[arg(long)]
    pub sub: String,

    /// How long the token is valid, e.g. `24h`, `30m`, `7days`.
    #[arg(long, default_value = "24h", value_parser = parse_ttl)]
    pub ttl: Duration,

    /// The operator's data dir (where its token key lives).
    #[arg(long, env = "SLESS_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,
}

fn parse_ttl(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("invalid duration {s:?}: {e}"))?;
    if d.is_zero() {
        return Err("the ttl must be longer than 0s".to_string());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_defaults() {
        let cli = Cli::try_parse_from(["sless-operator", "serve"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(args.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(args.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
        assert_eq!(args.backend, BackendKind::Local);
        assert_eq!(args.log_format, LogFormat::Text);
        assert!(!args.auth.allow_local_tokens);
        assert_eq!(
            args.sandbox.isolation,
            crate::local::sandbox::Isolation::Strict
        );
        assert_eq!(args.sandbox.settings().cpu_millis, 1000);
    }

    #[test]
    fn isolation_and_sandbox_limits_parse() {
        let cli = Cli::try_parse_from([
            "sless-operator",
            "serve",
            "--isolation",
            "none",
            "--sandbox-cpus",
            "0.5",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(
            args.sandbox.isolation,
            crate::local::sandbox::Isolation::None
        );
        assert_eq!(args.sandbox.settings().cpu_millis, 500);
        for bad in [
            ["--isolation", "loose"],
            ["--sandbox-cpus", "0"],
            ["--sandbox-pids-max", "1"],
        ] {
            let mut argv = vec!["sless-operator", "serve"];
            argv.extend(bad);
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn token_ttl_parses() {
        let cli =
            Cli::try_parse_from(["sless-operator", "token", "--sub", "a", "--ttl", "2h"]).unwrap();
        let Command::Token(args) = cli.command else {
            panic!("not token")
        };
        assert_eq!(args.ttl, Duration::from_secs(7200));
        assert!(
            Cli::try_parse_from(["sless-operator", "token", "--sub", "a", "--ttl", "0s"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["sless-operator", "token", "--sub", "a", "--ttl", "x"]).is_err()
        );
    }

    #[test]
    fn jwks_file_and_url_conflict() {
        assert!(
            Cli::try_parse_from([
                "sless-operator",
                "serve",
                "--jwks-file",
                "a.json",
                "--jwks-url",
                "http://x"
            ])
            .is_err()
        );
    }
}
