//! The code store of the Kubernetes backend: uploaded zips and the build
//! contexts made from them, in an S3-compatible bucket under content-addressed
//! keys. Wraps any `object_store::ObjectStore` (S3 in production, the
//! in-memory store in controller tests).

use super::S3Options;
use super::context;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use sless_wire::Runtime;
use std::sync::Arc;

/// Why the code store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object store answered with an error.
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// The zip could not be turned into a build context.
    #[error(transparent)]
    Context(#[from] context::ContextError),
}

/// Where uploaded code and build contexts are kept.
#[derive(Debug, Clone)]
pub struct CodeStore {
    store: Arc<dyn ObjectStore>,
}

/// `code/<ns>/<sha256>.zip`: the uploaded zip, by its content.
pub fn zip_key(ns: &str, sha256: &str) -> String {
    format!("code/{ns}/{sha256}.zip")
}

/// `code/<ns>/<sha256>.<runtime>.tar.gz`: the build context made from a zip
/// for a runtime. This is the *code key*; the image tag is derived from it,
/// so new code or a new runtime means a new image.
pub fn context_key(ns: &str, sha256: &str, runtime: Runtime) -> String {
    format!("code/{ns}/{sha256}.{}.tar.gz", runtime.as_str())
}

impl CodeStore {
    /// A store over any object store.
    pub fn new(store: Arc<dyn ObjectStore>) -> CodeStore {
        CodeStore { store }
    }

    /// An S3 (or S3-compatible) store. Nothing is contacted yet.
    pub fn s3(opts: &S3Options) -> Result<CodeStore, StoreError> {
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&opts.bucket)
            .with_region(&opts.region)
            .with_access_key_id(&opts.access_key_id)
            .with_secret_access_key(&opts.secret_access_key)
            .with_allow_http(opts.allow_http);
        if let Some(endpoint) = &opts.endpoint {
            b = b
                .with_endpoint(endpoint)
                .with_virtual_hosted_style_request(false);
        }
        Ok(CodeStore::new(Arc::new(b.build()?)))
    }

    /// Stores a zip and its build context for `runtime`; returns the code key.
    /// Both keys are content-addressed, so storing the same code twice is
    /// harmless.
    pub async fn put_code(
        &self,
        ns: &str,
        sha256: &str,
        zip: Bytes,
        runtime: Runtime,
    ) -> Result<String, StoreError> {
        let ctx = context::build_context(runtime, &zip)?;
        self.store
            .put(&Path::from(zip_key(ns, sha256)), zip.into())
            .await?;
        let key = context_key(ns, sha256, runtime);
        self.store
            .put(&Path::from(key.as_str()), ctx.into())
            .await?;
        Ok(key)
    }

    /// Makes the build context of already stored code for another runtime
    /// (a runtime change); returns the new code key.
    pub async fn rebuild_context(
        &self,
        ns: &str,
        sha256: &str,
        runtime: Runtime,
    ) -> Result<String, StoreError> {
        let zip = self.get(&zip_key(ns, sha256)).await?;
        let ctx = context::build_context(runtime, &zip)?;
        let key = context_key(ns, sha256, runtime);
        self.store
            .put(&Path::from(key.as_str()), ctx.into())
            .await?;
        Ok(key)
    }

    /// Reads an object.
    pub async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        Ok(self.store.get(&Path::from(key)).await?.bytes().await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_content_addressed_and_runtime_specific() {
        assert_eq!(zip_key("sless-1", "ab"), "code/sless-1/ab.zip");
        assert_eq!(
            context_key("sless-1", "ab", Runtime::Python311),
            "code/sless-1/ab.python3.11.tar.gz"
        );
        assert_ne!(
            super::super::names::image_tag(&context_key("n", "ab", Runtime::Python311)),
            super::super::names::image_tag(&context_key("n", "ab", Runtime::Nodejs20))
        );
    }
}
