//! `xtask release` as a user runs it, with a throwaway GnuPG home and a prebuilt binary
//! (`--binary`, so no cargo build): the tree it writes, merging, re-publishing, and the
//! refusals a user would hit (non-RSA key, unknown key, bad version).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{GpgHome, run, text};

fn xtask() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
}

// Field order matters: the GnuPG home (its agent) goes before the directory is removed.
struct Setup {
    gpg: GpgHome,
    key: String,
    bin: PathBuf,
    tmp: tempfile::TempDir,
}

fn setup() -> Setup {
    let tmp = tempfile::Builder::new()
        .prefix("xt")
        .tempdir_in("/tmp")
        .unwrap();
    let gpg = GpgHome::new(tmp.path());
    let key = gpg.gen_key("RSA", "release@example.com");
    let bin = tmp.path().join("provider-bin");
    std::fs::write(&bin, b"\x7fELF not really a provider").unwrap();
    Setup { gpg, key, bin, tmp }
}

fn release(s: &Setup, version: &str, out: &Path, key: &str) -> std::process::Output {
    run(xtask()
        .args([
            "release",
            "--version",
            version,
            "--namespace",
            "acme",
            "--gpg-key",
            key,
        ])
        .arg("--gnupg-home")
        .arg(&s.gpg.dir)
        .arg("--out")
        .arg(out)
        .arg("--binary")
        .arg(format!("linux_amd64={}", s.bin.display())))
}

#[test]
fn release_writes_a_signed_tree_and_merges_versions() {
    let s = setup();
    let out = s.tmp.path().join("tree");
    let r = release(&s, "0.1.0", &out, &s.key);
    assert!(r.status.success(), "{}", text(&r));
    assert!(
        text(&r).contains(&format!("signed by key {}", s.key)),
        "{}",
        text(&r)
    );

    let discovery: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(".well-known/terraform.json")).unwrap())
            .unwrap();
    assert_eq!(
        discovery,
        serde_json::json!({"providers.v1": "/v1/providers/"})
    );

    let vdir = out.join("v1/providers/acme/sless/0.1.0");
    let sums =
        std::fs::read_to_string(vdir.join("terraform-provider-sless_0.1.0_SHA256SUMS")).unwrap();
    assert!(
        sums.contains("  terraform-provider-sless_0.1.0_linux_amd64.zip\n"),
        "{sums}"
    );
    assert!(
        sums.contains("  terraform-provider-sless_0.1.0_manifest.json\n"),
        "{sums}"
    );
    let sig = std::fs::read(vdir.join("terraform-provider-sless_0.1.0_SHA256SUMS.sig")).unwrap();
    assert!(
        !sig.starts_with(b"-----BEGIN"),
        "the signature must be binary, not armored"
    );

    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(vdir.join("download/linux/amd64")).unwrap()).unwrap();
    assert_eq!(
        doc["download_url"],
        "../../terraform-provider-sless_0.1.0_linux_amd64.zip"
    );
    assert_eq!(
        doc["signing_keys"]["gpg_public_keys"][0]["key_id"],
        s.key.as_str()
    );
    assert!(
        doc["signing_keys"]["gpg_public_keys"][0]["ascii_armor"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    );

    // A second version merges; the first stays installable.
    let r = release(&s, "0.2.0", &out, &s.key);
    assert!(r.status.success(), "{}", text(&r));
    let versions = || -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(
            &std::fs::read(out.join("v1/providers/acme/sless/versions")).unwrap(),
        )
        .unwrap();
        v["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["version"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(versions(), ["0.1.0", "0.2.0"]);
    assert!(vdir.join("download/linux/amd64").is_file());

    // Re-publishing a version replaces it (new binary → new checksum), without duplicates.
    std::fs::write(&s.bin, b"\x7fELF a rebuilt provider").unwrap();
    let r = release(&s, "0.1.0", &out, &s.key);
    assert!(r.status.success(), "{}", text(&r));
    assert_eq!(versions(), ["0.1.0", "0.2.0"]);
    let sums2 =
        std::fs::read_to_string(vdir.join("terraform-provider-sless_0.1.0_SHA256SUMS")).unwrap();
    assert_ne!(sums, sums2, "re-publishing must replace the artifacts");
}

#[test]
fn mirror_layout_is_written_when_asked() {
    let s = setup();
    let out = s.tmp.path().join("tree");
    let mirror = s.tmp.path().join("mirror");
    let r = run(xtask()
        .args([
            "release",
            "--version",
            "1.2.3",
            "--namespace",
            "acme",
            "--gpg-key",
            &s.key,
        ])
        .arg("--gnupg-home")
        .arg(&s.gpg.dir)
        .arg("--out")
        .arg(&out)
        .arg("--mirror")
        .arg(&mirror)
        .args(["--host", "registry.example.com"])
        .arg("--binary")
        .arg(format!("linux_amd64={}", s.bin.display())));
    assert!(r.status.success(), "{}", text(&r));
    let packed = mirror
        .join("registry.example.com/acme/sless/terraform-provider-sless_1.2.3_linux_amd64.zip");
    assert_eq!(
        std::fs::read(&packed).unwrap(),
        std::fs::read(
            out.join(
                "v1/providers/acme/sless/1.2.3/terraform-provider-sless_1.2.3_linux_amd64.zip"
            )
        )
        .unwrap()
    );
}

#[test]
fn refuses_keys_terraform_cannot_verify_and_says_why() {
    let s = setup();
    s.gpg.gen_key("EDDSA", "ed@example.com");
    let out = s.tmp.path().join("tree");
    let r = release(&s, "0.1.0", &out, "ed@example.com");
    assert!(!r.status.success());
    let msg = text(&r);
    assert!(
        msg.contains("Terraform only verifies RSA signatures"),
        "{msg}"
    );
    assert!(msg.contains("EdDSA"), "{msg}");
    assert!(
        !out.join("v1").exists(),
        "nothing must be published with a refused key"
    );

    let r = release(&s, "0.1.0", &out, "nobody@example.com");
    assert!(!r.status.success());
    assert!(text(&r).contains("not found"), "{}", text(&r));

    let r = release(&s, "v0.1.0", &out, &s.key);
    assert!(!r.status.success());
    assert!(text(&r).contains("--version"), "{}", text(&r));
}

#[test]
fn refuses_to_merge_into_a_corrupt_versions_document() {
    let s = setup();
    let out = s.tmp.path().join("tree");
    std::fs::create_dir_all(out.join("v1/providers/acme/sless")).unwrap();
    std::fs::write(out.join("v1/providers/acme/sless/versions"), "{not json").unwrap();
    let r = release(&s, "0.1.0", &out, &s.key);
    assert!(!r.status.success());
    assert!(text(&r).contains("versions document"), "{}", text(&r));
    assert_eq!(
        std::fs::read_to_string(out.join("v1/providers/acme/sless/versions")).unwrap(),
        "{not json",
        "an unreadable versions document must not be overwritten"
    );
}
