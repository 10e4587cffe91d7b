//! `terraform-provider-sless`: the Terraform plugin binary. All logic lives in
//! the library crate; this only prepares the process and serves.

use std::process::ExitCode;

fn main() -> ExitCode {
    terraform_provider_sless::run_plugin()
}
