//! The object-storage backend (cargo feature `s3`): a mount whose physical side is
//! `s3://bucket[/prefix]` (or `memory://name[/prefix]`, an in-process store for tests and
//! demos, shared by every mount of that name in the process).
//!
//! Object stores have no links, no hard links, no special files and no nested mounts, so
//! resolution is routing plus key construction; what this module adds is the mapping of each
//! operation onto the store's own primitives (ranged GETs, delimiter listings, conditional
//! puts) behind a small synchronous facade. The store is driven by a private tokio runtime, and
//! every future runs there, so the facade works from any thread, inside or outside an async
//! runtime. Bucket, endpoint and prefix are physical information: they appear in
//! [`ObjectRoot::spellings`] for the scrub and never in an error text.

use std::future::Future;
use std::io::{self, Read, Seek, SeekFrom};
use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt as _;
use object_store::path::Path as Key;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, UpdateVersion,
};

use crate::registry::ConfigError;
use crate::spec::MountSpec;

/// The in-process store named `name`: every `memory://name` mount in this process shares it,
/// as every `s3://bucket` mount shares the bucket (so a test can fill a store through one
/// registry and serve it through another). It lives as long as the process.
fn memory_store(name: &str) -> Arc<dyn ObjectStore> {
    static STORES: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, Arc<dyn ObjectStore>>>> =
        std::sync::OnceLock::new();
    let mut stores = STORES.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let store = stores.entry(name.to_owned()).or_insert_with(|| Arc::new(object_store::memory::InMemory::new()));
    Arc::clone(store)
}

/// What an object operation failed with, before it is described to an agent.
#[derive(Debug)]
pub(crate) enum StoreError {
    NotFound,
    AlreadyExists,
    /// A conditional put lost against another writer.
    Precondition,
    /// Anything else (network, throttling after retries, permissions): kept for the operator
    /// log, never shown to an agent because its text names the bucket and endpoint.
    Other(object_store::Error),
}

impl From<object_store::Error> for StoreError {
    fn from(error: object_store::Error) -> Self {
        match error {
            object_store::Error::NotFound { .. } => StoreError::NotFound,
            object_store::Error::AlreadyExists { .. } => StoreError::AlreadyExists,
            object_store::Error::Precondition { .. } | object_store::Error::NotModified { .. } => {
                StoreError::Precondition
            }
            other => StoreError::Other(other),
        }
    }
}

/// Metadata of one object.
#[derive(Debug, Clone)]
pub(crate) struct ObjectInfo {
    pub(crate) size: u64,
    pub(crate) modified: i64,
    pub(crate) etag: Option<String>,
}

impl ObjectInfo {
    fn from_meta(meta: &object_store::ObjectMeta) -> Self {
        Self { size: meta.size, modified: meta.last_modified.timestamp(), etag: meta.e_tag.clone() }
    }

    /// The opaque version token agents see: the `ETag` without its quotes.
    pub(crate) fn token(&self) -> Option<String> {
        self.etag.as_ref().map(|etag| etag.trim_matches('"').to_owned())
    }
}

/// When a put may replace an existing object.
pub(crate) enum PutWhen {
    /// Only if nothing is there (create-if-absent).
    Absent,
    /// Whatever is there.
    Always,
    /// Only if the current version is this token.
    Version(String),
}

/// An object-store mount.
pub(crate) struct ObjectRoot {
    store: Arc<dyn ObjectStore>,
    prefix: Vec<String>,
    runtime: Arc<tokio::runtime::Runtime>,
    spellings: Vec<String>,
}

fn config_error(spec: &MountSpec, reason: impl Into<String>) -> ConfigError {
    ConfigError::Store {
        root: spec.root().as_str().to_owned(),
        physical: spec.physical().to_owned(),
        reason: reason.into(),
    }
}

impl ObjectRoot {
    /// Builds the store client for `s3://bucket[/prefix]` (credentials, region and endpoint
    /// from the standard `AWS_*` variables) or `memory://name`, and checks that it answers.
    pub(crate) fn open(spec: &MountSpec) -> Result<Self, ConfigError> {
        let physical = spec.physical();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("vfs-object-store")
            .enable_all()
            .build()
            .map_err(|error| config_error(spec, format!("cannot start the object-store runtime: {error}")))?;
        // Mount strings were checked when parsed; a spec built in code is checked here.
        let location = match crate::spec::object_location(physical) {
            Ok(Some(location)) => location,
            Ok(None) => return Err(config_error(spec, "not an object-storage URL")),
            Err(rule) => return Err(config_error(spec, format!("{rule}; write it as `s3://bucket/prefix`"))),
        };
        let (scheme, bucket) = (location.scheme, location.bucket);
        let prefix: Vec<String> = location.prefix.iter().map(|&part| part.to_owned()).collect();
        let mut spellings = vec![physical.trim_end_matches('/').to_owned(), format!("{scheme}://{bucket}")];
        let store: Arc<dyn ObjectStore> = if scheme == "memory" {
            memory_store(bucket)
        } else {
            {
                let retry = object_store::RetryConfig {
                    backoff: object_store::BackoffConfig::default(),
                    max_retries: 3,
                    retry_timeout: Duration::from_secs(20),
                };
                // `with_client_options` replaces what `from_env` read, so carry AWS_ALLOW_HTTP over.
                let allow_http = std::env::var("AWS_ALLOW_HTTP").is_ok_and(|value| value == "true" || value == "1");
                let options = object_store::ClientOptions::new()
                    .with_timeout(Duration::from_secs(15))
                    .with_connect_timeout(Duration::from_secs(5))
                    .with_allow_http(allow_http);
                // TLS through rustls with `ring`; a provider the process already chose stays.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let builder = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_retry(retry)
                    .with_client_options(options);
                if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") {
                    spellings.push(endpoint.trim_end_matches('/').to_owned());
                }
                let store = builder
                    .build()
                    .map_err(|_| config_error(spec, "cannot configure the S3 client; check the AWS_* variables"))?;
                Arc::new(store)
            }
        };
        let root = Self { store, prefix, runtime: Arc::new(runtime), spellings };
        root.check().map_err(|reason| config_error(spec, reason))?;
        Ok(root)
    }

    /// Lists the prefix once: proves the endpoint answers and the credentials are accepted.
    fn check(&self) -> Result<(), String> {
        let store = self.store.clone();
        let prefix = self.key(&[] as &[&str]);
        match self.block(async move { store.list_with_delimiter(Some(&prefix)).await }) {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => {
                Err("the bucket does not exist or cannot be listed; create it or fix the name".to_owned())
            }
            // S3 answers a missing bucket with a generic error carrying `NoSuchBucket`.
            Err(error) if error.to_string().contains("NoSuchBucket") => {
                Err("the bucket does not exist; create it or fix the name".to_owned())
            }
            Err(object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }) => {
                Err("the credentials were refused; check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".to_owned())
            }
            Err(error) => {
                // One line for the operator: the store's first line of error text, no XML body.
                let detail = error.to_string();
                let detail = detail.lines().next().unwrap_or_default().trim();
                Err(format!(
                    "the object store did not answer; check AWS_ENDPOINT_URL, AWS_REGION and the network ({detail})"
                ))
            }
        }
    }

    /// The physical spellings the scrub must know: the URL, the bucket's URL and the
    /// endpoint. Never the bare bucket name: a bucket called `data` is also a word, and
    /// `/data/x` must not turn into `/[redacted]/x`.
    pub(crate) fn spellings(&self) -> &[String] {
        &self.spellings
    }

    /// Runs a future on the store's own runtime and waits for it, from any thread.
    fn block<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> T {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = sender.send(future.await);
        });
        receiver.recv().expect("the object-store runtime runs every task it is given")
    }

    /// The object key for a mount-relative path.
    pub(crate) fn key(&self, rel: &[impl AsRef<str>]) -> Key {
        self.prefix.iter().map(String::as_str).chain(rel.iter().map(AsRef::as_ref)).collect()
    }

    /// Metadata of the object at `rel`, or `None`.
    pub(crate) fn head(&self, rel: &[String]) -> Result<Option<ObjectInfo>, StoreError> {
        if rel.is_empty() {
            return Ok(None);
        }
        let store = self.store.clone();
        let key = self.key(rel);
        match self.block(async move { store.head(&key).await }) {
            Ok(meta) => Ok(Some(ObjectInfo::from_meta(&meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// True when some object lies below `rel` (a "directory" is a prefix).
    pub(crate) fn is_directory(&self, rel: &[String]) -> Result<bool, StoreError> {
        if rel.is_empty() {
            return Ok(true);
        }
        let (directories, files) = self.list_directory(rel)?;
        Ok(!directories.is_empty() || !files.is_empty())
    }

    /// Bytes `range` of the object.
    /// Bytes `range` of the object, only if it is still the version `etag` names (when given).
    fn get_range(&self, key: Key, range: std::ops::Range<u64>, etag: Option<String>) -> Result<Vec<u8>, StoreError> {
        let store = self.store.clone();
        let result = self.block(async move {
            let options = GetOptions { range: Some(GetRange::Bounded(range)), if_match: etag, ..GetOptions::default() };
            let result = store.get_opts(&key, options).await?;
            result.bytes().await
        });
        Ok(result?.to_vec())
    }

    /// The object's first `count` bytes (all of it when it is smaller) and its metadata, in one
    /// GET, or `None` when there is no object. The body is streamed and dropped once `count`
    /// bytes have arrived, so a large object costs a short transfer, and a small one no HEAD.
    /// With `whole_only`, an object of `count` bytes or more is not read at all (its body comes
    /// back empty): for callers that refuse anything over a cap.
    pub(crate) fn get_first(
        &self,
        rel: &[String],
        count: u64,
        whole_only: bool,
    ) -> Result<Option<(Vec<u8>, ObjectInfo)>, StoreError> {
        if rel.is_empty() {
            return Ok(None);
        }
        let store = self.store.clone();
        let key = self.key(rel);
        let result = self.block(async move {
            let result = match store.get(&key).await {
                Ok(result) => result,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(error) => return Err(error),
            };
            let info = ObjectInfo::from_meta(&result.meta);
            if whole_only && info.size >= count {
                return Ok(Some((Vec::new(), info)));
            }
            let wanted = usize::try_from(info.size.min(count)).unwrap_or(usize::MAX);
            let mut bytes = Vec::with_capacity(wanted);
            let mut stream = result.into_stream();
            while bytes.len() < wanted
                && let Some(chunk) = stream.try_next().await?
            {
                let take = chunk.len().min(wanted - bytes.len());
                bytes.extend_from_slice(&chunk[..take]);
            }
            Ok(Some((bytes, info)))
        })?;
        Ok(result)
    }

    /// A reader over the object that fetches 1 MiB ranges on demand, each pinned to the version
    /// `info` describes: an object replaced between two ranges fails the read as changed
    /// instead of stitching two versions together.
    pub(crate) fn reader(&self, rel: &[String], info: &ObjectInfo) -> ObjectReader<'_> {
        ObjectReader {
            root: self,
            key: self.key(rel),
            etag: info.etag.clone(),
            size: info.size,
            position: 0,
            buffer: Vec::new(),
            buffer_start: 0,
            window: WINDOW,
        }
    }

    /// Puts `bytes` at `rel` atomically, under the condition `when`. Returns the new version.
    pub(crate) fn put(&self, rel: &[String], bytes: Vec<u8>, when: PutWhen) -> Result<Option<String>, StoreError> {
        let store = self.store.clone();
        let key = self.key(rel);
        let mode = match when {
            PutWhen::Absent => PutMode::Create,
            PutWhen::Always => PutMode::Overwrite,
            PutWhen::Version(token) => {
                PutMode::Update(UpdateVersion { e_tag: Some(format!("\"{token}\"")), version: None })
            }
        };
        let result = self.block(async move {
            store.put_opts(&key, PutPayload::from(bytes), PutOptions { mode, ..PutOptions::default() }).await
        })?;
        Ok(result.e_tag.map(|etag| etag.trim_matches('"').to_owned()))
    }

    /// One level of a "directory": its sub-prefixes and its objects (name, metadata).
    #[expect(clippy::type_complexity, reason = "a private helper's result, used in two places")]
    pub(crate) fn list_directory(
        &self,
        rel: &[String],
    ) -> Result<(Vec<String>, Vec<(String, ObjectInfo)>), StoreError> {
        let store = self.store.clone();
        let key = self.key(rel);
        let prefix = if rel.is_empty() && self.prefix.is_empty() { None } else { Some(key) };
        let listing = self.block(async move { store.list_with_delimiter(prefix.as_ref()).await })?;
        let directories =
            listing.common_prefixes.iter().filter_map(|path| path.filename().map(str::to_owned)).collect();
        let files = listing
            .objects
            .iter()
            .filter_map(|meta| meta.location.filename().map(|name| (name.to_owned(), ObjectInfo::from_meta(meta))))
            .collect();
        Ok((directories, files))
    }

    /// Every object below `rel`, as paths relative to `rel`, at most `limit` of them (the flag
    /// says whether more exist).
    #[expect(clippy::type_complexity, reason = "a private helper's result, used in one place")]
    pub(crate) fn list_all(
        &self,
        rel: &[String],
        limit: usize,
    ) -> Result<(Vec<(Vec<String>, ObjectInfo)>, bool), StoreError> {
        let store = self.store.clone();
        let key = self.key(rel);
        let prefix = if rel.is_empty() && self.prefix.is_empty() { None } else { Some(key) };
        let skip = self.prefix.len() + rel.len();
        let metas = self.block(async move {
            let mut stream = store.list(prefix.as_ref());
            let mut metas = Vec::new();
            while let Some(meta) = stream.try_next().await? {
                if metas.len() > limit {
                    break;
                }
                metas.push(meta);
            }
            Ok::<_, object_store::Error>(metas)
        })?;
        let truncated = metas.len() > limit;
        let mut objects: Vec<(Vec<String>, ObjectInfo)> = metas
            .iter()
            .take(limit)
            .map(|meta| {
                let parts: Vec<String> =
                    meta.location.parts().skip(skip).map(|part| part.as_ref().to_owned()).collect();
                (parts, ObjectInfo::from_meta(meta))
            })
            .filter(|(parts, _)| !parts.is_empty())
            .collect();
        objects.sort_by(|left, right| left.0.cmp(&right.0));
        Ok((objects, truncated))
    }

    /// Copies one object; with `overwrite` false, fails if the destination exists.
    pub(crate) fn copy(&self, from: &[String], to: &[String], overwrite: bool) -> Result<(), StoreError> {
        let store = self.store.clone();
        let (from, to) = (self.key(from), self.key(to));
        self.block(async move {
            if overwrite {
                return store.copy(&from, &to).await;
            }
            match store.copy_if_not_exists(&from, &to).await {
                // Plain S3 has no copy-if-absent: check, then copy. A writer racing into the
                // gap between the two wins the name and is overwritten; documented.
                Err(object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. }) => {
                    match store.head(&to).await {
                        Ok(_) => Err(object_store::Error::AlreadyExists {
                            path: to.to_string(),
                            source: "the destination exists".into(),
                        }),
                        Err(object_store::Error::NotFound { .. }) => store.copy(&from, &to).await,
                        Err(error) => Err(error),
                    }
                }
                other => other,
            }
        })?;
        Ok(())
    }

    /// Deletes one object.
    pub(crate) fn delete(&self, rel: &[String]) -> Result<(), StoreError> {
        let store = self.store.clone();
        let key = self.key(rel);
        self.block(async move { store.delete(&key).await })?;
        Ok(())
    }
}

/// `Read + Seek` over an object, one ranged GET per 1 MiB window, so a line window deep in a
/// large object costs ranged requests and constant memory.
pub(crate) struct ObjectReader<'a> {
    root: &'a ObjectRoot,
    key: Key,
    etag: Option<String>,
    size: u64,
    position: u64,
    buffer: Vec<u8>,
    buffer_start: u64,
    window: u64,
}

const WINDOW: u64 = 1024 * 1024;
const MAX_WINDOW: u64 = 64 * 1024 * 1024;

impl Read for ObjectReader<'_> {
    fn read(&mut self, output: &mut [u8]) -> io::Result<usize> {
        if self.position >= self.size || output.is_empty() {
            return Ok(0);
        }
        let buffer_end = self.buffer_start + self.buffer.len() as u64;
        if self.position < self.buffer_start || self.position >= buffer_end {
            // Sequential reads double the range each time (1 MiB up to 64 MiB), so a whole
            // large object costs a handful of requests while a small window costs one.
            let sequential = self.position == buffer_end && !self.buffer.is_empty();
            self.window = if sequential { (self.window * 2).min(MAX_WINDOW) } else { WINDOW };
            let end = (self.position + self.window).min(self.size);
            self.buffer =
                self.root.get_range(self.key.clone(), self.position..end, self.etag.clone()).map_err(|error| {
                    match error {
                        StoreError::Precondition => io::Error::other(crate::error::ChangedDuringRead),
                        _ => io::Error::other("the object store failed to return a range"),
                    }
                })?;
            self.buffer_start = self.position;
            if self.buffer.is_empty() {
                return Ok(0);
            }
        }
        let offset = (self.position - self.buffer_start) as usize;
        let count = output.len().min(self.buffer.len() - offset);
        output[..count].copy_from_slice(&self.buffer[offset..offset + count]);
        self.position += count as u64;
        Ok(count)
    }
}

impl Seek for ObjectReader<'_> {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        let target = match position {
            SeekFrom::Start(offset) => i128::from(offset),
            SeekFrom::End(offset) => i128::from(self.size) + i128::from(offset),
            SeekFrom::Current(offset) => i128::from(self.position) + i128::from(offset),
        };
        let target =
            u64::try_from(target).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "seek before start"))?;
        self.position = target;
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that spans several ranged requests is pinned to the version it started on: an
    /// object replaced between two ranges fails the read as changed.
    #[test]
    fn a_read_across_ranges_fails_when_the_object_is_replaced_midway() {
        let spec: MountSpec = "memory://pinned-reads:/data:rw".parse().unwrap();
        let root = ObjectRoot::open(&spec).unwrap();
        let rel = vec!["big.txt".to_owned()];
        let first = vec![b'a'; 3 * WINDOW as usize];
        root.put(&rel, first, PutWhen::Always).unwrap();
        let info = root.head(&rel).unwrap().unwrap();
        let mut reader = root.reader(&rel, &info);
        let mut buffer = vec![0u8; WINDOW as usize];
        reader.read_exact(&mut buffer).unwrap();
        assert!(buffer.iter().all(|&byte| byte == b'a'));
        root.put(&rel, vec![b'b'; 3 * WINDOW as usize], PutWhen::Always).unwrap();
        let error = reader.read_exact(&mut buffer).unwrap_err();
        let path = crate::VirtualPath::new("/data/big.txt").unwrap();
        let error = crate::Error::io(&path, error);
        assert_eq!(error.kind(), crate::ErrorKind::Changed);
        assert_eq!(error.to_string(), "`/data/big.txt` changed while vfs was working on it; try again");
    }
}
