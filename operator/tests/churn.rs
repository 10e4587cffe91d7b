//! Concurrent creates, uploads, deletes and reads of overlapping names
//! (issue 15) through the real operator's REST API, with real zips built into
//! real Python processes. 200 random operations from 20 concurrent clients on
//! 20 names get only 2xx, 404 and 409 answers, and the operator ends
//! consistent: the list equals what reading each name says, every function
//! with code is Ready and answers with its own code, no process or build of a
//! deleted function is left, and the code store holds exactly the zips live
//! functions refer to (a third of the uploads share one zip across names). `SLESS_CHURN_SEED` replays a run.

mod support;

use reqwest::Method;
use serde_json::json;
use sless_wire::paths;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{Client, Operator, zip_of};

const NAMES: usize = 20;
const CLIENTS: usize = 20;
const OPS_PER_CLIENT: usize = 10;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn name(i: usize) -> String {
    format!("churn-{i:02}")
}

/// A zip whose handler answers with the function's name and this upload's
/// number (so every upload is a different blob); every third upload is the
/// same zip for all names instead (one blob shared by several functions,
/// the name read from the environment), so deletes race with uploads of
/// code another function still uses.
fn zip_for(name: &str, upload: u64) -> Vec<u8> {
    if upload.is_multiple_of(3) {
        return zip_of(&[(
            "main.py",
            "import os\n\ndef handler(event, context):\n    return {'name': os.environ['SLESS_FUNCTION'], 'upload': 'shared'}\n",
        )]);
    }
    zip_of(&[(
        "main.py",
        &format!(
            "def handler(event, context):\n    return {{'name': '{name}', 'upload': {upload}}}\n"
        ),
    )])
}

/// Answers seen, per operation and status.
type Tally = BTreeMap<(&'static str, u16), usize>;

async fn client_ops(c: Arc<Client>, seed: u64, uploads: Arc<AtomicU64>) -> Result<Tally, String> {
    let mut rng = Rng(seed | 1);
    let mut tally = Tally::new();
    for _ in 0..OPS_PER_CLIENT {
        let n = name(rng.below(NAMES));
        let roll = rng.below(100);
        let (op, allowed, r): (&'static str, &[u16], _) = if roll < 35 {
            let body = json!({"name": n, "runtime": "python3.11", "entrypoint": "main.handler"});
            let r = c
                .req(Method::POST, &paths::functions(&c.namespace))
                .json(&body)
                .send()
                .await;
            ("create", &[201, 409], r)
        } else if roll < 60 {
            use sha2::Digest;
            let zip = zip_for(&n, uploads.fetch_add(1, Ordering::Relaxed));
            let sha = hex::encode(sha2::Sha256::digest(&zip));
            let r = c
                .req(Method::PUT, &paths::function_code(&c.namespace, &n))
                .query(&[("sha256", sha)])
                .header("content-type", "application/zip")
                .body(zip)
                .send()
                .await;
            ("upload", &[200, 202, 404], r)
        } else if roll < 85 {
            let r = c
                .req(Method::DELETE, &paths::function(&c.namespace, &n))
                .send()
                .await;
            ("delete", &[204, 404], r)
        } else {
            let r = c
                .req(Method::GET, &paths::function(&c.namespace, &n))
                .send()
                .await;
            ("get", &[200, 404], r)
        };
        let r = r.map_err(|e| format!("{op} {n}: {e}"))?;
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        if !allowed.contains(&status) {
            return Err(format!("{op} {n}: {status} {text}"));
        }
        *tally.entry((op, status)).or_insert(0) += 1;
    }
    Ok(tally)
}

/// Live runtime processes of `ns`, by function name.
fn runtime_processes(ns: &str) -> BTreeMap<String, Vec<u32>> {
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for i in 0..NAMES {
        let pids = support::runtime_pids(ns, &name(i));
        if !pids.is_empty() {
            out.insert(name(i), pids);
        }
    }
    out
}

fn dir_names(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_and_deletes_of_overlapping_names_end_consistent() {
    let seed: u64 = std::env::var("SLESS_CHURN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    println!("churn: SLESS_CHURN_SEED={seed}");
    let op = Operator::start();
    let base = op.client("churn");
    base.ensure().await;
    let c = Arc::new(Client {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client"),
        ..base
    });
    let uploads = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CLIENTS as u64)
        .map(|i| {
            tokio::spawn(client_ops(
                c.clone(),
                seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                uploads.clone(),
            ))
        })
        .collect();
    let mut tally = Tally::new();
    for t in tasks {
        match t.await.expect("client task") {
            Ok(t) => {
                for (k, v) in t {
                    *tally.entry(k).or_insert(0) += v;
                }
            }
            Err(e) => panic!(
                "seed {seed}: an answer outside 2xx/404/409: {e}\nlog:\n{}",
                op.log()
            ),
        }
    }
    let churn_took = started.elapsed();
    assert_eq!(tally.values().sum::<usize>(), CLIENTS * OPS_PER_CLIENT);

    // Settle: every function with code reaches Ready (none Failed), the rest
    // stays Pending.
    let deadline = Instant::now() + Duration::from_secs(180);
    let live = loop {
        let (code, list) = c
            .call(Method::GET, &paths::functions(&c.namespace), None)
            .await;
        assert_eq!(code, 200, "{list}");
        let items = list["items"].as_array().cloned().unwrap_or_default();
        let phases: BTreeMap<String, String> = items
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap_or("").to_string(),
                    f["status"]["phase"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        assert!(
            phases.values().all(|p| p != "Failed"),
            "seed {seed}: a function Failed: {list}"
        );
        if phases.values().all(|p| p == "Ready" || p == "Pending") {
            break items;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: not settled after 180 s: {phases:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let listed: BTreeSet<String> = live
        .iter()
        .map(|f| f["name"].as_str().unwrap_or("").to_string())
        .collect();

    // The list equals a sequential read of every name.
    let mut read = BTreeSet::new();
    for i in 0..NAMES {
        let (code, body) = c.get(&name(i)).await;
        assert!(code == 200 || code == 404, "get {}: {code} {body}", name(i));
        if code == 200 {
            read.insert(name(i));
        }
    }
    assert_eq!(listed, read, "seed {seed}: the list and the reads disagree");

    // Every function with code answers with its own code.
    let mut with_code = BTreeMap::new();
    for f in &live {
        let n = f["name"].as_str().unwrap_or("").to_string();
        if let Some(sha) = f["status"]["code_sha256"].as_str() {
            assert_eq!(f["status"]["phase"], "Ready", "{f}");
            let (code, text) = c.invoke(&n, &json!({})).await;
            assert_eq!(code, 200, "invoke {n}: {text}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            assert_eq!(
                v["name"],
                n.as_str(),
                "{n} answers with another's code: {text}"
            );
            with_code.insert(n, sha.to_string());
        }
    }

    // Nothing of deleted functions is left: processes, builds, logs, code.
    let data_dir = op.data_dir.canonicalize().expect("data dir");
    let ns = c.namespace.clone();
    let want_blobs: BTreeSet<String> = with_code.values().map(|s| format!("{s}.zip")).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (procs, blobs) = loop {
        let procs = runtime_processes(&ns);
        let blobs: BTreeSet<String> = dir_names(&data_dir.join("code"))
            .into_iter()
            .filter(|n| !n.starts_with('.'))
            .collect();
        let builds = dir_names(&data_dir.join("builds").join(&ns));
        let logs = dir_names(&data_dir.join("logs").join(&ns));
        let orphans: Vec<_> = procs
            .iter()
            .filter(|(n, pids)| !with_code.contains_key(*n) || pids.len() > 1)
            .collect();
        let stray_builds: Vec<_> = builds.difference(&listed).collect();
        let stray_logs: Vec<_> = logs.difference(&listed).collect();
        if orphans.is_empty()
            && blobs == want_blobs
            && stray_builds.is_empty()
            && stray_logs.is_empty()
        {
            break (procs, blobs);
        }
        if Instant::now() >= deadline {
            let logs_left: Vec<String> = stray_logs
                .iter()
                .flat_map(|n| {
                    walkdir::WalkDir::new(data_dir.join("logs").join(&ns).join(n))
                        .into_iter()
                        .flatten()
                        .filter(|e| e.file_type().is_file())
                        .map(|e| format!("{}:\n{}", e.path().display(), support::read(e.path())))
                })
                .collect();
            panic!(
                "seed {seed}: leftovers 30 s after settling: orphan processes {orphans:?}; \
                 code blobs {blobs:?} (want {want_blobs:?}); build dirs of deleted functions \
                 {stray_builds:?}; log dirs {stray_logs:?}:\n{}",
                logs_left.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "churn: {} operations from {CLIENTS} clients on {NAMES} names in {churn_took:?} ({} uploads): \
         {tally:?}; at the end {} functions ({} with code, all Ready and answering), \
         {} runtime processes, {} code blobs; no leftovers",
        CLIENTS * OPS_PER_CLIENT,
        uploads.load(Ordering::Relaxed),
        listed.len(),
        with_code.len(),
        procs.values().map(Vec::len).sum::<usize>(),
        blobs.len()
    );
}
