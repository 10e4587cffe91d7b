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
