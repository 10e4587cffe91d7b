//! Shared helpers for xtask's integration tests: paths, cargo builds, throwaway GPG keys
//! and certificates, an HTTPS static server, isolated terraform runs, the `h1:` hash.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use sha2::{Digest, Sha256};

/// go-plugin's magic cookie value for Terraform providers.
pub const MAGIC_COOKIE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The cargo target directory these tests were built into.
pub fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        let d = PathBuf::from(d);
        return if d.is_absolute() {
            d
        } else {
            workspace().join(d)
        };
    }
    // <target>/debug/deps/<test binary>
    std::env::current_exe()
        .expect("current exe")
        .ancestors()
        .nth(3)
        .expect("target dir")
        .to_path_buf()
}

/// The cargo program.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Builds the provider in the dev profile (a no-op when already built) and returns it.
///
/// Builds every workspace binary, as `scripts/test.sh` does, so Cargo resolves the
/// same features and reuses that build: `-p terraform-provider-sless` alone would
/// unify features differently and rebuild most dependencies (minutes in CI).
pub fn debug_provider() -> PathBuf {
    let status = cargo()
        .current_dir(workspace())
        .args(["build", "--workspace", "--bins"])
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build --workspace --bins failed");
    let bin = target_dir().join("debug").join("terraform-provider-sless");
    assert!(bin.is_file(), "{} missing after build", bin.display());
    bin
}

/// Whether the acceptance tests are enabled (`TF_ACC` set and not empty/0).
pub fn tf_acc() -> bool {
    std::env::var("TF_ACC").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Runs a command, returning its output, panicking if it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// stdout + stderr of an output as text.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A throwaway GnuPG home with keys.
pub struct GpgHome {
    /// The GNUPGHOME directory.
    pub dir: PathBuf,
}

impl GpgHome {
    /// Creates an empty GnuPG home under `parent` (short path: gpg-agent sockets live there).
    pub fn new(parent: &Path) -> GpgHome {
        let dir = parent.join("gnupg");
        std::fs::create_dir_all(&dir).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        GpgHome { dir }
    }

    fn gpg(&self) -> Command {
        let mut c = Command::new("gpg");
        c.arg("--homedir").arg(&self.dir).arg("--batch");
        c
    }

    /// Generates a key with `gpg --batch --gen-key` (`key_type` e.g. `RSA` or `EDDSA`) and
    /// returns its 16-hex key id.
    pub fn gen_key(&self, key_type: &str, email: &str) -> String {
        let params = self.dir.join(format!("{email}.params"));
        let algo = if key_type == "RSA" {
            "Key-Type: RSA\nKey-Length: 3072\n".to_owned()
        } else {
            format!("Key-Type: {key_type}\nKey-Curve: ed25519\n")
        };
        std::fs::write(
            &params,
            format!(
                "{algo}Key-Usage: sign\nName-Real: sless test\nName-Email: {email}\nExpire-Date: 0\n%no-protection\n%commit\n"
            ),
        )
        .unwrap();
        let out = run(self.gpg().arg("--gen-key").arg(&params));
        assert!(out.status.success(), "gpg --gen-key failed: {}", text(&out));
        self.key_id(email)
    }

    /// The 16-hex key id of the primary key for `selector`.
    pub fn key_id(&self, selector: &str) -> String {
        let out = run(self.gpg().args(["--with-colons", "--list-keys", selector]));
        assert!(out.status.success(), "gpg --list-keys: {}", text(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("pub:"))
            .and_then(|l| l.split(':').nth(4))
            .expect("pub record")
            .to_owned()
    }

    /// The ASCII-armored public key of `selector`.
    pub fn armor(&self, selector: &str) -> String {
        let out = run(self.gpg().args(["--armor", "--export", selector]));
        assert!(out.status.success(), "gpg --export: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for GpgHome {
    fn drop(&mut self) {
        // Stop the gpg-agent that key generation and signing started for this home.
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(&self.dir)
            .args(["--kill", "gpg-agent"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Writes a self-signed CA:TRUE certificate for localhost/127.0.0.1: `(cert.pem, key.pem)`.
pub fn self_signed_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let out = run(Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args([
            "-days",
            "30",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,digitalSignature,keyCertSign",
        ]));
    assert!(out.status.success(), "openssl req failed: {}", text(&out));
    (cert, key)
}

const SERVER_PY: &str = r#"
import functools, http.server, ssl, sys
root, cert, key, log = sys.argv[1:5]
class Handler(http.server.SimpleHTTPRequestHandler):
    def guess_type(self, path):
        p = str(path)
        if p.endswith('.zip'):
            return 'application/zip'
        if p.endswith('.sig'):
            return 'application/octet-stream'
        if p.endswith('SHA256SUMS'):
            return 'text/plain; charset=utf-8'
        return 'application/json'
    def log_message(self, fmt, *args):
        with open(log, 'a') as f:
            f.write('%s %s\n' % (self.command, self.path))
server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Handler, directory=root))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A static HTTPS server (Python `http.server` + `ssl`) on 127.0.0.1, killed on drop.
pub struct HttpsServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// One line per request: `GET /path`.
    pub log: PathBuf,
}

impl HttpsServer {
    /// Serves `root` with the given certificate; every document that is not a zip,
    /// signature or SHA256SUMS is served as `application/json`.
    pub fn start(root: &Path, cert: &Path, key: &Path, work: &Path) -> HttpsServer {
        let script = work.join("serve.py");
        let log = work.join("requests.log");
        std::fs::write(&script, SERVER_PY).unwrap();
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(root)
            .arg(cert)
            .arg(key)
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("python server printed `{line}` instead of a port"));
        HttpsServer { child, port, log }
    }

    /// The requests served so far.
    pub fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `terraform` command isolated from this machine's configuration.
pub fn terraform(dir: &Path, home: &Path, cli_config: &Path, cert: Option<&Path>) -> Command {
    let mut c = Command::new("terraform");
    c.current_dir(dir)
        .env("HOME", home)
        .env("TF_CLI_CONFIG_FILE", cli_config)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_IN_AUTOMATION", "1")
        .env("RUST_BACKTRACE", "0")
        .env_remove("SSL_CERT_DIR")
        .env_remove("TF_PLUGIN_CACHE_DIR")
        .env_remove("TF_LOG")
        .env_remove("TF_DATA_DIR")
        .env_remove("TF_REATTACH_PROVIDERS");
    match cert {
        Some(cert) => c.env("SSL_CERT_FILE", cert),
        None => c.env_remove("SSL_CERT_FILE"),
    };
    c
}

/// Terraform's `h1:` hash of a provider zip ("dirhash" Hash1), computed independently:
/// base64 SHA-256 over the sorted lines `"<hex sha256>  <name>\n"` of the files inside.
pub fn h1_of_zip(zip_path: &Path) -> String {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(zip_path).unwrap()).unwrap();
    let mut lines = Vec::new();
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).unwrap();
        if f.is_dir() {
            continue;
        }
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        lines.push(format!(
            "{}  {}\n",
            hex::encode(Sha256::digest(&bytes)),
            f.name()
        ));
    }
    lines.sort_by(|a, b| a[66..].cmp(&b[66..]));
    let digest = Sha256::digest(lines.concat().as_bytes());
    format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// Reads a line-oriented handshake from a child's stdout with a deadline.
pub fn read_first_line(child: &mut Child, timeout: Duration) -> Option<String> {
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(timeout).ok()
}

/// Waits until `path` exists with non-empty contents.
pub fn wait_for_file(path: &Path, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(s) = std::fs::read_to_string(path)
            && !s.trim().is_empty()
        {
            return Some(s.trim().to_owned());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}
