//! Checks on the release coordinates given on the command line: version, namespace, host.

use crate::error::{Error, Result};

/// Checks a semantic version `X.Y.Z` with an optional `-prerelease` (no `+build`, no leading `v`).
pub fn version(v: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidArgument {
        field: "--version",
        value: v.to_owned(),
        reason: reason.to_owned(),
    };
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() != 3 {
        return Err(bad(
            "expected MAJOR.MINOR.PATCH, e.g. 0.1.0 (without a leading `v`)",
        ));
    }
    for p in parts {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("MAJOR, MINOR and PATCH must be numbers"));
        }
        if p.len() > 1 && p.starts_with('0') {
            return Err(bad("numbers must not have leading zeros"));
        }
    }
    if let Some(pre) = pre {
        let ok = !pre.is_empty()
            && pre.split('.').all(|id| {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !ok {
            return Err(bad(
                "the pre-release part may only hold dot-separated letters, digits and dashes",
            ));
        }
    }
    Ok(())
}

/// Orders two versions checked by [`version`]: numerically, and a pre-release before its release.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (Vec<u64>, Option<&str>) {
        let (core, pre) = match v.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (v, None),
        };
        (
            core.split('.').map(|p| p.parse().unwrap_or(0)).collect(),
            pre,
        )
    }
    let (ca, pa) = key(a);
    let (cb, pb) = key(b);
    ca.cmp(&cb).then_with(|| match (pa, pb) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(x), Some(y)) => x.cmp(y),
    })
}

/// Checks a registry namespace: lowercase letters, digits and dashes, not starting or ending with a dash.
pub fn namespace(ns: &str) -> Result<()> {
    let ok = !ns.is_empty()
        && ns.len() <= 64
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            field: "--namespace",
            value: ns.to_owned(),
            reason:
                "use 1-64 lowercase letters, digits and dashes, not starting or ending with a dash"
                    .into(),
        })
    }
}

/// Checks a registry host name as used in a provider source address: `host` or `host:port`.
pub fn host(h: &str) -> Result<()> {
    let (name, port) = match h.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (h, None),
    };
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !name.starts_with(['-', '.'])
        && !name.ends_with(['-', '.']);
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    if name_ok && port_ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            field: "--host",
            value: h.to_owned(),
            reason: "expected a host name with an optional port, e.g. registry.example.com or localhost:8443".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    #[test]
    fn versions() {
        for ok in ["0.1.0", "1.20.3", "0.1.0-test", "1.0.0-rc.1"] {
            version(ok).unwrap();
        }
        for bad in [
            "v0.1.0",
            "0.1",
            "01.0.0",
            "0.1.0+b",
            "0.1.0-",
            "a.b.c",
            "0.1.0-x..y",
        ] {
            let err = version(bad).unwrap_err().to_string();
            assert!(err.contains("--version"), "{bad}: {err}");
        }
    }

    #[test]
    fn version_order() {
        assert_eq!(compare_versions("0.2.0", "0.10.0"), Ordering::Less);
        assert_eq!(compare_versions("1.0.0-rc.1", "1.0.0"), Ordering::Less);
        assert_eq!(compare_versions("1.0.0", "1.0.0"), Ordering::Equal);
    }

    #[test]
    fn namespaces() {
        namespace("acme").unwrap();
        namespace("my-team-2").unwrap();
        for bad in ["", "-a", "a-", "Acme", "a/b", "a.b"] {
            assert!(namespace(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts() {
        host("localhost:8443").unwrap();
        host("registry.example.com").unwrap();
        for bad in ["", "a/b", "host:0", "host:x", ".x"] {
            assert!(host(bad).is_err(), "{bad}");
        }
    }
}
