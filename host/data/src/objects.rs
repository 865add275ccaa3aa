//! `s3://` and `https://` inputs through the `object_store` crate: sizes and prefix
//! listings for the driver's plan, ranged reads for executors. S3 credentials come from
//! the `s3` service's delegation token (the driver's providers fetch it; executors get
//! it pushed), never from an executor's environment.

use crate::InputError;
use crate::inputs::InputUrl;
use flint_proto::{ObjectSettings, Source, Token};
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The token service whose secret holds S3 credentials.
pub const S3_SERVICE: &str = "s3";

/// At most this many objects under one prefix: a plan is kept in memory.
pub const MAX_OBJECTS: usize = 100_000;

/// Clients kept for reuse (one per bucket and credentials, one per HTTP origin).
const MAX_STORES: usize = 64;

/// What the `s3` token's secret holds (JSON), as `aws sts assume-role` gives it.
#[derive(Deserialize)]
struct S3Credentials {
    access_key_id: String,
    secret_access_key: String,
    #[serde(default)]
    session_token: Option<String>,
}

/// Reads objects; clients are reused while the credentials stay the same.
pub struct ObjectReader {
    settings: ObjectSettings,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl ObjectReader {
    pub fn new(settings: ObjectSettings) -> ObjectReader {
        ObjectReader { settings, stores: Mutex::new(HashMap::new()) }
    }

    /// Every object an `s3://` or `https://` input names, with its size, in key order.
    pub async fn expand(&self, url: &InputUrl, tokens: &[Token]) -> Result<Vec<(Source, u64)>, InputError> {
        match url {
            InputUrl::S3 { bucket, key } => {
                let store = self.s3(bucket, tokens)?;
                // A glob lists the folder its wildcards start in and keeps the keys that
                // match (`*` within a folder, `**` across them).
                let pattern = match crate::inputs::is_glob(key) {
                    false => None,
                    true => Some(
                        glob::Pattern::new(key)
                            .map_err(|e| InputError::Glob { url: url.to_string(), reason: e.to_string() })?,
                    ),
                };
                let key = match &pattern {
                    Some(_) => key[..key.find(['*', '?', '[']).unwrap_or(key.len())]
                        .rsplit_once('/')
                        .map_or(String::new(), |(folder, _)| format!("{folder}/")),
                    None => key.clone(),
                };
                let key = &key;
                if pattern.is_none() && !key.is_empty() && !key.ends_with('/') {
                    match store.head(&Path::from(key.as_str())).await {
                        Ok(meta) => {
                            return Ok(vec![(
                                Source::S3 { bucket: bucket.clone(), key: key.clone() },
                                meta.size,
                            )]);
                        }
                        Err(object_store::Error::NotFound { .. }) => {} // a prefix, then
                        Err(e) => return Err(describe(&e)),
                    }
                }
                let prefix = key.trim_end_matches('/');
                let prefix = (!prefix.is_empty()).then(|| Path::from(prefix));
                let mut listing = store.list(prefix.as_ref());
                let mut found = Vec::new();
                while let Some(meta) = listing.try_next().await.map_err(|e| describe(&e))? {
                    if found.len() == MAX_OBJECTS {
                        return Err(InputError::TooManyObjects { url: url.to_string(), max: MAX_OBJECTS });
                    }
                    let key = meta.location.to_string();
                    // Hidden below what was named, as a folder's files are: `_SUCCESS`,
                    // `.crc`, and whatever lies under `_temporary/` (uncommitted parts).
                    let below = prefix.as_ref().map_or(key.as_str(), |p| {
                        key.strip_prefix(p.as_ref()).unwrap_or(&key).trim_start_matches('/')
                    });
                    if below.split('/').any(|part| part.starts_with(['.', '_'])) {
                        continue;
                    }
                    let options =
                        glob::MatchOptions { require_literal_separator: true, ..Default::default() };
                    if pattern.as_ref().is_some_and(|p| !p.matches_with(&key, options)) {
                        continue;
                    }
                    found.push((Source::S3 { bucket: bucket.clone(), key }, meta.size));
                }
                if found.is_empty() {
                    return Err(InputError::NotFound);
                }
                found.sort();
                Ok(found)
            }
            InputUrl::Http(url) => {
                let (store, path) = self.http(url)?;
                let meta = store.head(&path).await.map_err(|e| describe(&e))?;
                if meta.size == 0 {
                    return Ok(vec![(Source::Http(url.clone()), 0)]);
                }
                // A server that ignores byte ranges gives only whole reads: one task
                // reads it, start to end. One that does not answer the probe in time is
                // taken at its word (HEAD answered); its tasks' reads meet their deadline.
                let probe = tokio::time::timeout(RANGE_PROBE_WAIT, store.get_range(&path, 0..1)).await;
                match probe {
                    Ok(Err(object_store::Error::NotSupported { .. })) => {
                        Ok(vec![(Source::HttpWhole(url.clone()), meta.size)])
                    }
                    Ok(Err(e)) => Err(describe(&e)),
                    Ok(Ok(_)) | Err(_) => Ok(vec![(Source::Http(url.clone()), meta.size)]),
                }
            }
            other => Err(InputError::NotAnObject(other.to_string())),
        }
    }

    /// `len` bytes of an object from `offset`.
    pub async fn read(
        &self,
        source: &Source,
        offset: u64,
        len: u64,
        tokens: &[Token],
    ) -> Result<Vec<u8>, InputError> {
        let (store, path) = match source {
            Source::S3 { bucket, key } => (self.s3(bucket, tokens)?, Path::from(key.as_str())),
            Source::Http(url) => self.http(url)?,
            other => return Err(InputError::NotAnObject(other.to_string())),
        };
        let bytes = store.get_range(&path, offset..offset + len).await.map_err(|e| describe(&e))?;
        if bytes.len() as u64 != len {
            return Err(InputError::Changed { offset, len, got: bytes.len() as u64 });
        }
        Ok(bytes.to_vec())
    }

    /// A URL whose server answers only whole GETs, read from its start as the reader
    /// asks for the next bytes.
    pub fn whole(&self, url: &str) -> Result<WholeRead, InputError> {
        let (store, path) = self.http(url)?;
        Ok(WholeRead { store, path, body: None, held: bytes::Bytes::new(), at: 0 })
    }

    pub(crate) fn s3(&self, bucket: &str, tokens: &[Token]) -> Result<Arc<dyn ObjectStore>, InputError> {
        let token = tokens
            .iter()
            .find(|t| t.service == S3_SERVICE && t.job.is_none())
            .ok_or(InputError::NoS3Token { service: S3_SERVICE })?;
        // Keyed by a digest of the credentials, so a renewed token makes a new client.
        let key = format!("s3 {bucket} {}", hex::encode(Sha256::digest(token.secret.as_bytes())));
        self.cached(key, || {
            let creds: S3Credentials = serde_json::from_str(&token.secret)
                .map_err(|_| InputError::NotS3Credentials { service: S3_SERVICE })?;
            let mut builder = AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_region(&self.settings.s3_region)
                .with_access_key_id(creds.access_key_id)
                .with_secret_access_key(creds.secret_access_key)
                .with_allow_http(self.settings.allow_http)
                .with_client_options(self.client_options())
                .with_retry(retry());
            if let Some(token) = creds.session_token {
                builder = builder.with_token(token);
            }
            if let Some(endpoint) = &self.settings.s3_endpoint {
                builder = builder.with_endpoint(endpoint);
            }
            Ok(Arc::new(builder.build().map_err(|e| describe(&e))?))
        })
    }

    fn http(&self, url: &str) -> Result<(Arc<dyn ObjectStore>, Path), InputError> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| InputError::NoFile(url.to_owned()))?;
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err(InputError::NoFile(url.to_owned()));
        }
        crate::guard::check_host(host)?;
        let origin = format!("{scheme}://{host}");
        let path = Path::from_url_path(path).map_err(|e| InputError::Store(e.to_string()))?;
        let store = self.cached(format!("http {origin}"), || {
            let store = HttpBuilder::new()
                .with_url(&origin)
                .with_client_options(self.client_options())
                .with_http_connector(crate::guard::GuardedConnector { allow_http: self.settings.allow_http })
                .with_retry(retry())
                .build()
                .map_err(|e| describe(&e))?;
            Ok(Arc::new(store))
        })?;
        Ok((store, path))
    }

    fn cached(
        &self,
        key: String,
        make: impl FnOnce() -> Result<Arc<dyn ObjectStore>, InputError>,
    ) -> Result<Arc<dyn ObjectStore>, InputError> {
        let mut stores = self.stores.lock().expect("stores lock");
        if let Some(store) = stores.get(&key) {
            return Ok(store.clone());
        }
        let store = make()?;
        if stores.len() >= MAX_STORES {
            stores.clear();
        }
        stores.insert(key, store.clone());
        Ok(store)
    }

    fn client_options(&self) -> ClientOptions {
        ClientOptions::new()
            .with_allow_http(self.settings.allow_http)
            .with_connect_timeout(Duration::from_secs(10))
            .with_timeout(Duration::from_secs(60))
    }
}

/// How long planning waits for a server to answer its one-byte range probe.
const RANGE_PROBE_WAIT: Duration = Duration::from_secs(5);

/// A few quick retries: a read that keeps failing fails its task, which is retried
/// elsewhere, rather than holding its slot for minutes.
fn retry() -> RetryConfig {
    RetryConfig { max_retries: 3, retry_timeout: Duration::from_secs(20), ..RetryConfig::default() }
}

/// An object store's error with the causes under it (a refused redirect says why only
/// there), cut to a bounded length: it may quote a server's answer.
pub(crate) fn describe(e: &object_store::Error) -> InputError {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = c.source();
    }
    let text = flint_proto::failure::head(&text, 1024);
    match e {
        object_store::Error::NotSupported { .. } => InputError::Unsupported(text),
        _ => InputError::Store(text),
    }
}

/// One GET of a whole object, read in order: what a server without byte ranges gives.
pub struct WholeRead {
    store: Arc<dyn ObjectStore>,
    path: Path,
    body: Option<futures::stream::BoxStream<'static, object_store::Result<bytes::Bytes>>>,
    /// Bytes received and not yet read, starting at `at`.
    held: bytes::Bytes,
    at: u64,
}

impl WholeRead {
    /// The `len` bytes at `offset`, which must be where the last read ended: the body
    /// comes once, in order.
    pub async fn read(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, InputError> {
        if offset != self.at {
            return Err(InputError::Store(format!(
                "a whole read was asked for bytes at {offset} after {}: it reads only in order",
                self.at
            )));
        }
        if self.body.is_none() {
            let got = self.store.get(&self.path).await.map_err(|e| describe(&e))?;
            self.body = Some(got.into_stream());
        }
        let body = self.body.as_mut().expect("the body was just asked for");
        let mut out = Vec::with_capacity(len as usize);
        while (out.len() as u64) < len {
            if self.held.is_empty() {
                match body.try_next().await.map_err(|e| describe(&e))? {
                    Some(chunk) => self.held = chunk,
                    None => {
                        let got = out.len() as u64;
                        return Err(InputError::Changed { offset, len, got });
                    }
                }
            }
            let take = (len as usize - out.len()).min(self.held.len());
            out.extend_from_slice(&self.held.split_to(take));
        }
        self.at += len;
        Ok(out)
    }
}
