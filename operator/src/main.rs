//! `sless-operator`: `serve` runs the REST API, `token` mints a local token,
//! `openapi` prints the API document. See `sless_operator::config` for options.

use clap::Parser as _;
use sless_operator::api::{openapi, server};
use sless_operator::auth::LocalKey;
use sless_operator::config::{Cli, Command, LogFormat};
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: every proxied request allocates and
/// frees hyper's buffers, header maps and strings (docs/performance.md §7).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            init_logging(args.log_format);
            let runtime = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("sless-operator: cannot start the async runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(server::serve(args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "sless-operator failed");
                    eprintln!("sless-operator: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Token(args) => {
            if args.sub.trim().is_empty() {
                eprintln!("sless-operator token: --sub must not be empty");
                return ExitCode::from(2);
            }
            match LocalKey::load_or_create(&args.data_dir).and_then(|k| k.mint(&args.sub, args.ttl))
            {
                Ok(token) => {
                    println!("{token}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sless-operator token: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Openapi => {
            println!("{}", openapi::document_json());
            ExitCode::SUCCESS
        }
        Command::SandboxExec(args) => {
            let code = sless_operator::local::bridge::sandbox_exec(&args);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Command::Crds => match sless_operator::kube::crd::all_crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("sless-operator crds: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Logs to stderr, text or JSON; `RUST_LOG` overrides the default `info`.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
