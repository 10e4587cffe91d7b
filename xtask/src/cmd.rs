//! Running external programs (`cargo`, `rustup`, `gpg`, `gpgv`) with readable errors.

use std::process::{Command, Output, Stdio};

use crate::error::{Error, Result};

/// Renders a command line for error messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion, capturing stdout and stderr; fails unless it exits with 0.
pub fn output(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            program: cmd.get_program().to_string_lossy().into_owned(),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::CommandFailed {
            command: describe(cmd),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(out)
}

/// Runs `cmd` with stdout/stderr inherited (for long builds whose progress the user wants to see).
pub fn run_inherited(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().map_err(|source| Error::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    if !status.success() {
        return Err(Error::CommandFailed {
            command: describe(cmd),
            status: status.to_string(),
            stderr: String::new(),
        });
    }
    Ok(())
}

/// Runs `cmd` and returns its stdout as text.
pub fn stdout_text(cmd: &mut Command) -> Result<String> {
    let out = output(cmd)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
