//! Release tooling for sless: builds the Terraform provider, packages and signs it, and
//! publishes a static Provider Registry Protocol v1 tree (`cargo xtask release`); measures
//! sless against same-run baselines (`cargo xtask bench`).

pub mod bench;
pub mod build;
pub mod cmd;
pub mod error;
pub mod manifest;
pub mod package;
pub mod registry;
pub mod release;
pub mod sign;
pub mod validate;
pub mod verify;

pub use error::{Error, Result};
