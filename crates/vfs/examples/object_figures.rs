//! The figures of issue 6, in one run against an S3-compatible server (moto from
//! `scripts/s3-server`):
//!
//! - read throughput of one 64 MiB object through vfs (`read_text` of the whole object, the read
//!   cap raised above its size, so the core reads it with one streamed GET) against the
//!   `object_store` crate called directly on the same object (one GET, and 1 MiB ranged GETs,
//!   for scale), as MB/s and the ratio;
//! - `list_directory` of a prefix holding 10,000 objects: entries returned, the truncated flag,
//!   and the time (with the direct delimiter listing for comparison).
//!
//! ```text
//! eval "$(scripts/s3-server)"
//! cargo run --release -p vfs --features s3 --example object_figures
//! kill "$(cat .venv/s3-server.pid)"
//! ```
//!
//! Endpoint and credentials come from the `AWS_*` variables, the bucket from
//! `VFS_TEST_S3_BUCKET`; everything is written under a fresh key prefix and deleted at the end.
#![expect(clippy::print_stdout, reason = "an example prints its findings")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload};
use vfs::{Limits, MountRegistry, MountSpec, ReadWindow};

const OBJECT_BYTES: usize = 64 * 1024 * 1024;
const RANGE_BYTES: u64 = 1024 * 1024;
const LISTED_OBJECTS: usize = 10_000;
const ROUNDS: usize = 3;

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let bucket = std::env::var("VFS_TEST_S3_BUCKET")
        .map_err(|_| "set VFS_TEST_S3_BUCKET and the AWS_* variables: eval \"$(scripts/s3-server)\"")?;
    let prefix = format!("figures-{}-{}", std::process::id(), std::time::UNIX_EPOCH.elapsed()?.as_millis());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let allow_http = std::env::var("AWS_ALLOW_HTTP").is_ok_and(|value| value == "true" || value == "1");
    let store: Arc<dyn ObjectStore> =
        Arc::new(AmazonS3Builder::from_env().with_bucket_name(&bucket).with_allow_http(allow_http).build()?);

    let result = run(&runtime, &store, &bucket, &prefix);
    println!("cleaning up `{prefix}/`");
    let cleanup = runtime.block_on(delete_prefix(&store, &prefix));
    result?;
    cleanup
}

fn run(
    runtime: &tokio::runtime::Runtime,
    store: &Arc<dyn ObjectStore>,
    bucket: &str,
    prefix: &str,
) -> Result<(), Failure> {
    // One 64 MiB text object: 64-byte lines.
    let big = Key::from(format!("{prefix}/read/big.txt"));
    let line = format!("{}\n", "0123456789abcdef".repeat(4).get(..63).unwrap_or_default());
    let content = line.repeat(OBJECT_BYTES / line.len());
    assert_eq!(content.len(), OBJECT_BYTES);
    runtime.block_on(store.put(&big, PutPayload::from(content.clone().into_bytes())))?;

    let mut limits = Limits::default();
    limits.read_bytes = OBJECT_BYTES as u64 + 1;
    let spec: MountSpec = format!("s3://{bucket}/{prefix}:/data:ro").parse()?;
    let registry = MountRegistry::builder().mount(spec).limits(limits).build(vfs::ambient_authority())?;
    read_figures(runtime, store, &registry, &big, &content)?;
    listing_figures(runtime, store, &registry, prefix)
}

/// A whole 64 MiB object read through vfs, with one GET, and with 1 MiB ranges.
fn read_figures(
    runtime: &tokio::runtime::Runtime,
    store: &Arc<dyn ObjectStore>,
    registry: &MountRegistry,
    big: &Key,
    content: &str,
) -> Result<(), Failure> {
    let agent = registry.agent();
    let mut through_vfs = Vec::new();
    let mut one_get = Vec::new();
    let mut ranged = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let read = agent.read_text("/data/read/big.txt", &ReadWindow::default())?;
        through_vfs.push(started.elapsed());
        assert!(!read.truncated && read.content.len() == OBJECT_BYTES && read.content == content);

        let started = Instant::now();
        let bytes = runtime.block_on(async { store.get(big).await?.bytes().await })?;
        one_get.push(started.elapsed());
        assert_eq!(bytes.len(), OBJECT_BYTES);

        let started = Instant::now();
        let total = runtime.block_on(async {
            let mut total = 0usize;
            let mut start = 0u64;
            while start < OBJECT_BYTES as u64 {
                let end = (start + RANGE_BYTES).min(OBJECT_BYTES as u64);
                total += store.get_range(big, start..end).await?.len();
                start = end;
            }
            Ok::<_, object_store::Error>(total)
        })?;
        ranged.push(started.elapsed());
        assert_eq!(total, OBJECT_BYTES);
    }
    let vfs_rate = rate(median(&mut through_vfs));
    let get_rate = rate(median(&mut one_get));
    let ranged_rate = rate(median(&mut ranged));
    println!("read of one 64 MiB object, median of {ROUNDS} rounds (MB = 10^6 bytes):");
    println!("  vfs read_text (whole object, one GET):          {vfs_rate:8.1} MB/s  {:?}", seconds(&through_vfs));
    println!("  object_store get (one GET):                     {get_rate:8.1} MB/s  {:?}", seconds(&one_get));
    println!("  object_store get_range (1 MiB ranges):          {ranged_rate:8.1} MB/s  {:?}", seconds(&ranged));
    println!("  ratio vfs / object_store one GET:     {:.2}x", vfs_rate / get_rate);
    println!("  ratio vfs / object_store 1 MiB ranges: {:.2}x", vfs_rate / ranged_rate);
    Ok(())
}

/// 10,000 objects under one prefix: uploaded, listed through vfs and directly, searched.
fn listing_figures(
    runtime: &tokio::runtime::Runtime,
    store: &Arc<dyn ObjectStore>,
    registry: &MountRegistry,
    prefix: &str,
) -> Result<(), Failure> {
    let agent = registry.agent();
    let started = Instant::now();
    runtime.block_on(
        futures_util::stream::iter(0..LISTED_OBJECTS)
            .map(|index| {
                let store = Arc::clone(store);
                let key = Key::from(format!("{prefix}/many/object-{index:05}.txt"));
                async move { store.put(&key, PutPayload::from_static(b"x\n")).await }
            })
            .buffer_unordered(32)
            .try_collect::<Vec<_>>(),
    )?;
    println!("uploaded {LISTED_OBJECTS} objects in {:.1} s", started.elapsed().as_secs_f64());

    let started = Instant::now();
    let listing = agent.list("/data/many")?;
    let listed = started.elapsed();
    println!(
        "vfs list_directory of {LISTED_OBJECTS} objects (entry cap {}): {} entries returned, total {}, truncated {}, {:.2} s",
        registry.limits().entries,
        listing.entries.len(),
        listing.total,
        listing.truncated,
        listed.as_secs_f64()
    );
    let started = Instant::now();
    let many = Key::from(format!("{prefix}/many"));
    let direct = runtime.block_on(store.list_with_delimiter(Some(&many)))?;
    println!(
        "object_store list_with_delimiter of the same prefix: {} objects, {:.2} s",
        direct.objects.len(),
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let found = agent.search_files("/data/many", "object-0999*", &[])?;
    println!(
        "vfs search_files `object-0999*` over the prefix: {} matches, truncated {}, {:.2} s",
        found.matches.len(),
        found.truncated,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Deletes every object under `prefix`, in bulk requests.
async fn delete_prefix(store: &Arc<dyn ObjectStore>, prefix: &str) -> Result<(), Failure> {
    let root = Key::from(prefix);
    let locations = store.list(Some(&root)).map_ok(|meta| meta.location).boxed();
    store.delete_stream(locations).try_collect::<Vec<_>>().await?;
    Ok(())
}

fn median(durations: &mut [Duration]) -> Duration {
    durations.sort();
    durations[durations.len() / 2]
}

#[expect(clippy::cast_precision_loss, reason = "64 MiB is exact in an f64")]
fn rate(duration: Duration) -> f64 {
    OBJECT_BYTES as f64 / duration.as_secs_f64() / 1e6
}

fn seconds(durations: &[Duration]) -> Vec<String> {
    durations.iter().map(|duration| format!("{:.2}s", duration.as_secs_f64())).collect()
}
