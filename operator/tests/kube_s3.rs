//! The code store against a real S3-compatible server: PyPI `moto[server]`
//! started on loopback by the test (installed with pip when missing; if it
//! cannot be installed the tests say so loudly and skip).

mod kube_mock;
mod moto;

use flate2::read::GzDecoder;
use http::Method;
use kube_mock::{Step, finish, start};
use moto::moto;
use serde_json::json;
use sha2::{Digest, Sha256};
use sless_operator::backend::{Backend, CodeBundle};
use sless_operator::kube::objstore::{self, CodeStore};
use sless_operator::kube::{KubeBackend, KubeOptions, S3Options};
use sless_wire::Runtime;
use std::io::{Cursor, Read, Write};

fn s3(endpoint: &str, bucket: &str) -> S3Options {
    S3Options {
        endpoint: Some(endpoint.to_string()),
        bucket: bucket.to_string(),
        region: "us-east-1".into(),
        access_key_id: "testing".into(),
        secret_access_key: "testing".into(),
        allow_http: true,
    }
}

fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, body) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(body.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn tar_entries(targz: &[u8]) -> Vec<(String, String)> {
    let mut a = tar::Archive::new(GzDecoder::new(targz));
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let p = e.path().unwrap().to_string_lossy().to_string();
            let mut s = String::new();
            e.read_to_string(&mut s).unwrap();
            (p, s)
        })
        .collect()
}

#[tokio::test]
async fn code_and_build_context_land_in_s3_under_content_addressed_keys() {
    let Some(m) = moto("sless-code").await else {
        return;
    };
    let store = CodeStore::s3(&s3(&m.endpoint, "sless-code")).unwrap();
    let zip = zip_of(&[
        ("main.py", "def handler(e, c):\n    return e\n"),
        ("requirements.txt", "six\n"),
    ]);
    let sha = hex::encode(Sha256::digest(&zip));
    let key = store
        .put_code("sless-1", &sha, zip.clone().into(), Runtime::Python311)
        .await
        .unwrap();
    assert_eq!(key, format!("code/sless-1/{sha}.python3.11.tar.gz"));
    assert_eq!(
        store
            .get(&objstore::zip_key("sless-1", &sha))
            .await
            .unwrap()
            .as_ref(),
        zip.as_slice()
    );
    let ctx = store.get(&key).await.unwrap();
    let entries = tar_entries(&ctx);
    assert_eq!(entries[0].0, "Dockerfile");
    assert!(entries[0].1.contains("pip install"));
    assert!(entries.iter().any(|(p, _)| p == "code/main.py"));
    // Same code again: same key, same bytes (content-addressed, idempotent).
    let again = store
        .put_code("sless-1", &sha, zip.clone().into(), Runtime::Python311)
        .await
        .unwrap();
    assert_eq!(again, key);
    assert_eq!(store.get(&key).await.unwrap(), ctx);
    // A runtime change makes a new context from the stored zip.
    let node = store
        .rebuild_context("sless-1", &sha, Runtime::Nodejs20)
        .await
        .unwrap();
    assert_ne!(node, key);
    assert!(
        tar_entries(&store.get(&node).await.unwrap())[0]
            .1
            .contains("FROM node:20")
    );
    // A missing bucket is an error naming the object store, not a silent success.
    let bad = s3(&m.endpoint, "no-such-bucket");
    let err = CodeStore::s3(&bad)
        .unwrap()
        .put_code("sless-1", &sha, zip.into(), Runtime::Python311)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("object store"), "{err}");
}

#[tokio::test]
async fn upload_code_stores_in_s3_then_points_the_function_at_it_once() {
    let Some(m) = moto("sless-up").await else {
        return;
    };
    let zip = zip_of(&[("main.py", "def handler(e, c):\n    return 1\n")]);
    let sha = hex::encode(Sha256::digest(&zip));
    let key = format!("code/sless-1/{sha}.python3.11.tar.gz");
    let f = |code: Option<serde_json::Value>| {
        let mut spec = json!({"runtime": "python3.11", "entrypoint": "main.handler", "envVars": {}, "memoryMb": 128, "timeoutSec": 30});
        if let Some(c) = code {
            spec["code"] = c;
        }
        json!({"apiVersion": "sless.kube5s.ru/v1alpha1", "kind": "Function",
               "metadata": {"name": "hello", "namespace": "sless-1"}, "spec": spec})
    };
    let code = json!({"key": key, "sha256": sha, "sourceHash": "src-1"});
    let uri = "/apis/sless.kube5s.ru/v1alpha1/namespaces/sless-1/functions/hello";
    let expected_code = code.clone();
    let (client, task) = start(vec![
        Step::new(Method::GET, uri).answer(200, f(None)),
        Step::new(Method::PATCH, format!("{uri}?"))
            .check(move |b| assert_eq!(b["spec"]["code"], expected_code))
            .answer(200, f(Some(code.clone()))),
        // The same code again: one read, no write, no rebuild.
        Step::new(Method::GET, uri).answer(200, f(Some(code))),
    ]);
    let mut opts = KubeOptions::example();
    opts.s3 = s3(&m.endpoint, "sless-up");
    let backend = KubeBackend::new(client, opts.clone(), CodeStore::s3(&opts.s3).unwrap());
    let bundle = CodeBundle {
        zip: zip.clone().into(),
        sha256: sha.clone(),
        source_hash: Some("src-1".into()),
    };
    let out = backend
        .upload_code("sless-1", "hello", bundle.clone())
        .await
        .unwrap();
    assert_eq!(out.status.code_sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(out.status.source_hash.as_deref(), Some("src-1"));
    backend
        .upload_code("sless-1", "hello", bundle)
        .await
        .unwrap();
    let store = CodeStore::s3(&opts.s3).unwrap();
    assert_eq!(
        store
            .get(&objstore::zip_key("sless-1", &sha))
            .await
            .unwrap()
            .as_ref(),
        zip.as_slice()
    );
    assert_eq!(
        tar_entries(&store.get(&key).await.unwrap())[0].0,
        "Dockerfile"
    );
    drop(backend);
    finish(task).await.assert_complete();
}
