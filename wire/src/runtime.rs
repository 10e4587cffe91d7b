//! The runtimes a function can use.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A language runtime. The wire form is the string in [`Runtime::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Runtime {
    /// CPython 3.11.
    #[serde(rename = "python3.11")]
    Python311,
    /// Node.js 20.
    #[serde(rename = "nodejs20")]
    Nodejs20,
}

/// The language family of a runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Python: entrypoint `module.function`, dependencies from `requirements.txt`.
    Python,
    /// Node.js: entrypoint `file.export`, dependencies from `package.json`.
    Node,
}

impl Runtime {
    /// Every supported runtime, in the order documentation lists them.
    pub const ALL: [Runtime; 2] = [Runtime::Python311, Runtime::Nodejs20];

    /// The wire and Terraform spelling, e.g. `python3.11`.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Python311 => "python3.11",
            Runtime::Nodejs20 => "nodejs20",
        }
    }

    /// The language family.
    pub fn language(self) -> Language {
        match self {
            Runtime::Python311 => Language::Python,
            Runtime::Nodejs20 => Language::Node,
        }
    }

    /// The dependency manifest a build installs from, when present.
    pub fn dependency_file(self) -> &'static str {
        match self.language() {
            Language::Python => "requirements.txt",
            Language::Node => "package.json",
        }
    }

    /// All runtime names joined for error messages: `python3.11, nodejs20`.
    pub fn list() -> String {
        Runtime::ALL
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for a runtime name that is not in [`Runtime::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRuntime(pub String);

impl fmt::Display for UnknownRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown runtime {:?}: supported runtimes are {}",
            self.0,
            Runtime::list()
        )
    }
}

impl std::error::Error for UnknownRuntime {}

impl FromStr for Runtime {
    type Err = UnknownRuntime;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Runtime::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownRuntime(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for r in Runtime::ALL {
            assert_eq!(r.as_str().parse::<Runtime>(), Ok(r));
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
        }
    }

    #[test]
    fn unknown_runtime_names_the_choices() {
        let err = "ruby3.0".parse::<Runtime>().unwrap_err();
        assert!(err.to_string().contains("ruby3.0"));
        assert!(err.to_string().contains("python3.11"));
    }
}
