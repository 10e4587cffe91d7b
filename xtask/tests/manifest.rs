//! `registry-manifest.json` parses and states the protocol the provider binary really speaks:
//! the binary is started as go-plugin would start it and its handshake line is read.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::{MAGIC_COOKIE, debug_provider, read_first_line, workspace};

#[test]
fn manifest_protocol_matches_the_provider_handshake() {
    let path = workspace().join("registry-manifest.json");
    let bytes = std::fs::read(&path).expect("registry-manifest.json at the workspace root");
    let manifest = xtask::manifest::RegistryManifest::parse(&bytes, &path).expect("valid manifest");
    let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"version": 1, "metadata": {"protocol_versions": ["6.0"]}})
    );

    let bin = debug_provider();
    let mut child = Command::new(&bin)
        .env("TF_PLUGIN_MAGIC_COOKIE", MAGIC_COOKIE)
        .env("PLUGIN_MIN_PORT", "20000")
        .env("PLUGIN_MAX_PORT", "40000")
        .env("PLUGIN_PROTOCOL_VERSIONS", "6")
        .env("RUST_BACKTRACE", "0")
        .env_remove("PLUGIN_CLIENT_CERT")
        .env_remove("PLUGIN_LOG_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the provider binary");
    let line = read_first_line(&mut child, Duration::from_secs(30));
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("the provider printed a handshake line within 30 s");
    let fields: Vec<&str> = line.trim().split('|').collect();
    assert!(
        fields.len() >= 5,
        "handshake `{line}` is not CORE|APP|NET|ADDR|PROTO"
    );
    assert_eq!(fields[0], "1", "go-plugin core protocol in `{line}`");
    assert_eq!(fields[2], "tcp", "network in `{line}`");
    assert!(fields[3].starts_with("127.0.0.1:"), "address in `{line}`");
    assert_eq!(fields[4], "grpc", "protocol in `{line}`");
    let port: u16 = fields[3]["127.0.0.1:".len()..].parse().expect("port");
    assert!(
        (20000..=40000).contains(&port),
        "port {port} outside PLUGIN_MIN_PORT..PLUGIN_MAX_PORT"
    );
    let majors: Vec<u32> = manifest
        .metadata
        .protocol_versions
        .iter()
        .filter_map(|p| xtask::manifest::protocol_major(p))
        .collect();
    let spoken: u32 = fields[1].parse().expect("app protocol version");
    assert!(
        majors.contains(&spoken),
        "the binary speaks protocol {spoken}, registry-manifest.json says {:?}",
        manifest.metadata.protocol_versions
    );
}
