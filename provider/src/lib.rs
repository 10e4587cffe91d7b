//! The sless Terraform provider: configuration, the operator client, source
//! hashing and zipping, the `sless_function`, `sless_trigger`, `sless_job` and
//! `sless_service` resources and the `sless_namespace`, `sless_function` and
//! `sless_trigger` data sources.

pub mod client;
pub mod code;
pub mod diag;
pub mod fields;
pub mod function;
pub mod function_data;
pub mod job;
pub mod namespace;
pub mod provider;
pub mod secrets;
pub mod service;
pub mod source;
pub mod state_upgrade;
#[cfg(test)]
mod test_support;
pub mod token;
pub mod trigger;
pub mod trigger_data;
pub mod wait;

use std::process::ExitCode;

/// The provider's version: `SLESS_PROVIDER_VERSION` at build time, else the
/// crate version.
pub const VERSION: &str = match option_env!("SLESS_PROVIDER_VERSION") {
    Some(v) => v,
    None => env!("CARGO_PKG_VERSION"),
};

/// The `User-Agent` the provider sends: `terraform-provider-sless/<version>`.
pub fn user_agent() -> String {
    format!("{}/{VERSION}", sless_wire::paths::USER_AGENT_PREFIX)
}

/// The go-plugin handshake cookie Terraform sets for its plugins.
const MAGIC_COOKIE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// Entry point of the plugin binary: checks that Terraform started it, sets up
/// stderr logging and serves the provider until Terraform stops it.
pub fn run_plugin() -> ExitCode {
    // Terraform 1.0 prints "TERRAFORM CRASH" when a diagnostic carries a Rust
    // backtrace, and the crate captures one whenever RUST_BACKTRACE is set.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: called first thing in main, before any other thread exists.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
    if std::env::var("TF_PLUGIN_MAGIC_COOKIE").as_deref() != Ok(MAGIC_COOKIE)
        && std::env::var_os("SLESS_PROVIDER_DEBUG_SERVE").is_none()
    {
        eprintln!(
            "terraform-provider-sless {VERSION}: this is a Terraform plugin. \
             Terraform starts it; it is not meant to be run by hand."
        );
        return ExitCode::FAILURE;
    }
    if std::env::var_os("PLUGIN_LOG_FILE").is_none() {
        // stdout carries the plugin handshake: log to stderr only.
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("terraform-provider-sless: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(tf_provider::serve(
        "sless",
        provider::SlessProvider::default(),
    )) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("terraform-provider-sless: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn user_agent_names_the_provider_and_version() {
        let ua = super::user_agent();
        assert_eq!(ua, format!("terraform-provider-sless/{}", super::VERSION));
        assert!(!super::VERSION.is_empty());
    }
}
