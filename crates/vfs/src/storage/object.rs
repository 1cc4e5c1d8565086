//! The object-storage backend (cargo feature `s3`): a mount whose physical side is
//! `s3://bucket[/prefix]` (or `memory://name[/prefix]`, an in-process store for tests and
//! demos, shared by every mount of that name in the process).
//!
//! Object stores have no links, no hard links, no special files and no nested mounts, so
//! resolution is routing plus key construction; what this module adds is the mapping of each
//! operation onto the store's own primitives (ranged GETs, delimiter listings, conditional
//! puts) behind a small synchronous facade. Every object mount of the process is driven by
//! one tokio runtime of this module's own ([`runtime`]), and every future runs there, so the
//! facade works from any thread, inside or outside an async runtime. The calling thread waits
//! for each request no longer than the call it works for may run ([`crate::budget::current`]):
//! a call out of time or cancelled gets the budget's error at once, and its request is
//! dropped. Bucket, endpoint and prefix are physical information: they appear in
//! [`ObjectRoot::spellings`] for the scrub and never in an error text.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{self, Read, Seek, SeekFrom};
use std::sync::Arc;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt as _;
use object_store::path::Path as Key;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, UpdateVersion,
};

use crate::error::Error;
use crate::mount::ConfigError;
use crate::path::VirtualPath;
use crate::spec::MountSpec;
use crate::storage::{
    Capabilities, Entry, Flow, Kind, MountTable, Opened, PutWhen, Reader, Stat, Visit, WalkFrom, Walked,
};
use crate::text::{agent_text, code};

/// What an object store can do: no links, no special files, no real directories (a directory
/// is a key prefix), no atomic rename (a move is a copy, then a delete), no appends.
pub(crate) const CAPABILITIES: Capabilities = Capabilities {
    links: false,
    hard_links: false,
    special_files: false,
    atomic_rename: false,
    directories: false,
    append: false,
    locks: false,
    identities: false,
    network: true,
};

/// Where a journal keeps the before images of a mount's objects, beneath the mount's prefix
/// (`ObjectRoot::keep_copy`): a name under the reserved prefix of vfs's own names, which no
/// listing shows and no agent path reaches ([`reserved`]).
pub(crate) const IMAGE_AREA: &str = ".vfs-tmp-journal";

/// True for a name vfs keeps for itself (`.vfs-tmp-…`): never listed, never named by an agent.
pub(crate) fn reserved(name: &str) -> bool {
    name.starts_with(crate::storage::local::TEMPORARY_PREFIX)
}

/// The in-process store named `name`: every `memory://name` mount in this process shares it,
/// as every `s3://bucket` mount shares the bucket (so a test can fill a store through one
/// registry and serve it through another). It lives as long as the process.
fn memory_store(name: &str) -> Arc<dyn ObjectStore> {
    let mut stores = memory_stores();
    let store = stores.entry(name.to_owned()).or_insert_with(|| Arc::new(object_store::memory::InMemory::new()));
    Arc::clone(store)
}

type MemoryStores = std::collections::HashMap<String, Arc<dyn ObjectStore>>;

/// The in-process stores by name.
fn memory_stores() -> std::sync::MutexGuard<'static, MemoryStores> {
    static STORES: std::sync::OnceLock<std::sync::Mutex<MemoryStores>> = std::sync::OnceLock::new();
    STORES.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Worker threads of the object stores' one runtime: the requests are waits on the network;
/// a second thread keeps one slow response (a long listing to parse) from holding the others.
const RUNTIME_THREADS: usize = 2;

/// How often a thread waiting on a request looks at its call's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// The runtime every object mount of the process runs its requests on, started by the first
/// mount opened (and never stopped: it lives as long as the process, as the stores do).
fn runtime() -> Result<&'static tokio::runtime::Runtime, String> {
    static RUNTIME: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(RUNTIME_THREADS)
                .thread_name("vfs-object-store")
                .enable_all()
                .build()
                .map_err(|error| format!("cannot start the object-store runtime: {error}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// What an object operation failed with, before it is described to an agent.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// The call ran out of time or was cancelled while it waited: the budget's own error.
    Stopped(Error),
    NotFound,
    AlreadyExists,
    /// A conditional put lost against another writer.
    Precondition,
    /// A key the store holds that vfs cannot name (an empty, `.` or `..` segment, a control
    /// character: what another tool may write), which stops a listing: kept for the operator
    /// log, which names it.
    BadKey(object_store::Error),
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
            error @ object_store::Error::InvalidPath { .. } => StoreError::BadKey(error),
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

/// An object-store mount.
pub(crate) struct ObjectRoot {
    store: Arc<dyn ObjectStore>,
    prefix: Vec<String>,
    runtime: &'static tokio::runtime::Runtime,
    spellings: Vec<String>,
    /// `scheme://bucket`: two mounts of one bucket can copy between each other.
    bucket: String,
    /// Whether an empty directory is written as a marker (`key/`): on S3; not in the memory
    /// store of tests, which lists such a key as a file with an empty name.
    markers: bool,
}

fn config_error(spec: &MountSpec, reason: impl Into<String>) -> ConfigError {
    ConfigError::Store {
        root: spec.root().as_str().to_owned(),
        physical: spec.physical().to_owned(),
        reason: reason.into(),
    }
}

impl ObjectRoot {
    /// `scheme://bucket`, then the prefix's segments.
    pub(crate) fn tree_base(&self) -> Vec<String> {
        std::iter::once(self.bucket.clone()).chain(self.prefix.iter().cloned()).collect()
    }

    /// Builds the store client for `s3://bucket[/prefix]` (credentials, region and endpoint
    /// from the standard `AWS_*` variables) or `memory://name`, and checks that it answers.
    pub(crate) fn open(spec: &MountSpec) -> Result<Self, ConfigError> {
        let physical = spec.physical();
        let runtime = runtime().map_err(|reason| config_error(spec, reason))?;
        // Mount strings were checked when parsed; a spec built in code is checked here.
        let location = match spec.checked_location() {
            Ok(crate::spec::Location::Object(location)) => location,
            Ok(_) => return Err(config_error(spec, "not an object-storage URL")),
            Err(rule) => return Err(config_error(spec, format!("{rule}; write it as `s3://bucket/prefix`"))),
        };
        let (scheme, bucket) = (location.scheme().as_str(), location.bucket());
        let prefix: Vec<String> = location.prefix().to_vec();
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
        let markers = scheme != "memory";
        let root = Self { store, prefix, runtime, spellings, bucket: format!("{scheme}://{bucket}"), markers };
        root.check().map_err(|reason| config_error(spec, reason))?;
        Ok(root)
    }

    /// Lists the prefix once: proves the endpoint answers and the credentials are accepted.
    fn check(&self) -> Result<(), String> {
        let store = self.store.clone();
        let prefix = self.key(&[] as &[&str]);
        let listed = match self.block(async move { store.list_with_delimiter(Some(&prefix)).await }) {
            Ok(listed) => listed,
            Err(error) => return Err(format!("the check of the object store was stopped ({error:?})")),
        };
        match listed {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => {
                Err("the bucket does not exist or cannot be listed; create it or fix the name".to_owned())
            }
            // S3 answers a missing bucket with a generic error carrying `NoSuchBucket`.
            Err(error) if error.to_string().contains("NoSuchBucket") => {
                Err("the bucket does not exist; create it or fix the name".to_owned())
            }
            Err(error @ object_store::Error::InvalidPath { .. }) => Err(format!(
                "it holds a key vfs cannot name, with an empty, `.` or `..` segment or a control character ({}); rename or remove that object",
                crate::text::escape_controls(error.to_string().lines().next().unwrap_or_default().trim())
            )),
            Err(object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }) => {
                Err("the credentials were refused; check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".to_owned())
            }
            Err(error) => {
                // One line for the operator: the store's first line of error text, no XML body.
                let detail = error.to_string();
                let detail = crate::text::escape_controls(detail.lines().next().unwrap_or_default().trim());
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

    /// Runs a future on the object stores' runtime and waits for it, from any thread, no
    /// longer than the call the thread works for may run: once that call is out of time or
    /// cancelled (looked at every [`CANCEL_POLL`]), the request is dropped and the budget's
    /// error returned, as a local operation's clock check gives it.
    fn block<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> Result<T, StoreError> {
        let deadline = crate::budget::current().filter(|deadline| deadline.bounded());
        if let Some(deadline) = &deadline {
            deadline.check().map_err(StoreError::Stopped)?;
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let task = self.runtime.spawn(async move {
            let _ = sender.send(future.await);
        });
        let Some(deadline) = deadline else {
            return receiver.recv().map_err(|_| task_failed());
        };
        loop {
            let wait = deadline.at().map_or(CANCEL_POLL, |at| at.saturating_duration_since(Instant::now()));
            match receiver.recv_timeout(wait.min(CANCEL_POLL)) {
                Ok(value) => return Ok(value),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(error) = deadline.check() {
                        // An answer that came as the clock ran out is still the answer.
                        if let Ok(value) = receiver.try_recv() {
                            return Ok(value);
                        }
                        task.abort();
                        return Err(StoreError::Stopped(error));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(task_failed()),
            }
        }
    }

    /// Runs a request that changes the bucket (a put, a copy, a delete): the call's clock is
    /// looked at before it is sent, never after. A change the server may already have made is
    /// not cut off: its answer is waited for (within the object store's own request timeout),
    /// so a call is never told "stopped" about a change that happened, and every change made
    /// reaches the change feed.
    fn block_change<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, StoreError> {
        if let Some(deadline) = crate::budget::current().filter(|deadline| deadline.bounded()) {
            deadline.check().map_err(StoreError::Stopped)?;
        }
        self.finish_change(future)
    }

    /// Runs a request that changes the bucket and waits for its answer, whatever the call's
    /// clock says: the second half of a change whose first half was made (a move's delete of
    /// its source, once the copy is there).
    fn finish_change<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = sender.send(future.await);
        });
        receiver.recv().map_err(|_| task_failed())
    }

    /// What [`ObjectLock`] names for the place `rel`: the bucket and the key of the
    /// "directory" it is in (the mount's prefix for its root), which orders it among locks.
    pub(crate) fn lock_name(&self, rel: &[String]) -> String {
        let parent = rel.split_last().map_or(rel, |(_, parent)| parent);
        format!("{}\0{}", self.bucket, self.key(parent))
    }

    /// What a change at `rel` holds ([`ObjectLock`]): its "directory", alone; its own name,
    /// alone; and every name above it, shared. A name above is what [`ObjectRoot::below_a_file`]
    /// asks about, and what a change one "directory" up would make a file of: a write of `d/x`
    /// beside a write of `d/x/y` holds `d/x` alone where the other shares it, so the two are
    /// never checked at once and both made (a key that is a file and a prefix).
    pub(crate) fn lock_claims(&self, rel: &[String]) -> Vec<Claim> {
        let name = |rel: &[String]| format!("{}\0{}", self.bucket, self.key(rel));
        let mut claims = vec![Claim { name: format!("dir\0{}", self.lock_name(rel)), alone: true }];
        if !rel.is_empty() {
            claims.push(Claim { name: format!("name\0{}", name(rel)), alone: true });
        }
        claims
            .extend((1..rel.len()).map(|above| Claim { name: format!("name\0{}", name(&rel[..above])), alone: false }));
        claims
    }

    /// The object key for a mount-relative path: its names as they are. A listing gives each
    /// key as the store holds it, so a name is never encoded on the way in: the client's
    /// default (`PathPart::from`) would store `new?x` as `new%3Fx`, listed under that name and
    /// not found under either, and would not find `q?mark` another tool wrote. A virtual
    /// path's names are valid parts (no control character, no `/`, never `.` or `..`); one
    /// that were not would be encoded, as before.
    pub(crate) fn key(&self, rel: &[impl AsRef<str>]) -> Key {
        self.prefix
            .iter()
            .map(String::as_str)
            .chain(rel.iter().map(AsRef::as_ref))
            .map(|name| object_store::path::PathPart::parse(name).unwrap_or_else(|_| name.into()))
            .collect()
    }

    /// Metadata of the object at `rel`, or `None`.
    fn head_object(&self, rel: &[String]) -> Result<Option<ObjectInfo>, StoreError> {
        if rel.is_empty() {
            return Ok(None);
        }
        let store = self.store.clone();
        let key = self.key(rel);
        match self.block(async move { store.head(&key).await })? {
            Ok(meta) => Ok(Some(ObjectInfo::from_meta(&meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// True when some object lies below `rel` (a "directory" is a prefix).
    fn has_prefix(&self, rel: &[String]) -> Result<bool, StoreError> {
        if rel.is_empty() {
            return Ok(true);
        }
        let (directories, files, marked) = self.list_level(rel)?;
        Ok(marked || !directories.is_empty() || !files.is_empty())
    }

    /// The key of the directory marker of `rel` (`key/`), the empty object other tools (the
    /// AWS console's "Create folder", `s3fs`, many sync tools) write to make a "directory"
    /// that holds nothing yet. The client gives it without its `/` in every listing.
    fn marker_key(&self, rel: &[String]) -> Option<Key> {
        let key = self.key(rel);
        (!key.as_ref().is_empty()).then(|| key.join(""))
    }

    /// Bytes `range` of the object, only if it is still the version `etag` names (when given).
    fn get_range(&self, key: Key, range: std::ops::Range<u64>, etag: Option<String>) -> Result<Vec<u8>, StoreError> {
        let store = self.store.clone();
        let result = self.block(async move {
            let options = GetOptions { range: Some(GetRange::Bounded(range)), if_match: etag, ..GetOptions::default() };
            let result = store.get_opts(&key, options).await?;
            result.bytes().await
        })?;
        Ok(result?.to_vec())
    }

    /// The object's first `count` bytes (all of it when it is smaller) and its metadata, in one
    /// GET, or `None` when there is no object. The body is streamed and dropped once `count`
    /// bytes have arrived, so a large object costs a short transfer, and a small one no HEAD.
    /// With `whole_only`, an object of `count` bytes or more is not read at all (its body comes
    /// back empty): for callers that refuse anything over a cap.
    fn get_first(
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
        })??;
        Ok(result)
    }

    /// A reader over the object that fetches 1 MiB ranges on demand, each pinned to the version
    /// `info` describes: an object replaced between two ranges fails the read as changed
    /// instead of stitching two versions together.
    fn reader(&self, rel: &[String], info: &ObjectInfo) -> ObjectReader<'_> {
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
    fn put_object(&self, rel: &[String], bytes: Vec<u8>, when: &PutWhen) -> Result<Option<String>, StoreError> {
        let store = self.store.clone();
        let key = self.key(rel);
        self.made_object(&key);
        let mode = match when {
            PutWhen::Absent => PutMode::Create,
            PutWhen::Any => PutMode::Overwrite,
            // A version no object has, since a store's are entity tags of visible ASCII: one
            // that cannot be sent in a header either (an agent's `expectedVersion` holding a
            // line break made the client panic) loses without a request.
            PutWhen::Version(token) if !entity_tag(token) => return Err(StoreError::Precondition),
            PutWhen::Version(token) => {
                PutMode::Update(UpdateVersion { e_tag: Some(format!("\"{token}\"")), version: None })
            }
        };
        let result = self.block_change(async move {
            store.put_opts(&key, PutPayload::from(bytes), PutOptions { mode, ..PutOptions::default() }).await
        })??;
        Ok(result.e_tag.map(|etag| etag.trim_matches('"').to_owned()))
    }

    /// One level of a "directory": its sub-prefixes, its objects (name, metadata), and
    /// whether it has a directory marker ([`ObjectRoot::marker_key`]), which is not one of
    /// its files (the client lists `key/` as `key`, the directory's own name).
    #[expect(clippy::type_complexity, reason = "a private helper's result, used in two places")]
    fn list_level(&self, rel: &[String]) -> Result<(Vec<String>, Vec<(String, ObjectInfo)>, bool), StoreError> {
        let store = self.store.clone();
        let key = self.key(rel);
        let prefix = if rel.is_empty() && self.prefix.is_empty() { None } else { Some(key) };
        let own = prefix.clone();
        let mut listing = self.block(async move { store.list_with_delimiter(prefix.as_ref()).await })??;
        let before = listing.objects.len();
        listing.objects.retain(|meta| Some(&meta.location) != own.as_ref());
        let marked = listing.objects.len() < before;
        let directories = listing
            .common_prefixes
            .iter()
            .filter_map(|path| path.filename().filter(|name| !reserved(name)).map(str::to_owned))
            .collect();
        let files = listing
            .objects
            .iter()
            .filter_map(|meta| {
                let name = meta.location.filename().filter(|name| !reserved(name))?;
                Some((name.to_owned(), ObjectInfo::from_meta(meta)))
            })
            .collect();
        Ok((directories, files, marked))
    }

    /// Every object below `rel`, as paths relative to `rel`, at most `limit` of them, told
    /// apart from directory markers ([`ObjectRoot::marker_key`]; the flag says whether more
    /// exist).
    fn list_all(&self, rel: &[String], limit: usize) -> Result<(Below, bool), StoreError> {
        let (listed, truncated) = self.list_keys(rel, limit)?;
        Ok((self.tell_markers(rel, &listed)?, truncated))
    }

    /// Tells files from directory markers among `listed` (paths relative to `rel`, in order).
    /// A listing gives a marker `key/` as `key`, so a name listed once that is empty or has
    /// objects below it may be either, and the store is asked: a HEAD of the name without the
    /// `/` (sent together in groups), or, for a directory holding more such names than pages
    /// of entries, one listing of that directory, whose sub-prefixes are the markers. A name
    /// listed twice is a file (first) and a marker. A file with objects below it (a key
    /// another tool made both) stays a file, beside the directory: a recursive delete judges
    /// it, and keeps its image, as any other.
    fn tell_markers(&self, rel: &[String], listed: &[(Vec<String>, ObjectInfo)]) -> Result<Below, StoreError> {
        let above: std::collections::HashSet<&[String]> =
            listed.iter().flat_map(|(parts, _)| (1..parts.len()).map(|end| &parts[..end])).collect();
        let mut below = Below::default();
        // The names to ask about, by their directory, with how many objects it holds.
        let mut asked: BTreeMap<&[String], Asked<'_>> = BTreeMap::new();
        let mut previous: Option<&[String]> = None;
        for (parts, info) in listed {
            let twice = previous == Some(parts.as_slice());
            previous = Some(parts);
            let directory = &parts[..parts.len().saturating_sub(1)];
            let entry = asked.entry(directory).or_default();
            entry.1 += 1;
            if twice {
                below.markers.push(parts.clone());
            } else if info.size == 0 || above.contains(parts.as_slice()) {
                entry.0.push((parts, info));
            } else {
                below.files.push((parts.clone(), info.clone()));
            }
        }
        let mut heads = Vec::new();
        for (directory, (names, objects)) in asked {
            if names.len() <= objects / LISTING_PAGE + 1 {
                heads.extend(names);
                continue;
            }
            let (_, files, _) = self.list_level(&[rel, directory].concat())?;
            let files: std::collections::HashSet<String> = files.into_iter().map(|(name, _)| name).collect();
            for (parts, info) in names {
                if parts.last().is_some_and(|name| files.contains(name)) {
                    below.files.push((parts.clone(), info.clone()));
                } else {
                    below.markers.push(parts.clone());
                }
            }
        }
        for group in heads.chunks(MARKER_HEADS_AT_ONCE) {
            let store = self.store.clone();
            let keys: Vec<Key> = group.iter().map(|(parts, _)| self.key(&[rel, parts.as_slice()].concat())).collect();
            let answers = self
                .block(async move { futures_util::future::join_all(keys.iter().map(|key| store.head(key))).await })?;
            for ((parts, info), answer) in group.iter().zip(answers) {
                match answer {
                    Ok(_) => below.files.push(((*parts).clone(), (*info).clone())),
                    Err(object_store::Error::NotFound { .. }) => below.markers.push((*parts).clone()),
                    Err(error) => return Err(error.into()),
                }
            }
        }
        below.files.sort_by(|left, right| left.0.cmp(&right.0));
        below.files.dedup_by(|later, first| later.0 == first.0);
        Ok(below)
    }

    /// Every key below `rel`, as paths relative to `rel`, at most `limit` of them (the flag
    /// says whether more exist), in key order; a directory marker is listed under its
    /// directory's name.
    #[expect(clippy::type_complexity, reason = "a private helper's result, used in one place")]
    fn list_keys(&self, rel: &[String], limit: usize) -> Result<(Vec<(Vec<String>, ObjectInfo)>, bool), StoreError> {
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
                // vfs's own keys are skipped before they are counted: a journal's images
                // (which sort first) never use up a walk's bound.
                if meta.location.parts().skip(skip).any(|part| reserved(part.as_ref())) {
                    continue;
                }
                metas.push(meta);
            }
            Ok::<_, object_store::Error>(metas)
        })??;
        let truncated = metas.len() > limit;
        let mut objects: Vec<(Vec<String>, ObjectInfo)> = metas
            .iter()
            .take(limit)
            .map(|meta| {
                let parts: Vec<String> =
                    meta.location.parts().skip(skip).map(|part| part.as_ref().to_owned()).collect();
                (parts, ObjectInfo::from_meta(meta))
            })
            .filter(|(parts, _)| !parts.is_empty() && !parts.iter().any(|part| reserved(part)))
            .collect();
        objects.sort_by(|left, right| left.0.cmp(&right.0));
        Ok((objects, truncated))
    }

    /// Writes the directory marker of `rel` (empty; over one that is there), where the store
    /// keeps markers.
    fn put_marker(&self, rel: &[String]) -> Result<(), StoreError> {
        let Some(key) = self.marker_key(rel).filter(|_| self.markers) else { return Ok(()) };
        let store = self.store.clone();
        self.block_change(async move { store.put(&key, PutPayload::new()).await })??;
        Ok(())
    }

    /// Deletes the directory marker of `rel`, if there is one (a delete of a key that is not
    /// there succeeds).
    fn delete_marker(&self, rel: &[String]) -> Result<(), StoreError> {
        let Some(key) = self.marker_key(rel) else { return Ok(()) };
        let store = self.store.clone();
        self.block_change(async move { store.delete(&key).await })??;
        Ok(())
    }

    /// Copies one object; with `overwrite` false, fails if the destination exists.
    fn copy_keys(&self, from: Key, to: Key, overwrite: bool) -> Result<(), StoreError> {
        self.made_object(&to);
        let store = self.store.clone();
        self.block_change(async move {
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
        })??;
        Ok(())
    }

    /// Keeps the before image of the object at `node` by a copy the store makes itself (a
    /// server-side copy: no byte passes through vfs) into this mount's image area, as `name`.
    /// Returns the object's size (`size`, when the caller has just asked the store, else what
    /// a listing said, else a HEAD's); `None` when it is not kept so (the caller reads it
    /// instead): it is gone, or the copy failed. Above `cap` it is not copied (an undo could
    /// not write it back), and the size says so.
    pub(crate) fn keep_copy(&self, node: &Node, size: Option<u64>, name: &str, cap: u64) -> Option<u64> {
        let size = match (size, &node.listed) {
            (_, Some(Listed::Directory(_))) => return None,
            (Some(size), _) => size,
            (None, Some(Listed::File(info))) => info.size,
            (None, None) => self.head_object(&node.rel).ok()??.size,
        };
        if size > cap {
            return Some(size);
        }
        self.copy_keys(self.key(&node.rel), self.key(&[IMAGE_AREA, name]), true).ok()?;
        Some(size)
    }

    /// The bytes of the image `name` in this mount's image area, at most `cap` of them.
    pub(crate) fn read_image(&self, name: &str, cap: u64, path: &VirtualPath) -> Result<Vec<u8>, Error> {
        let rel = [IMAGE_AREA.to_owned(), name.to_owned()];
        match self.get_first(&rel, cap.saturating_add(1), true).map_err(|error| store_error(path, error))? {
            Some((bytes, info)) if info.size <= cap => Ok(bytes),
            Some(_) => Err(Error::too_large(Some(path), agent_text!["the image is larger than the write cap"])),
            None => Err(Error::not_found(path)),
        }
    }

    /// The names of the images in this mount's image area (at `path`) that begin with
    /// `start`, at most `limit` of them, listed until `until`; and why the listing stopped
    /// short, when it did (the names listed before are still given: each is one that lies
    /// there).
    pub(crate) fn image_names(
        &self,
        start: &str,
        limit: usize,
        until: Instant,
        path: &VirtualPath,
    ) -> (Vec<String>, Option<Error>) {
        let store = self.store.clone();
        let area = self.key(&[IMAGE_AREA]);
        // Listed from where the names begin with `start` (a store lists in key order), and
        // only until they no longer do: other holders' images are not walked.
        let offset = self.key(&[IMAGE_AREA, start]);
        let start = start.to_owned();
        let listed = self.finish_change(async move {
            let mut stream = store.list_with_offset(Some(&area), &offset);
            let mut names = Vec::new();
            let until = tokio::time::Instant::from_std(until);
            while names.len() < limit {
                let meta = match tokio::time::timeout_at(until, stream.try_next()).await {
                    Ok(Ok(Some(meta))) => meta,
                    Ok(Ok(None)) => break,
                    Ok(Err(error)) => return (names, Some(error)),
                    Err(_) => return (names, Some(out_of_time("the listing of the image area"))),
                };
                match meta.location.filename() {
                    Some(name) if name.starts_with(start.as_str()) => names.push(name.to_owned()),
                    _ => break,
                }
            }
            (names, None)
        });
        let (names, stopped) = listed
            .map_or_else(|error| (Vec::new(), Some(error)), |(names, stopped)| (names, stopped.map(StoreError::from)));
        (names, stopped.map(|error| store_error(path, error)))
    }

    /// Removes the image `name` from this mount's image area, whatever the call's clock says
    /// (an image given up because the call ran out of time is removed all the same).
    pub(crate) fn forget_image(&self, name: &str) {
        let store = self.store.clone();
        let key = self.key(&[IMAGE_AREA, name]);
        let _ = self.finish_change(async move { store.delete(&key).await });
    }

    /// Removes the images `names` from this mount's image area, as many to a request as the
    /// store takes (a thousand to S3's bulk delete), until `until`: how many were removed.
    /// A name the store could not remove, or did not reach in time, is left.
    pub(crate) fn forget_images(&self, names: &[String], until: Instant) -> usize {
        let store = self.store.clone();
        let keys: Vec<object_store::Result<Key>> =
            names.iter().map(|name| Ok(self.key(&[IMAGE_AREA, name.as_str()]))).collect();
        self.finish_change(async move {
            let mut removed = store.delete_stream(Box::pin(futures_util::stream::iter(keys)));
            let until = tokio::time::Instant::from_std(until);
            let mut count = 0;
            while let Ok(Some(outcome)) =
                tokio::time::timeout_at(until, futures_util::StreamExt::next(&mut removed)).await
            {
                count += usize::from(outcome.is_ok());
            }
            count
        })
        .unwrap_or(0)
    }

    /// Deletes one object.
    fn delete_object(&self, rel: &[String]) -> Result<(), StoreError> {
        let store = self.store.clone();
        let key = self.key(rel);
        self.block_change(async move { store.delete(&key).await })??;
        Ok(())
    }
}

/// Object keys need no resolution: the place is the key.
pub(crate) fn locate(mount: usize, components: &[&str]) -> crate::storage::Located {
    let rel: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
    crate::storage::Located { mount, rel: rel.clone(), node: crate::storage::Node::Object(Node { rel, listed: None }) }
}

/// A place in an object store: the key's parts below the mount's prefix, and what a listing
/// already said of it (so a walk opens files and reads `.gitignore` files without a HEAD).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) rel: Vec<String>,
    listed: Option<Listed>,
}

#[derive(Debug, Clone)]
enum Listed {
    File(ObjectInfo),
    /// A directory, with the objects directly in it.
    Directory(Arc<BTreeMap<String, ObjectInfo>>),
}

/// Describes a store failure to an agent without the store's own text (which names the bucket
/// and endpoint); the failure is logged for the operator.
/// A request vfs gave up waiting for, told as the store's own failures are (to the operator's
/// log, never to an agent).
fn out_of_time(what: &str) -> object_store::Error {
    object_store::Error::Generic { store: "vfs", source: format!("{what} did not end within its time").into() }
}

/// True for what can be an object's entity tag between its quotes (RFC 9110: visible ASCII
/// but the quote), of a length a header takes.
fn entity_tag(token: &str) -> bool {
    !token.is_empty() && token.len() <= 1024 && token.bytes().all(|byte| byte.is_ascii_graphic() && byte != b'"')
}

/// What a request whose task ended without an answer (it panicked: a fault in vfs or in the
/// object store's client) gives: a failed request, said to the operator's log.
fn task_failed() -> StoreError {
    StoreError::Other(object_store::Error::Generic {
        store: "vfs",
        source: "the object store's client stopped in the middle of a request (a fault; the process's error output may say more)".into(),
    })
}

fn store_error(path: &VirtualPath, error: StoreError) -> Error {
    match error {
        StoreError::Stopped(error) => error,
        StoreError::NotFound => Error::not_found(path),
        StoreError::AlreadyExists => Error::already_exists(path),
        StoreError::Precondition => Error::version_mismatch(path, "a newer one"),
        // The store's text names keys another tool wrote: control characters escaped, so that
        // none reaches the operator's terminal raw.
        StoreError::BadKey(error) => {
            let error = crate::text::escape_controls(&error.to_string()).into_owned();
            tracing::warn!(target: "vfs::object", %path, %error, "object store holds a key vfs cannot name");
            Error::store_bad_key(path)
        }
        StoreError::Other(error) => {
            let error = crate::text::escape_controls(&error.to_string()).into_owned();
            tracing::warn!(target: "vfs::object", %path, %error, "object store request failed");
            Error::store_failed(path)
        }
    }
}

fn file_stat(info: &ObjectInfo) -> Stat {
    Stat {
        kind: Kind::File,
        size: info.size,
        modified: (info.modified, 0),
        changed: (info.modified, 0),
        identity: None,
        mode: FILE_MODE,
    }
}

/// The permission bits every object shows.
pub(crate) const FILE_MODE: u32 = 0o644;

const DIRECTORY: Stat =
    Stat { kind: Kind::Directory, size: 0, modified: (0, 0), changed: (0, 0), identity: None, mode: 0o755 };

impl ObjectRoot {
    /// `scheme://bucket` of this store.
    pub(crate) fn bucket(&self) -> &str {
        &self.bucket
    }

    /// "Does not exist", or "is a directory" when the name is a prefix.
    fn missing(&self, rel: &[String], path: &VirtualPath) -> Error {
        match self.has_prefix(rel) {
            Ok(true) => Error::not_a_file(path),
            Ok(false) => Error::not_found(path),
            Err(error) => store_error(path, error),
        }
    }

    /// The object's metadata: from the listing that found it, else a HEAD.
    fn info(&self, node: &Node, path: &VirtualPath) -> Result<Option<ObjectInfo>, Error> {
        match &node.listed {
            Some(Listed::File(info)) => Ok(Some(info.clone())),
            Some(Listed::Directory(_)) => Ok(None),
            None => self.head_object(&node.rel).map_err(|error| store_error(path, error)),
        }
    }

    /// Refuses a place below an object (a file): on a disk a name is a file or a directory,
    /// never both, and a key below an object's would be listed by `list_directory` as the file
    /// only and by a tree as both. With `including`, the place itself must not be an object
    /// either (a directory to make). Every name above it is asked at once (one round trip);
    /// what another tool writes meanwhile is not held back.
    fn below_a_file(&self, rel: &[String], including: bool, path: &VirtualPath) -> Result<(), Error> {
        let end = if including { rel.len() } else { rel.len().saturating_sub(1) };
        let (keys, since): (Vec<Key>, u64) = {
            let known = not_objects();
            let keys = (1..=end)
                .map(|above| self.key(&rel[..above]))
                .filter(|key| !known.names.contains(&self.known_name(key)))
                .collect();
            (keys, known.generation)
        };
        if keys.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        let asked = keys.clone();
        let answers = self
            .block(async move {
                let heads = asked.iter().map(|key| store.head(key));
                futures_util::future::join_all(heads).await
            })
            .map_err(|error| store_error(path, error))?;
        for answer in answers {
            match answer {
                Ok(_) => return Err(Error::not_a_directory(path)),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(store_error(path, error.into())),
            }
        }
        let names: Vec<String> = keys.iter().map(|key| self.known_name(key)).collect();
        not_objects().learn(names, since);
        Ok(())
    }

    /// How [`not_objects`] names `key` of this bucket.
    fn known_name(&self, key: &Key) -> String {
        format!("{}\0{key}", self.bucket)
    }

    /// `key` of this bucket is (or may be, once the request is answered) an object now: it
    /// is no longer known not to be one.
    fn made_object(&self, key: &Key) {
        not_objects().made(self.known_name(key));
    }

    /// Moves an object within this bucket: copy (if absent, unless `replace`), then delete. Not
    /// atomic: a failure between the two leaves both copies, never neither. A move onto itself
    /// moves nothing.
    pub(crate) fn move_object(
        &self,
        from: &Node,
        to: &Node,
        target: &ObjectRoot,
        replace: bool,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let source_key = self.key(&from.rel);
        let target_key = target.key(&to.rel);
        let exists = self.head_object(&from.rel).map_err(|error| store_error(path, error))?;
        if exists.is_none() {
            // A request the clock stopped answers as stopped, not as "not found".
            let directory = self.has_prefix(&from.rel).map_err(|error| store_error(path, error))?;
            return Err(if directory {
                // `path` is the destination: the message names what is refused there.
                Error::invalid_argument(agent_text![
                    "cannot move a directory to ",
                    code(path),
                    " in object storage; move its files one by one"
                ])
            } else {
                Error::not_found(path)
            });
        }
        if source_key == target_key {
            return if replace { Ok(()) } else { Err(Error::already_exists(path)) };
        }
        target.below_a_file(&to.rel, false, path)?;
        self.copy_keys(source_key, target_key, replace).map_err(|error| store_error(path, error))?;
        // The copy is made: the source goes too, whatever the clock says now, so that a move
        // is never left half done by a call's time limit.
        let store = self.store.clone();
        let key = self.key(&from.rel);
        self.finish_change(async move { store.delete(&key).await })
            .and_then(|deleted| deleted.map_err(StoreError::from))
            .map_err(|error| store_error(path, error))
    }
}

impl crate::storage::Store for ObjectRoot {
    type Node = Node;
    type Appender = std::convert::Infallible;
    type Direct = std::convert::Infallible;

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    /// An object is found by its key in one request anyway: no quicker route.
    fn open_direct(
        &self,
        _table: &dyn MountTable,
        _components: &[&str],
        _path: &VirtualPath,
    ) -> Option<Result<(Self::Direct, Stat), Error>> {
        None
    }

    fn info_direct(
        &self,
        _table: &dyn MountTable,
        _components: &[&str],
        _path: &VirtualPath,
    ) -> Option<Result<(Stat, String), Error>> {
        None
    }

    fn stat(&self, node: &Node, path: &VirtualPath) -> Result<Option<Stat>, Error> {
        match &node.listed {
            Some(Listed::File(info)) => Ok(Some(file_stat(info))),
            Some(Listed::Directory(_)) => Ok(Some(DIRECTORY)),
            None => self.restat(node, path),
        }
    }

    fn restat(&self, node: &Node, path: &VirtualPath) -> Result<Option<Stat>, Error> {
        if node.rel.is_empty() {
            return Ok(Some(DIRECTORY));
        }
        if let Some(info) = self.head_object(&node.rel).map_err(|error| store_error(path, error))? {
            return Ok(Some(file_stat(&info)));
        }
        let directory = self.has_prefix(&node.rel).map_err(|error| store_error(path, error))?;
        Ok(directory.then_some(DIRECTORY))
    }

    fn open_file(&self, node: &Node, first: Option<u64>, path: &VirtualPath) -> Result<Opened<'_>, Error> {
        if let (Some(count), None) = (first, &node.listed) {
            // A window from the first line never needs more than `count` bytes: one GET, no HEAD.
            let Some((bytes, info)) =
                self.get_first(&node.rel, count, false).map_err(|error| store_error(path, error))?
            else {
                return Err(self.missing(&node.rel, path));
            };
            return Ok(Opened {
                reader: Reader::Empty(std::marker::PhantomData),
                size: info.size,
                token: info.token(),
                first: Some(bytes),
            });
        }
        let Some(info) = self.info(node, path)? else {
            return Err(self.missing(&node.rel, path));
        };
        let reader = self.reader(&node.rel, &info);
        Ok(Opened { reader: Reader::Object(reader), size: info.size, token: info.token(), first: None })
    }

    fn read_all(&self, node: &Node, cap: u64, path: &VirtualPath) -> Result<(Vec<u8>, Option<String>, Stat), Error> {
        let Some((bytes, info)) =
            self.get_first(&node.rel, cap.saturating_add(1), true).map_err(|error| store_error(path, error))?
        else {
            return Err(self.missing(&node.rel, path));
        };
        if info.size > cap {
            return Err(Error::too_large(
                Some(path),
                agent_text![format!("the file has {} bytes, more than the {cap}-byte cap", info.size)],
            ));
        }
        Ok((bytes, info.token(), file_stat(&info)))
    }

    fn version(&self, node: &Node, path: &VirtualPath) -> Result<Option<String>, Error> {
        match self.info(node, path)? {
            Some(info) => Ok(info.token()),
            None => Err(self.missing(&node.rel, path)),
        }
    }

    fn check_version(&self, node: &Node, expected: &str, path: &VirtualPath) -> Result<(), Error> {
        let current = self.head_object(&node.rel).map_err(|error| store_error(path, error))?;
        match current.and_then(|info| info.token()) {
            None => Err(Error::version_mismatch(path, "none (the file does not exist)")),
            Some(token) if token == expected => Ok(()),
            Some(token) => Err(Error::version_mismatch(path, &token)),
        }
    }

    fn list(
        &self,
        _table: &dyn crate::storage::MountTable,
        _mount: usize,
        node: &Node,
        path: &VirtualPath,
        _at_most: usize,
    ) -> Result<Vec<Entry>, Error> {
        let (directories, files, marked) = self.list_level(&node.rel).map_err(|error| store_error(path, error))?;
        if directories.is_empty() && files.is_empty() && !marked && !node.rel.is_empty() {
            let file = self.head_object(&node.rel).map_err(|error| store_error(path, error))?;
            return Err(if file.is_some() { Error::not_a_directory(path) } else { Error::not_found(path) });
        }
        let directories = directories.into_iter().map(|name| Entry { name, kind: Kind::Directory });
        Ok(directories.chain(files.into_iter().map(|(name, _)| Entry { name, kind: Kind::File })).collect())
    }

    /// One listing of every object below the directory (bounded by `from.listing_bound`),
    /// arranged as a tree and walked depth-first in name order, as a local walk goes.
    fn walk(
        &self,
        from: &WalkFrom<'_>,
        node: &Node,
        visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
    ) -> Result<Walked, Error> {
        let (below, cut) =
            self.list_all(&node.rel, from.listing_bound).map_err(|error| store_error(from.path, error))?;
        // The tree is built, walked and dropped a level a frame: a key deeper than any walk
        // goes (made beside vfs) is cut to the directories the walk can tell are there, and
        // one more below them, so that the deepest it enters counts as holding something.
        let deepest = crate::storage::local::MAX_DEPTH + 2;
        let mut tree = Level::default();
        for parts in &below.markers {
            tree.insert_directory(&parts[..parts.len().min(deepest)]);
        }
        for (parts, info) in below.files {
            if parts.len() > deepest {
                tree.insert_directory(&parts[..deepest]);
            } else {
                tree.insert(&parts, info);
            }
        }
        let mut walker = TreeWalk { from, visit, base: &node.rel, deeper: 0 };
        let completed = walker.level(&tree, from.path, "", &mut Vec::new(), 0)?;
        Ok(Walked { completed: completed && !cut, unreadable: 0, deeper: walker.deeper })
    }

    fn read_child(&self, node: &Node, name: &str, cap: u64, _path: &VirtualPath) -> Option<Vec<u8>> {
        let mut rel = node.rel.clone();
        rel.push(name.to_owned());
        if let Some(Listed::Directory(files)) = &node.listed {
            // The listing says whether it is there: no request for a name that is not.
            let info = files.get(name)?;
            if info.size > cap {
                return None;
            }
        }
        let (bytes, info) = self.get_first(&rel, cap.saturating_add(1), true).ok()??;
        (info.size <= cap).then_some(bytes)
    }

    fn put(
        &self,
        node: &Node,
        bytes: &[u8],
        when: &PutWhen,
        _mode: crate::storage::NewMode,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error> {
        if node.rel.is_empty() {
            return Err(Error::not_a_file(path));
        }
        // A versioned put replaces an object, which was checked when it was made.
        if !matches!(when, PutWhen::Version(_)) {
            self.below_a_file(&node.rel, false, path)?;
        }
        match self.put_object(&node.rel, bytes.to_vec(), when) {
            Ok(version) => Ok(version),
            Err(StoreError::Precondition) => {
                let current = self
                    .head_object(&node.rel)
                    .map_err(|error| store_error(path, error))?
                    .and_then(|info| info.token());
                Err(Error::version_mismatch(path, current.as_deref().unwrap_or("none (the file does not exist)")))
            }
            Err(error) => Err(store_error(path, error)),
        }
    }

    /// A buffer: object stores take whole objects, so the commit is one conditional put.
    fn stage(
        &self,
        node: &Node,
        start: crate::storage::Start,
        _mode: crate::storage::NewMode,
        cap: u64,
        path: &VirtualPath,
    ) -> Result<crate::storage::Staged, Error> {
        if node.rel.is_empty() {
            return Err(Error::not_a_file(path));
        }
        let bytes = match start {
            crate::storage::Start::Empty => Vec::new(),
            crate::storage::Start::Current => match self.info(node, path)? {
                Some(_) => self.read_all(node, cap, path)?.0,
                None => Vec::new(),
            },
        };
        Ok(crate::storage::Staged::Object(Staged { bytes, cap }))
    }

    fn commit(
        &self,
        node: &Node,
        staged: crate::storage::Staged,
        when: &PutWhen,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error> {
        let crate::storage::Staged::Object(staged) = staged else { return Err(Error::changed_during_call(path)) };
        self.put(node, &staged.bytes, when, crate::storage::NewMode::Masked(0), path)
    }

    /// Directories are prefixes; an empty one is its marker (`key/`, as other tools write
    /// it), so that it is listed and lasts as on a disk. Never at or below an object's name.
    fn make_directory(&self, node: &Node, path: &VirtualPath) -> Result<bool, Error> {
        self.below_a_file(&node.rel, true, path)?;
        self.put_marker(&node.rel).map_err(|error| store_error(path, error))?;
        Ok(true)
    }

    /// Prefixes have no modes.
    fn make_directory_exact(
        &self,
        node: &Node,
        _mode: u32,
        path: &VirtualPath,
    ) -> Result<crate::storage::MadeDirectory, Error> {
        self.below_a_file(&node.rel, true, path)?;
        self.put_marker(&node.rel).map_err(|error| store_error(path, error))?;
        Ok(crate::storage::MadeDirectory::Made(None))
    }

    /// Prefixes have no modes; the marker a restore wrote, so that the directory was there
    /// while it was empty, goes once something is in it (a directory with files needs none,
    /// and one left would outlive its last file, as no directory of the tree did).
    fn finish_directory(
        &self,
        node: &Node,
        _made: Option<&crate::storage::MadeAs>,
        _to: u32,
        path: &VirtualPath,
    ) -> Result<bool, Error> {
        if node.rel.is_empty() || !self.markers {
            return Ok(false);
        }
        let (directories, files, marked) = self.list_level(&node.rel).map_err(|error| store_error(path, error))?;
        if !marked || (directories.is_empty() && files.is_empty()) {
            return Ok(false);
        }
        self.delete_marker(&node.rel).map_err(|error| store_error(path, error))?;
        Ok(true)
    }

    fn remove(
        &self,
        node: &Node,
        kind: Kind,
        removal: &crate::storage::Removal<'_>,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        if node.rel.is_empty() {
            return Err(Error::invalid_argument(agent_text!["cannot delete ", code(path), ": it is a mount root"]));
        }
        if kind != Kind::Directory {
            return self.delete_object(&node.rel).map_err(|error| store_error(path, error));
        }
        // A directory is a prefix with objects below it, or a marker alone (empty).
        if !removal.recursive {
            let (directories, files, marked) = self.list_level(&node.rel).map_err(|error| store_error(path, error))?;
            if !(marked && directories.is_empty() && files.is_empty()) {
                return Err(Error::not_empty(path));
            }
            return self.delete_marker(&node.rel).map_err(|error| store_error(path, error));
        }
        loop {
            let (below, more) = self.list_all(&node.rel, 1000).map_err(|error| store_error(path, error))?;
            for (parts, info) in &below.files {
                let mut rel = node.rel.clone();
                rel.extend(parts.iter().cloned());
                // Read before delete, judged on the listing's version: object stores have no
                // lock, so a write between the listing and this delete is not seen.
                let object_path = || parts.iter().fold(path.clone(), |path, part| path.join_trusted(part));
                if let Some(judge) = removal.judge {
                    judge(&object_path(), info.token().as_deref())?;
                }
                self.delete_object(&rel).map_err(|error| store_error(path, error))?;
                if let Some(took) = removal.took {
                    took(&object_path());
                }
            }
            // The markers after the files: a refused file leaves its directories as they were.
            for parts in &below.markers {
                let rel = [node.rel.as_slice(), parts.as_slice()].concat();
                self.delete_marker(&rel).map_err(|error| store_error(path, error))?;
            }
            if !more || (below.files.is_empty() && below.markers.is_empty()) {
                return self.delete_marker(&node.rel).map_err(|error| store_error(path, error));
            }
        }
    }

    fn lock(&self, node: &Node, _path: &VirtualPath) -> Result<crate::storage::Lock, Error> {
        Ok(crate::storage::Lock::Object(ObjectLock::take(self.lock_claims(&node.rel))?))
    }

    fn open_append(&self, _node: &Node, path: &VirtualPath) -> Result<std::convert::Infallible, Error> {
        Err(Error::invalid_argument(agent_text![
            code(path),
            " is in object storage, where this operation is not available"
        ]))
    }

    /// Within one bucket, a copy and a delete ([`ObjectRoot::move_object`]); across buckets,
    /// the caller's copy and remove.
    fn rename(
        &self,
        from: &Node,
        to: &Node,
        target: &Self,
        replace: bool,
        path: &VirtualPath,
    ) -> Option<Result<(), Error>> {
        (self.bucket() == target.bucket()).then(|| self.move_object(from, to, target, replace, path))
    }
}

/// The locks of an object store's places, held while a read-modify-write of one of its
/// objects runs: a version check and the put, copy or delete it guards. A store has no locks,
/// and S3 no conditional delete or copy-if-absent, so a check and its act could be split by
/// another call (a delete beside a guarded edit removed the edit it had acknowledged; two
/// moves onto one name both succeeded). A change holds its "directory" (a bucket and a key
/// prefix) and its name alone and shares the names above it ([`ObjectRoot::lock_claims`]); a
/// move takes the claims of both its places at once. These locks are the process's own: they
/// order the calls of one vfs (every session and crew of a daemon); another process writing
/// the bucket is not held back (ADR 0002).
#[derive(Debug)]
pub(crate) struct ObjectLock {
    claims: Vec<Claim>,
}

/// One name an [`ObjectLock`] holds, alone or shared with other sharers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claim {
    name: String,
    alone: bool,
}

/// Who holds one name: one alone, or this many sharing it.
#[derive(Debug, Default)]
struct Holders {
    alone: bool,
    sharing: usize,
}

impl Holders {
    fn admits(&self, claim: &Claim) -> bool {
        !self.alone && (!claim.alone || self.sharing == 0)
    }
}

/// The most names [`NotObjects`] keeps; past it, it starts again empty.
const NOT_OBJECTS_KEPT: usize = 4096;

/// Keys of every object mount of the process (bucket and key) found not to be objects by
/// [`ObjectRoot::below_a_file`], so that the next write below them asks no more. A key is taken
/// out when vfs makes an object of it, and one made while it was being asked about is not
/// learnt. Another process that makes an object of one is not seen.
#[derive(Debug, Default)]
struct NotObjects {
    names: std::collections::HashSet<String>,
    /// Counts the objects made.
    generation: u64,
    /// The last objects made, with the generation each made.
    recent: std::collections::VecDeque<(u64, String)>,
}

impl NotObjects {
    fn made(&mut self, name: String) {
        self.names.remove(&name);
        self.generation += 1;
        if self.recent.len() >= NOT_OBJECTS_KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back((self.generation, name));
    }

    /// Learns `names`, asked about when the count of objects made was `since`, except those
    /// made since; nothing when more were made since than [`NotObjects::recent`] holds.
    fn learn(&mut self, names: Vec<String>, since: u64) {
        let covered = self.recent.front().is_none_or(|(first, _)| *first <= since + 1);
        if !covered {
            return;
        }
        if self.names.len() + names.len() > NOT_OBJECTS_KEPT {
            self.names.clear();
        }
        for name in names {
            if !self.recent.iter().rev().take_while(|(made, _)| *made > since).any(|(_, made)| *made == name) {
                self.names.insert(name);
            }
        }
    }
}

fn not_objects() -> std::sync::MutexGuard<'static, NotObjects> {
    static KNOWN: std::sync::OnceLock<std::sync::Mutex<NotObjects>> = std::sync::OnceLock::new();
    KNOWN.get_or_init(Default::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The names held now, and the signal that one was let go.
type Held = (std::sync::Mutex<std::collections::HashMap<String, Holders>>, std::sync::Condvar);

fn held() -> &'static Held {
    static HELD: std::sync::OnceLock<Held> = std::sync::OnceLock::new();
    HELD.get_or_init(Default::default)
}

impl ObjectLock {
    /// Waits until every claim can be held, then holds them all at once (so two takers never
    /// each hold a part and wait for the other's); no longer than the call the thread works
    /// for may run (looked at every [`CANCEL_POLL`]): a call that another one's slow request
    /// on the same prefix holds back ends at its own time limit, or its cancellation, with the
    /// budget's error. A name claimed twice is held once, alone if either claim is.
    pub(crate) fn take(mut claims: Vec<Claim>) -> Result<Self, Error> {
        claims.sort_by(|one, other| one.name.cmp(&other.name).then(other.alone.cmp(&one.alone)));
        claims.dedup_by(|later, first| later.name == first.name);
        let deadline = crate::budget::current().filter(|deadline| deadline.bounded());
        let (names, freed) = held();
        let mut names = names.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while !claims.iter().all(|claim| names.get(&claim.name).is_none_or(|holders| holders.admits(claim))) {
            let Some(deadline) = &deadline else {
                names = freed.wait(names).unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            };
            deadline.check()?;
            let wait = deadline.at().map_or(CANCEL_POLL, |at| at.saturating_duration_since(Instant::now()));
            names =
                freed.wait_timeout(names, wait.min(CANCEL_POLL)).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
        for claim in &claims {
            let holders = names.entry(claim.name.clone()).or_default();
            if claim.alone {
                holders.alone = true;
            } else {
                holders.sharing += 1;
            }
        }
        Ok(Self { claims })
    }
}

impl Drop for ObjectLock {
    fn drop(&mut self) {
        let (names, freed) = held();
        let mut names = names.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for claim in &self.claims {
            let std::collections::hash_map::Entry::Occupied(mut holders) = names.entry(claim.name.clone()) else {
                continue;
            };
            if claim.alone {
                holders.get_mut().alone = false;
            } else {
                holders.get_mut().sharing -= 1;
            }
            if !holders.get().alone && holders.get().sharing == 0 {
                holders.remove();
            }
        }
        drop(names);
        freed.notify_all();
    }
}

/// A staged write of an object: its next content, in memory, bounded by the cap.
#[derive(Debug)]
pub(crate) struct Staged {
    bytes: Vec<u8>,
    cap: u64,
}

impl Staged {
    pub(crate) fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn too_large(&self, size: u64, path: &VirtualPath) -> Error {
        Error::too_large(
            Some(path),
            agent_text![format!("the file would have {size} bytes, more than the {}-byte cap", self.cap)],
        )
    }

    pub(crate) fn write_at(&mut self, offset: u64, bytes: &[u8], path: &VirtualPath) -> Result<(), Error> {
        let end = offset.saturating_add(bytes.len() as u64);
        if end > self.cap {
            return Err(self.too_large(end, path));
        }
        let (start, end) = (offset as usize, end as usize);
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[start..end].copy_from_slice(bytes);
        Ok(())
    }

    pub(crate) fn set_len(&mut self, len: u64, path: &VirtualPath) -> Result<(), Error> {
        if len > self.cap {
            return Err(self.too_large(len, path));
        }
        self.bytes.resize(len as usize, 0);
        Ok(())
    }

    /// `len` bytes from `offset` (the caller keeps them within the content).
    pub(crate) fn read_at(&self, offset: u64, len: usize) -> Vec<u8> {
        let start = offset as usize;
        self.bytes[start..start + len].to_vec()
    }
}

/// One level of a listed tree: the objects in it and the levels below, in name order.
/// What lies below a "directory": its files and the directories known by their markers
/// ([`ObjectRoot::list_all`]), each as a path relative to it.
#[derive(Debug, Default)]
struct Below {
    files: Vec<(Vec<String>, ObjectInfo)>,
    markers: Vec<Vec<String>>,
}

/// The names of one directory [`ObjectRoot::tell_markers`] asks the store about, and how many
/// objects the directory holds.
type Asked<'a> = (Vec<(&'a Vec<String>, &'a ObjectInfo)>, usize);

/// How many HEAD requests [`ObjectRoot::tell_markers`] sends at once.
const MARKER_HEADS_AT_ONCE: usize = 64;

/// The most entries one listing request answers with (S3's page).
const LISTING_PAGE: usize = 1000;

#[derive(Default)]
struct Level {
    files: BTreeMap<String, ObjectInfo>,
    directories: BTreeMap<String, Level>,
}

impl Level {
    /// A directory known by its marker, and those above it.
    fn insert_directory(&mut self, parts: &[String]) {
        if let [directory, rest @ ..] = parts {
            self.directories.entry(directory.clone()).or_default().insert_directory(rest);
        }
    }

    fn insert(&mut self, parts: &[String], info: ObjectInfo) {
        match parts {
            [] => {}
            [name] => {
                self.files.insert(name.clone(), info);
            }
            [directory, rest @ ..] => self.directories.entry(directory.clone()).or_default().insert(rest, info),
        }
    }
}

struct TreeWalk<'w, 'v> {
    from: &'w WalkFrom<'w>,
    visit: &'v mut dyn FnMut(&Visit<'_>) -> Flow,
    base: &'w [String],
    /// Directories past the depth bound, not entered.
    deeper: usize,
}

impl TreeWalk<'_, '_> {
    /// Visits one level (files and directories merged in name order); false when stopped.
    fn level(
        &mut self,
        level: &Level,
        path: &VirtualPath,
        relative: &str,
        parts: &mut Vec<String>,
        depth: usize,
    ) -> Result<bool, Error> {
        let mut names: Vec<(&String, Option<&ObjectInfo>, Option<&Level>)> = level
            .files
            .iter()
            .map(|(name, info)| (name, Some(info), None))
            .chain(level.directories.iter().map(|(name, below)| (name, None, Some(below))))
            .collect();
        names.sort_by(|left, right| left.0.cmp(right.0));
        for (name, info, below) in names {
            self.from.deadline.check()?;
            let child = path.join_trusted(name);
            let child_relative = if relative.is_empty() { name.clone() } else { format!("{relative}/{name}") };
            parts.push(name.clone());
            let mut rel = self.base.to_vec();
            rel.extend(parts.iter().cloned());
            let (kind, listed) = match (info, below) {
                (Some(info), _) => (Kind::File, Listed::File(info.clone())),
                (None, Some(below)) => (Kind::Directory, Listed::Directory(Arc::new(below.files.clone()))),
                (None, None) => unreachable!("every listed name is a file or a directory"),
            };
            let node = crate::storage::Node::Object(Node { rel, listed: Some(listed) });
            let flow = (self.visit)(&Visit {
                path: &child,
                relative: &child_relative,
                name,
                kind,
                depth: depth + 1,
                node: &node,
            });
            let go_on = match (flow, below) {
                (Flow::Stop, _) => false,
                (Flow::Continue, Some(below)) if depth + 1 < self.from.max_depth => {
                    self.level(below, &child, &child_relative, parts, depth + 1)?
                }
                (Flow::Continue, Some(below)) => {
                    // Left out only when there is something in it.
                    self.deeper += usize::from(!(below.files.is_empty() && below.directories.is_empty()));
                    true
                }
                _ => true,
            };
            parts.pop();
            if !go_on {
                return Ok(false);
            }
        }
        Ok(true)
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
                        // `Deadline::io_error` turns it into the budget's error.
                        StoreError::Stopped(_) => crate::budget::stopped(),
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
    use crate::{Budget, ErrorKind, GrepRequest, MountRegistry, ReadWindow};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    /// A registry of `memory://name` mounted at `/data`, holding `/data/file.txt`, whose reads
    /// take a minute each (listings answer at once): a store that stops answering.
    fn hanging(name: &str) -> MountRegistry {
        let config = object_store::throttle::ThrottleConfig {
            wait_get_per_call: Duration::from_mins(1),
            ..object_store::throttle::ThrottleConfig::default()
        };
        let store = object_store::throttle::ThrottledStore::new(object_store::memory::InMemory::new(), config);
        let key = Key::from("file.txt");
        runtime().unwrap().block_on(store.put(&key, PutPayload::from("a needle\n"))).unwrap();
        memory_stores().insert(name.to_owned(), Arc::new(store));
        let spec: MountSpec = format!("memory://{name}:/data:ro").parse().unwrap();
        MountRegistry::builder().mount(spec).build(crate::ambient_authority()).unwrap()
    }

    /// A budget whose cancel flag is set `after` from now, on another thread.
    fn cancelled_after(after: Duration) -> Budget {
        let flag = Arc::new(AtomicBool::new(false));
        let cancel = flag.clone();
        std::thread::spawn(move || {
            std::thread::sleep(after);
            cancel.store(true, Ordering::Relaxed);
        });
        Budget::unlimited().with_cancel_flag(flag)
    }

    /// What the clock of a call of `operation` says once it is cancelled, or out of time: the
    /// error every local operation gives.
    fn budget_error(operation: crate::Operation, cancelled: bool) -> String {
        let budget = if cancelled {
            Budget::unlimited().with_cancel_flag(Arc::new(AtomicBool::new(true)))
        } else {
            Budget::unlimited().with_time(Duration::ZERO)
        };
        budget.start(operation).check().unwrap_err().to_string()
    }

    /// Runs `call`, and checks that it ended between `after` and a second later (the store
    /// would have answered after a minute) with `kind`.
    fn returns_promptly(after: Duration, kind: ErrorKind, call: impl FnOnce() -> crate::Error) -> String {
        let started = Instant::now();
        let error = call();
        let took = started.elapsed();
        assert!(took >= after && took < after + Duration::from_secs(1), "returned after {took:?}");
        assert_eq!(error.kind(), kind, "{error}");
        error.to_string()
    }

    const SOON: Duration = Duration::from_millis(300);

    #[test]
    fn a_read_waiting_on_the_store_ends_when_the_call_is_cancelled() {
        let registry = hanging("hanging-read-cancel");
        let agent = registry.agent().with_budget(cancelled_after(SOON));
        let error = returns_promptly(SOON, ErrorKind::Cancelled, || {
            agent.read_text("/data/file.txt", &ReadWindow::default()).unwrap_err()
        });
        assert_eq!(error, budget_error(crate::Operation::ReadText, true));
    }

    #[test]
    fn a_read_waiting_on_the_store_ends_when_the_call_is_out_of_time() {
        let registry = hanging("hanging-read-time");
        let agent = registry.agent().with_budget(Budget::unlimited().with_time(SOON));
        let error = returns_promptly(SOON, ErrorKind::TimedOut, || {
            agent.read_text("/data/file.txt", &ReadWindow::default()).unwrap_err()
        });
        assert_eq!(error, budget_error(crate::Operation::ReadText, false));
    }

    /// What is learnt not to be an object is forgotten when vfs makes an object of it, and a
    /// name made while it was being asked about is not learnt.
    #[test]
    fn a_name_made_an_object_is_no_longer_known_not_to_be_one() {
        let mut known = NotObjects::default();
        known.learn(vec!["b\0x".to_owned(), "b\0x/y".to_owned()], 0);
        assert!(known.names.contains("b\0x") && known.names.contains("b\0x/y"));
        known.made("b\0x".to_owned());
        assert!(!known.names.contains("b\0x"));
        // Asked at generation 1; `b\0z` made at 2, before the answers were learnt.
        known.made("b\0z".to_owned());
        known.learn(vec!["b\0z".to_owned(), "b\0w".to_owned()], 1);
        assert!(!known.names.contains("b\0z") && known.names.contains("b\0w"));
        // More made since than are remembered: nothing is learnt.
        for index in 0..=NOT_OBJECTS_KEPT {
            known.made(format!("b\0m{index}"));
        }
        known.learn(vec!["b\0v".to_owned()], 2);
        assert!(!known.names.contains("b\0v"));
        let now = known.generation;
        known.learn(vec!["b\0v".to_owned()], now);
        assert!(known.names.contains("b\0v"));
    }

    /// A call held back by another's lock on the same prefix (a slow request of another crew)
    /// waits no longer than its own time limit, or its cancellation.
    #[test]
    fn a_call_waiting_for_another_calls_lock_ends_at_its_own_time_limit() {
        let spec: MountSpec = "memory://lock-wait:/data:rw".parse().unwrap();
        let registry = MountRegistry::builder().mount(spec).build(crate::ambient_authority()).unwrap();
        let held = ObjectLock::take(vec![Claim { name: "dir\0memory://lock-wait\0".to_owned(), alone: true }]).unwrap();
        let agent = registry.agent().with_budget(Budget::unlimited().with_time(SOON));
        let error = returns_promptly(SOON, ErrorKind::TimedOut, || {
            agent.write("/data/x.txt", "x", &crate::Precondition::Absent).unwrap_err()
        });
        assert_eq!(error, budget_error(crate::Operation::Write, false));
        let agent = registry.agent().with_budget(cancelled_after(SOON));
        let error = returns_promptly(SOON, ErrorKind::Cancelled, || {
            agent.write("/data/x.txt", "x", &crate::Precondition::Absent).unwrap_err()
        });
        assert_eq!(error, budget_error(crate::Operation::Write, true));
        drop(held);
        registry
            .agent()
            .with_budget(Budget::unlimited().with_time(SOON))
            .write("/data/x.txt", "x", &crate::Precondition::Absent)
            .unwrap();
    }

    /// A change holds its own name alone and shares the names above it: a name held shared
    /// (by a change below it) holds back a write of that name, not one beside or below it; a
    /// name claimed twice in one take is held once.
    #[test]
    fn a_change_shares_the_names_above_it_and_holds_its_own_alone() {
        let spec: MountSpec = "memory://claims:/data:rw".parse().unwrap();
        let registry = MountRegistry::builder().mount(spec).build(crate::ambient_authority()).unwrap();
        let name = |key: &str, alone| Claim { name: format!("name\0memory://claims\0{key}"), alone };
        let below = ObjectLock::take(vec![name("d", false), name("d", true), name("d", false)]).unwrap();
        assert_eq!(below.claims, [name("d", true)]);
        drop(below);
        let below = ObjectLock::take(vec![name("d", false)]).unwrap();
        let agent = registry.agent().with_budget(Budget::unlimited().with_time(SOON));
        agent.write("/data/d/x", "x", &crate::Precondition::Absent).unwrap();
        agent.write("/data/e", "e", &crate::Precondition::Absent).unwrap();
        let error = returns_promptly(SOON, ErrorKind::TimedOut, || {
            agent.write("/data/d", "d", &crate::Precondition::Absent).unwrap_err()
        });
        assert_eq!(error, budget_error(crate::Operation::Write, false));
        drop(below);
        let error = agent.write("/data/d", "d", &crate::Precondition::Absent).unwrap_err();
        assert_eq!(error.to_string(), "`/data/d` is a directory, not a file");
        assert!(held().0.lock().unwrap().keys().all(|key| !key.contains("memory://claims")), "every claim let go");
    }

    /// The search's reads run on the registry's worker pool, which works under the call's clock.
    #[test]
    fn a_grep_waiting_on_the_store_ends_when_the_call_is_cancelled_or_out_of_time() {
        let registry = hanging("hanging-grep");
        let request = GrepRequest { pattern: "needle".into(), path: Some("/data".into()), ..GrepRequest::default() };
        let agent = registry.agent().with_budget(cancelled_after(SOON));
        let error = returns_promptly(SOON, ErrorKind::Cancelled, || agent.grep(&request).unwrap_err());
        assert_eq!(error, budget_error(crate::Operation::Grep, true));
        let agent = registry.agent().with_budget(Budget::unlimited().with_time(SOON));
        let error = returns_promptly(SOON, ErrorKind::TimedOut, || agent.grep(&request).unwrap_err());
        assert_eq!(error, budget_error(crate::Operation::Grep, false));
    }

    /// An image given up because the call ran out of time is removed all the same: its copy
    /// finished after the clock ran out (a copy waits as a put does here), the write it was
    /// taken for was then refused, and the image area is left empty, the file as it was.
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "fixture: the keeper's directory on disk; capability-proof: the test holds the keeper's root"
    )]
    fn an_image_given_up_when_the_call_runs_out_of_time_is_removed() {
        #[derive(Debug, Default)]
        struct Keeping(std::sync::OnceLock<crate::Keeper>);
        impl crate::ChangeObserver for Keeping {
            fn changed(&self, _: &crate::Change<'_>) {}
            fn keeps_images(&self, path: &VirtualPath, _: bool) -> bool {
                path.as_str().starts_with("/data")
            }
            fn keeper(&self) -> Option<&crate::Keeper> {
                self.0.get()
            }
        }
        let inner = object_store::memory::InMemory::new();
        runtime().unwrap().block_on(inner.put(&Key::from("file.txt"), PutPayload::from("before\n"))).unwrap();
        let config = object_store::throttle::ThrottleConfig {
            wait_put_per_call: Duration::from_secs(1),
            ..object_store::throttle::ThrottleConfig::default()
        };
        let store = Arc::new(object_store::throttle::ThrottledStore::new(inner, config));
        memory_stores().insert("slow-copy".to_owned(), store.clone());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("k")).unwrap();
        let keep = dir.path().join("k").to_string_lossy().into_owned();
        let keeping = Arc::new(Keeping::default());
        let registry = MountRegistry::builder()
            .mount("memory://slow-copy:/data:rw".parse().unwrap())
            .internal(MountSpec::new(
                keep,
                crate::spec::MountRoot::new("/keep").unwrap(),
                crate::spec::Rights::ReadWrite,
            ))
            .observe(keeping.clone())
            .build(crate::ambient_authority())
            .unwrap();
        let privileged = registry.mint_privileged("/keep").unwrap();
        keeping.0.set(privileged.keeper("/keep/images").unwrap()).unwrap();
        let agent = registry.agent().with_budget(Budget::unlimited().with_time(SOON));
        let error = agent.write("/data/file.txt", "after\n", &crate::Precondition::Any).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::TimedOut, "{error}");
        let area = Key::from(IMAGE_AREA);
        let left: Vec<object_store::ObjectMeta> =
            runtime().unwrap().block_on(store.list(Some(&area)).try_collect()).unwrap();
        assert_eq!(left.iter().map(|meta| meta.location.to_string()).collect::<Vec<_>>(), Vec::<String>::new());
        let read = registry.agent().read_text("/data/file.txt", &ReadWindow::default()).unwrap();
        assert_eq!(read.content, "before\n");
    }

    /// A start's sweep of the image areas is bounded by the time it is given, mount by mount:
    /// a store that does not answer its listing is named as missed and does not keep another
    /// mount's images from being listed, only the keeper's own word's images are listed, and
    /// the removals a store has not made when the time is up are left (and not counted).
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the keeper's directory on disk")]
    fn image_areas_are_listed_and_cleared_within_their_time_each_mount_on_its_own() {
        let throttled = |name: &str, config: object_store::throttle::ThrottleConfig, keys: &[&str]| {
            let store = object_store::throttle::ThrottledStore::new(object_store::memory::InMemory::new(), config);
            for key in keys {
                let key = Key::from(format!("{IMAGE_AREA}/{key}"));
                runtime().unwrap().block_on(store.put(&key, PutPayload::from("image\n"))).unwrap();
            }
            memory_stores().insert(name.to_owned(), Arc::new(store));
        };
        let stalled = Duration::from_mins(1);
        let quiet = object_store::throttle::ThrottleConfig::default;
        throttled(
            "sweep-stalled-list",
            object_store::throttle::ThrottleConfig { wait_list_per_call: stalled, ..quiet() },
            &["jw-1.1.1"],
        );
        throttled("sweep-quick", quiet(), &["jv-1.1.1", "jw-1.1.1", "jw-2.1.1", "jx-1.1.1"]);
        throttled(
            "sweep-stalled-delete",
            object_store::throttle::ThrottleConfig { wait_delete_per_call: stalled, ..quiet() },
            &["jw-3.1.1"],
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("k")).unwrap();
        let keep = dir.path().join("k").to_string_lossy().into_owned();
        let registry = MountRegistry::builder()
            .mount("memory://sweep-stalled-list:/a:rw".parse().unwrap())
            .mount("memory://sweep-quick:/b:rw".parse().unwrap())
            .mount("memory://sweep-stalled-delete:/c:rw".parse().unwrap())
            .internal(MountSpec::new(
                keep,
                crate::spec::MountRoot::new("/keep").unwrap(),
                crate::spec::Rights::ReadWrite,
            ))
            .build(crate::ambient_authority())
            .unwrap();
        let keeper = registry.mint_privileged("/keep").unwrap().keeper("/keep/images").unwrap();
        assert!(keeper.tag_stored("jw"));

        let started = Instant::now();
        let listed = keeper.stored_images(10, started + SOON);
        assert!(started.elapsed() < SOON + Duration::from_secs(1), "listed in {:?}", started.elapsed());
        assert_eq!(
            listed.paths,
            ["/b/.vfs-tmp-journal/jw-1.1.1", "/b/.vfs-tmp-journal/jw-2.1.1", "/c/.vfs-tmp-journal/jw-3.1.1"]
        );
        let missed: Vec<(ErrorKind, Option<&str>)> =
            listed.missed.iter().map(|error| (error.kind(), error.path().map(VirtualPath::as_str))).collect();
        assert_eq!(missed, [(ErrorKind::Io, Some("/a/.vfs-tmp-journal"))]);

        let started = Instant::now();
        assert_eq!(keeper.forget_stored_all(&listed.paths, started + SOON), 2);
        assert!(started.elapsed() < SOON + Duration::from_secs(1), "removed in {:?}", started.elapsed());
        let names = |name: &str| -> Vec<String> {
            let store = memory_stores()[name].clone();
            let listed: Vec<object_store::ObjectMeta> =
                runtime().unwrap().block_on(store.list(None).try_collect()).unwrap();
            listed.iter().map(|meta| meta.location.to_string()).collect()
        };
        assert_eq!(names("sweep-quick"), [".vfs-tmp-journal/jv-1.1.1", ".vfs-tmp-journal/jx-1.1.1"]);
        assert_eq!(names("sweep-stalled-delete"), [".vfs-tmp-journal/jw-3.1.1"]);
    }

    /// A change the store is making is not cut off by the call's clock: a put sent before the
    /// call ran out of time is waited for and reported as made (a server may have committed
    /// it), and the file holds it.
    #[test]
    fn a_put_under_way_when_the_call_runs_out_of_time_is_finished_and_reported() {
        let config = object_store::throttle::ThrottleConfig {
            wait_put_per_call: Duration::from_secs(1),
            ..object_store::throttle::ThrottleConfig::default()
        };
        let store = object_store::throttle::ThrottledStore::new(object_store::memory::InMemory::new(), config);
        memory_stores().insert("slow-put".to_owned(), Arc::new(store));
        let spec: MountSpec = "memory://slow-put:/data:rw".parse().unwrap();
        let registry = MountRegistry::builder().mount(spec).build(crate::ambient_authority()).unwrap();
        let agent = registry.agent().with_budget(Budget::unlimited().with_time(SOON));
        let started = Instant::now();
        let written = agent.write("/data/new.txt", "made\n", &crate::Precondition::Absent).unwrap();
        assert!(started.elapsed() >= Duration::from_secs(1), "the put was not waited for");
        assert!(written.created && written.version.is_some(), "{written:?}");
        let read = registry.agent().read_text("/data/new.txt", &ReadWindow::default()).unwrap();
        assert_eq!(read.content, "made\n");
    }

    /// Every object mount's requests run on one runtime: opening more mounts starts no thread.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "the test counts the process's threads in /proc")]
    fn every_object_mount_runs_on_the_one_runtime() {
        let runtime_threads = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
                // `vfs-object-store`, cut to the kernel's 15 bytes.
                .filter(|name| name.starts_with("vfs-object-sto"))
                .count()
        };
        let open = |name: &str| ObjectRoot::open(&format!("memory://{name}:/data:ro").parse().unwrap()).unwrap();
        let first = open("one-runtime-0");
        assert_eq!(first.runtime.metrics().num_workers(), RUNTIME_THREADS);
        // Counted by name before and after, not against the worker count: tokio names its
        // blocking threads (a real bucket's DNS lookups) as it names the workers.
        let before = runtime_threads();
        assert!(before >= RUNTIME_THREADS, "{before} threads of the runtime");
        let others: Vec<ObjectRoot> = (1..5).map(|index| open(&format!("one-runtime-{index}"))).collect();
        assert_eq!(runtime_threads(), before);
        assert!(others.iter().all(|root| std::ptr::eq(root.runtime, first.runtime)));
    }

    /// A name another tool wrote both as a file and as a prefix (`pair`, `pair/child`) is
    /// listed twice by `list_directory`, the directory and the file, as a tree shows it (before
    /// 2026-12-08 only the file); a front end (the FUSE view), which can show a name once,
    /// lists the file, what a lookup of the name finds.
    #[test]
    fn a_name_that_is_a_file_and_a_prefix_is_listed_as_both_by_a_tool_and_once_by_a_view() {
        let store = object_store::memory::InMemory::new();
        for key in ["pair", "pair/child", "solo"] {
            runtime().unwrap().block_on(store.put(&Key::from(key), PutPayload::from("x\n"))).unwrap();
        }
        memory_stores().insert("pairs".to_owned(), Arc::new(store));
        let spec: MountSpec = "memory://pairs:/data:ro".parse().unwrap();
        let registry = MountRegistry::builder().mount(spec).build(crate::ambient_authority()).unwrap();
        let agent = registry.agent();
        assert_eq!(agent.list("/data").unwrap().to_text(), "[DIR] pair\n[FILE] pair\n[FILE] solo\n");
        let listed = agent.entries("/data").unwrap();
        let names: Vec<(&str, crate::EntryKind)> =
            listed.entries.iter().map(|entry| (entry.name.as_str(), entry.kind)).collect();
        assert_eq!(names, [("pair", crate::EntryKind::File), ("solo", crate::EntryKind::File)]);
        assert_eq!(agent.attributes("/data/pair").unwrap().kind, crate::EntryKind::File);
    }

    /// A request whose task panics (a fault in vfs or in the store's client) is a failed
    /// request, never a panic of the caller's thread: without a clock and with one, for a
    /// read and for a change; the runtime goes on answering.
    #[test]
    fn a_request_whose_task_panics_fails_and_the_runtime_goes_on() {
        let fault = || async { panic!("a fault in a request (this test's own)") };
        let root = ObjectRoot::open(&"memory://panicking:/data:rw".parse().unwrap()).unwrap();
        let failed = |result: Result<(), StoreError>| {
            matches!(result, Err(StoreError::Other(object_store::Error::Generic { store: "vfs", .. })))
        };
        assert!(failed(root.block(fault())));
        assert!(failed(root.finish_change(fault())));
        let clock = Arc::new(Budget::unlimited().with_time(Duration::from_mins(1)).start(crate::Operation::Write));
        let _entered = clock.enter();
        assert!(failed(root.block(fault())));
        assert!(failed(root.block_change(fault())));
        assert_eq!(root.block(async { 7 }).unwrap(), 7);
        let path = VirtualPath::new("/data/a.txt").unwrap();
        let error = store_error(&path, task_failed());
        assert_eq!(error.to_string(), Error::store_failed(&path).to_string());
    }

    /// A read that spans several ranged requests is pinned to the version it started on: an
    /// object replaced between two ranges fails the read as changed.
    #[test]
    fn a_read_across_ranges_fails_when_the_object_is_replaced_midway() {
        let spec: MountSpec = "memory://pinned-reads:/data:rw".parse().unwrap();
        let root = ObjectRoot::open(&spec).unwrap();
        let rel = vec!["big.txt".to_owned()];
        let first = vec![b'a'; 3 * WINDOW as usize];
        root.put_object(&rel, first, &PutWhen::Any).unwrap();
        let info = root.head_object(&rel).unwrap().unwrap();
        let mut reader = root.reader(&rel, &info);
        let mut buffer = vec![0u8; WINDOW as usize];
        reader.read_exact(&mut buffer).unwrap();
        assert!(buffer.iter().all(|&byte| byte == b'a'));
        root.put_object(&rel, vec![b'b'; 3 * WINDOW as usize], &PutWhen::Any).unwrap();
        let error = reader.read_exact(&mut buffer).unwrap_err();
        let path = crate::VirtualPath::new("/data/big.txt").unwrap();
        let error = crate::Error::io(&path, error);
        assert_eq!(error.kind(), crate::ErrorKind::Changed);
        assert_eq!(error.to_string(), "`/data/big.txt` changed while vfs was working on it; try again");
    }
}
