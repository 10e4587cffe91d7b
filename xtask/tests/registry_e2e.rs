//! End to end (TF_ACC=1): `cargo xtask release` builds, signs and publishes the provider into
//! a static tree; the tree is served over HTTPS on 127.0.0.1 with a self-signed certificate;
//! the real `terraform init` installs from it, records the right `h1:` hash, installs both of
//! two published versions, refuses a wrong key and a tampered SHA256SUMS; and the installed
//! binary plans against a running local operator (when the operator binary is built).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};
use support::{
    GpgHome, HttpsServer, h1_of_zip, run, target_dir, terraform, text, tf_acc, wait_for_file,
};

const NS: &str = "acme";

fn release(gpg: &GpgHome, key: &str, version: &str, out: &Path, extra: &[&str]) {
    let profile = std::env::var("XTASK_E2E_PROFILE").unwrap_or_else(|_| "release".into());
    let r = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "release",
            "--version",
            version,
            "--namespace",
            NS,
            "--gpg-key",
            key,
        ])
        .args(["--targets", "host", "--cargo-profile", &profile])
        .arg("--gnupg-home")
        .arg(&gpg.dir)
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run xtask release");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "xtask release {version} failed:\n{stdout}"
    );
    assert!(
        stdout.contains(&format!("released terraform-provider-sless {version}")),
        "{stdout}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.unwrap();
        let dest = to.join(entry.path().strip_prefix(from).unwrap());
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn files_named(dir: &Path, pred: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.is_file() && pred(p))
        .collect()
}

fn host_platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{}_{arch}", std::env::consts::OS)
}

struct Tf<'a> {
    home: &'a Path,
    cli_config: &'a Path,
    cert: &'a Path,
}

impl Tf<'_> {
    /// A fresh working directory requiring `source` at `version`.
    fn workdir(&self, name: &str, source: &str, version: &str, extra: &str) -> PathBuf {
        let dir = self.home.join("work").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("main.tf"),
            format!(
                "terraform {{\n  required_providers {{\n    sless = {{\n      source  = \"{source}\"\n      version = \"{version}\"\n    }}\n  }}\n}}\n{extra}"
            ),
        )
        .unwrap();
        dir
    }

    fn cmd(&self, dir: &Path) -> Command {
        terraform(dir, self.home, self.cli_config, Some(self.cert))
    }

    fn init(&self, dir: &Path) -> (bool, String) {
        let out = run(self.cmd(dir).args(["init", "-input=false", "-no-color"]));
        (out.status.success(), text(&out))
    }
}

#[test]
fn terraform_installs_the_published_provider_from_a_private_registry() {
    if !tf_acc() {
        eprintln!(
            "skipping registry_e2e: set TF_ACC=1 to run it (needs terraform, gpg, openssl, python3)"
        );
        return;
    }
    // Short path: gpg-agent puts its socket in the GnuPG home.
    let tmp = tempfile::Builder::new()
        .prefix("xte2e")
        .tempdir_in("/tmp")
        .unwrap();
    let root = tmp.path();
    let gpg = GpgHome::new(root);
    let key_a = gpg.gen_key("RSA", "publisher@example.com");
    let key_b = gpg.gen_key("RSA", "other@example.com");
    let (cert, cert_key) = support::self_signed_cert(root);
    let tree = root.join("tree");

    let mirror = root.join("mirror");
    let mirror_arg = mirror.to_string_lossy().into_owned();
    release(&gpg, &key_a, "0.1.0", &tree, &[]);
    release(
        &gpg,
        &key_a,
        "0.2.0",
        &tree,
        &["--mirror", &mirror_arg, "--host", "mirror.example.com"],
    );

    // A tree whose documents advertise key B while SHA256SUMS is signed with key A.
    let good = tree.join("v1/providers").join(NS);
    let wrong_key = tree.join("v1/providers/wrongkey");
    copy_dir(&good, &wrong_key);
    let armor_b = gpg.armor(&key_b);
    for doc in files_named(&wrong_key, |p| {
        p.parent()
            .and_then(|d| d.parent())
            .is_some_and(|d| d.ends_with("download"))
    }) {
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&doc).unwrap()).unwrap();
        json["signing_keys"] =
            serde_json::json!({"gpg_public_keys": [{"key_id": key_b, "ascii_armor": armor_b}]});
        std::fs::write(&doc, serde_json::to_vec(&json).unwrap()).unwrap();
    }
    // A tree whose SHA256SUMS was edited after signing (the zip's own line is left intact).
    let tampered = tree.join("v1/providers/tampered");
    copy_dir(&good, &tampered);
    for sums in files_named(&tampered, |p| p.to_string_lossy().ends_with("_SHA256SUMS")) {
        let mut text = std::fs::read_to_string(&sums).unwrap();
        text.push_str(&format!(
            "{}  terraform-provider-sless_extra.zip\n",
            "0".repeat(64)
        ));
        std::fs::write(&sums, text).unwrap();
    }

    let server = HttpsServer::start(&tree, &cert, &cert_key, root);
    let host = format!("localhost:{}", server.port);
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cli_config = root.join("empty.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    let tf = Tf {
        home: &home,
        cli_config: &cli_config,
        cert: &cert,
    };
    let platform = host_platform();

    // Both versions install, signed by the publisher's key, with the h1: computed here.
    let mut installed = Vec::new();
    for version in ["0.1.0", "0.2.0"] {
        let dir = tf.workdir(
            &format!("v{version}"),
            &format!("{host}/{NS}/sless"),
            &format!("= {version}"),
            "",
        );
        let (ok, out) = tf.init(&dir);
        assert!(
            ok,
            "terraform init of {version} failed:\n{out}\nrequests:\n{}",
            server.requests()
        );
        assert!(
            out.contains(&format!("Installed {host}/{NS}/sless v{version}")),
            "{out}"
        );
        assert!(
            out.contains("signed"),
            "init must report a signed install:\n{out}"
        );
        assert!(out.contains(&key_a), "init must name key {key_a}:\n{out}");

        let zip = tree
            .join("v1/providers")
            .join(NS)
            .join("sless")
            .join(version)
            .join(format!("terraform-provider-sless_{version}_{platform}.zip"));
        let lock = std::fs::read_to_string(dir.join(".terraform.lock.hcl")).unwrap();
        let h1 = h1_of_zip(&zip);
        assert!(
            lock.contains(&format!("\"{h1}\"")),
            "lock file lacks {h1}:\n{lock}"
        );
        let zh = format!(
            "zh:{}",
            hex::encode(Sha256::digest(std::fs::read(&zip).unwrap()))
        );
        assert!(lock.contains(&zh), "lock file lacks {zh}:\n{lock}");
        assert!(
            lock.contains(&format!("version     = \"{version}\"")),
            "{lock}"
        );

        let bin = dir
            .join(".terraform/providers")
            .join(&host)
            .join(NS)
            .join("sless")
            .join(version)
            .join(&platform)
            .join(format!("terraform-provider-sless_v{version}"));
        assert!(bin.is_file(), "{} not installed", bin.display());
        // The release baked its version into the binary (SLESS_PROVIDER_VERSION); run by
        // hand, the provider names it.
        let by_hand = run(Command::new(&bin).env_remove("TF_PLUGIN_MAGIC_COOKIE"));
        assert!(
            text(&by_hand).contains(&format!("terraform-provider-sless {version}")),
            "the installed binary does not report version {version}: {}",
            text(&by_hand)
        );
        installed.push(dir);
    }
    let requests = server.requests();
    assert!(
        requests.contains("GET /.well-known/terraform.json"),
        "{requests}"
    );
    assert!(
        requests.contains(&format!("GET /v1/providers/{NS}/sless/versions")),
        "{requests}"
    );

    // Signed by one key, another advertised: refused.
    let dir = tf.workdir("wrongkey", &format!("{host}/wrongkey/sless"), "= 0.1.0", "");
    let (ok, out) = tf.init(&dir);
    assert!(
        !ok,
        "init must refuse a package signed by a key that is not advertised:\n{out}"
    );
    let lower = out.to_lowercase();
    assert!(
        lower.contains("unknown issuer")
            || lower.contains("unknown entity")
            || lower.contains("signature"),
        "the refusal must be about the signature:\n{out}"
    );
    assert!(
        !dir.join(".terraform.lock.hcl").exists(),
        "nothing may be locked after a refusal"
    );

    // SHA256SUMS edited after signing: refused.
    let dir = tf.workdir("tampered", &format!("{host}/tampered/sless"), "= 0.1.0", "");
    let (ok, out) = tf.init(&dir);
    assert!(
        !ok,
        "init must refuse a SHA256SUMS edited after signing:\n{out}"
    );
    assert!(
        out.to_lowercase().contains("invalid signature"),
        "the refusal must name the invalid signature:\n{out}"
    );

    // The filesystem mirror written by --mirror installs offline (unauthenticated).
    let mirror_cli = root.join("mirror.tfrc");
    std::fs::write(
        &mirror_cli,
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    include = [\"mirror.example.com/*/*\"]\n  }}\n  direct {{\n    exclude = [\"mirror.example.com/*/*\"]\n  }}\n}}\n",
            mirror.display()
        ),
    )
    .unwrap();
    let dir = tf.workdir(
        "mirror",
        &format!("mirror.example.com/{NS}/sless"),
        "= 0.2.0",
        "",
    );
    let out =
        run(terraform(&dir, &home, &mirror_cli, None).args(["init", "-input=false", "-no-color"]));
    let t = text(&out);
    assert!(
        out.status.success(),
        "init from the filesystem mirror failed:\n{t}"
    );
    assert!(
        t.contains(&format!("Installed mirror.example.com/{NS}/sless v0.2.0")),
        "{t}"
    );

    plan_against_a_local_operator(&tf, &installed[1]);
}

/// Runs `terraform plan` with the installed (registry) binary against a real operator, if
/// the operator binary has been built; otherwise says so.
fn plan_against_a_local_operator(tf: &Tf<'_>, workdir: &Path) {
    let operator = target_dir().join("debug").join("sless-operator");
    if !operator.is_file() {
        eprintln!(
            "registry_e2e: skipping the plan against an operator: {} is not built",
            operator.display()
        );
        return;
    }
    let data = tf.home.join("operator-data");
    std::fs::create_dir_all(&data).unwrap();
    let log = std::fs::File::create(tf.home.join("operator.log")).unwrap();
    let mut child = Command::new(&operator)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start sless-operator");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = {
        let addr = wait_for_file(&data.join("operator.addr"), Duration::from_secs(60));
        let addr = match addr {
            Some(a) => a,
            None => {
                let _ = child.kill();
                panic!(
                    "sless-operator wrote no operator.addr within 60 s:\n{}",
                    std::fs::read_to_string(tf.home.join("operator.log")).unwrap_or_default()
                );
            }
        };
        let guard = Kill(child);
        let tok = run(Command::new(&operator)
            .args(["token", "--sub", "registry-e2e", "--data-dir"])
            .arg(&data));
        assert!(tok.status.success(), "sless-operator token: {}", text(&tok));
        let token = String::from_utf8_lossy(&tok.stdout).trim().to_owned();
        let namespace = format!(
            "sless-{}",
            &hex::encode(Sha256::digest(b"registry-e2e"))[..8]
        );

        let main_tf = std::fs::read_to_string(workdir.join("main.tf")).unwrap();
        std::fs::write(
            workdir.join("main.tf"),
            format!(
                "{main_tf}\nprovider \"sless\" {{\n  endpoint = \"http://{addr}\"\n  token    = \"{token}\"\n}}\n\ndata \"sless_namespace\" \"this\" {{}}\n\noutput \"namespace\" {{\n  value = data.sless_namespace.this.namespace\n}}\n"
            ),
        )
        .unwrap();
        let out = run(tf.cmd(workdir).args(["plan", "-input=false", "-no-color"]));
        let t = text(&out);
        assert!(
            out.status.success(),
            "terraform plan with the registry-installed provider failed:\n{t}"
        );
        assert!(
            t.contains(&namespace),
            "the plan must show namespace {namespace}:\n{t}"
        );
        eprintln!(
            "registry_e2e: plan with the registry-installed provider against the operator: ok"
        );
        guard
    };
}
