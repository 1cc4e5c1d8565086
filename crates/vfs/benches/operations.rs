//! Micro-benchmarks: each group puts a vfs operation next to its raw baseline in the same run,
//! so the figure that matters is the ratio (issue 5, section 1). Targets are in
//! `docs/performance.md`; nothing here fails on time.
#![expect(clippy::disallowed_methods, clippy::disallowed_types, reason = "the baselines are the raw std::fs calls")]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use vfs::{Access, GrepRequest, MountRegistry, MountSpec, NameRule, Precondition, ReadWindow};

fn spec(path: &std::path::Path, root: &str, rights: &str) -> MountSpec {
    format!("{}:{root}:{rights}", path.display()).parse().unwrap()
}

fn resolve(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = MountRegistry::builder();
    for index in 0..20 {
        let physical = dir.path().join(format!("m{index}"));
        std::fs::create_dir_all(&physical).unwrap();
        builder.mount(spec(&physical, &format!("/mount{index}"), "rw"));
    }
    let registry = builder.build(vfs::ambient_authority()).unwrap();
    c.bench_function("resolve/5-segment path, 20 mounts (no I/O)", |b| {
        b.iter(|| registry.decide(black_box("/mount13/app/src/module/file.rs"), Access::Read).unwrap());
    });
}

fn read_and_info(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data/app/src/file.txt");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "x".repeat(4096)).unwrap();
    let registry = MountRegistry::builder()
        .mount(spec(&dir.path().join("data"), "/src", "ro"))
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let mut group = c.benchmark_group("read 4 KiB");
    group.bench_function("std::fs::read", |b| b.iter(|| std::fs::read(black_box(&file)).unwrap()));
    group.bench_function("vfs read_text_file", |b| {
        b.iter(|| agent.read_text(black_box("/src/app/src/file.txt"), &ReadWindow::default()).unwrap());
    });
    let ruled = MountRegistry::builder()
        .mount(spec(&dir.path().join("data"), "/src", "ro"))
        .name_rules(NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap();
    let ruled = ruled.agent();
    group.bench_function("vfs read_text_file, default name rules", |b| {
        b.iter(|| ruled.read_text(black_box("/src/app/src/file.txt"), &ReadWindow::default()).unwrap());
    });
    group.finish();
    let mut group = c.benchmark_group("file info");
    group.bench_function("std::fs::metadata", |b| b.iter(|| std::fs::metadata(black_box(&file)).unwrap()));
    // What any confined lookup pays at least: a descriptor (open, fstat, close), not one statx.
    group.bench_function("std::fs::File::open + metadata", |b| {
        b.iter(|| std::fs::File::open(black_box(&file)).unwrap().metadata().unwrap());
    });
    // A file unchanged for a few seconds (the common case: an agent looks at files it did not
    // just write) has its content-hash version filed; make sure this one has settled and its
    // hash is confirmed.
    let age = std::fs::metadata(&file).unwrap().modified().unwrap().elapsed().unwrap_or_default();
    std::thread::sleep(std::time::Duration::from_millis(3500).saturating_sub(age));
    // A filed hash is served once a second hash 3 s later confirms it.
    agent.info("/src/app/src/file.txt").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3100));
    agent.info("/src/app/src/file.txt").unwrap();
    group.bench_function("vfs get_file_info (file settled: version filed)", |b| {
        b.iter(|| agent.info(black_box("/src/app/src/file.txt")).unwrap());
    });
    // A file changed within the last 3 s is read and hashed on every call.
    let handle = std::fs::File::options().write(true).open(&file).unwrap();
    group.bench_function("vfs get_file_info (file just changed: hashed)", |b| {
        b.iter_batched(
            || handle.set_modified(std::time::SystemTime::now()).unwrap(),
            |()| agent.info(black_box("/src/app/src/file.txt")).unwrap(),
            criterion::BatchSize::SmallInput,
        );
    });
    group.finish();
}

fn write(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    std::fs::create_dir_all(dir.path().join("fast")).unwrap();
    let durable = MountRegistry::builder()
        .mount(spec(&dir.path().join("out"), "/out", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    let fast = MountRegistry::builder()
        .mount(spec(&dir.path().join("fast"), "/out", "rw"))
        .sync_writes(false)
        .build(vfs::ambient_authority())
        .unwrap();
    let content = "y".repeat(4096);
    let raw = dir.path().join("raw.txt");
    let overwrite = Precondition::Any;
    let mut group = c.benchmark_group("write 4 KiB");
    group.bench_function("std::fs::write", |b| b.iter(|| std::fs::write(black_box(&raw), &content).unwrap()));
    group.bench_function("std::fs::write + fsync", |b| {
        b.iter(|| {
            std::fs::write(black_box(&raw), &content).unwrap();
            std::fs::File::open(&raw).unwrap().sync_all().unwrap();
        });
    });
    group.bench_function("vfs write_file (atomic, fsync)", |b| {
        b.iter(|| durable.agent().write(black_box("/out/file.txt"), &content, &overwrite).unwrap());
    });
    group.bench_function("vfs write_file (atomic, no fsync)", |b| {
        b.iter(|| fast.agent().write(black_box("/out/file.txt"), &content, &overwrite).unwrap());
    });
    group.finish();
}

fn list(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    for index in 0..1000 {
        std::fs::write(data.join(format!("entry-{index:04}.txt")), "").unwrap();
    }
    let registry = MountRegistry::builder().mount(spec(&data, "/src", "ro")).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    let mut group = c.benchmark_group("list 1,000 entries");
    group.bench_function("std::fs::read_dir + file_type", |b| {
        b.iter(|| {
            std::fs::read_dir(black_box(&data))
                .unwrap()
                .map(|entry| {
                    let entry = entry.unwrap();
                    (entry.file_name(), entry.file_type().unwrap().is_dir())
                })
                .count()
        });
    });
    group.bench_function("vfs list_directory", |b| b.iter(|| agent.list(black_box("/src")).unwrap()));
    let ruled = MountRegistry::builder()
        .mount(spec(&data, "/src", "ro"))
        .name_rules(NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap();
    let ruled = ruled.agent();
    group.bench_function("vfs list_directory, default name rules", |b| {
        b.iter(|| ruled.list(black_box("/src")).unwrap());
    });
    let placed: MountSpec =
        format!("{}:/src:ro;**/*.key:hidden;secrets:hidden;docs/*.md:ro", data.display()).parse().unwrap();
    let placed = MountRegistry::builder()
        .mount(placed)
        .name_rules(NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap();
    let placed = placed.agent();
    group.bench_function("vfs list_directory, default and mount-string rules", |b| {
        b.iter(|| placed.list(black_box("/src")).unwrap());
    });
    group.finish();
}

/// Content search (`grep`): many small files (the walk and the per-file work dominate), a search
/// that stops at `maxResults` early, and a few large files (the searching itself dominates).
fn grep(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    for index in 0..1000 {
        let directory = small.join(format!("d{:02}", index / 50));
        std::fs::create_dir_all(&directory).unwrap();
        let needle = if index % 100 == 7 { "let needle = 1;\n" } else { "" };
        let body = format!("fn function_{index}() {{\n    let value = {index};\n{needle}    value + 1\n}}\n");
        std::fs::write(directory.join(format!("f{index:04}.rs")), body.repeat(20)).unwrap();
    }
    let large = dir.path().join("large");
    std::fs::create_dir_all(&large).unwrap();
    let line = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu\n";
    for index in 0..8 {
        std::fs::write(large.join(format!("l{index}.txt")), line.repeat(1024 * 1024 / line.len())).unwrap();
    }
    let registry = MountRegistry::builder()
        .mount(spec(&small, "/small", "ro"))
        .mount(spec(&large, "/large", "ro"))
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let request = |pattern: &str, path: &str, max_results: Option<usize>| GrepRequest {
        pattern: pattern.to_owned(),
        path: Some(path.to_owned()),
        max_results,
        ..GrepRequest::default()
    };
    let mut group = c.benchmark_group("grep");
    let all = request("needle", "/small", Some(1000));
    group.bench_function("1,000 small files, 10 of them matching", |b| b.iter(|| agent.grep(black_box(&all)).unwrap()));
    let first = request("value", "/small", Some(10));
    group.bench_function("1,000 small files, stopped at 10 matches", |b| {
        b.iter(|| agent.grep(black_box(&first)).unwrap());
    });
    let scan = request(r"\bomega\w+", "/large", None);
    group.bench_function("8 files of 1 MiB, no match", |b| b.iter(|| agent.grep(black_box(&scan)).unwrap()));
    group.finish();
}

fn scrub(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = MountRegistry::builder();
    for index in 0..4 {
        let physical = dir.path().join(format!("m{index}"));
        std::fs::create_dir_all(&physical).unwrap();
        builder.mount(spec(&physical, &format!("/mount{index}"), "rw"));
    }
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    builder.internal(spec(&dir.path().join("logs"), "/llm-logs", "rw"));
    let registry = builder.build(vfs::ambient_authority()).unwrap();
    let line = "/mount1/src/some/file.rs:120:    let value = compute(input, &options)?; // virtual paths only\n";
    let text = line.repeat(64 * 1024 / line.len() + 1);
    c.bench_function("scrub 64 KiB of clean agent-bound text", |b| b.iter(|| registry.scrub(black_box(&text)).len()));
}

criterion_group!(benches, resolve, read_and_info, write, list, grep, scrub);
criterion_main!(benches);
