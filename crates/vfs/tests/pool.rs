//! The registry's worker pool: content searches run on its fixed set of threads, shared by
//! concurrent calls and by the registries given one pool, and start no threads of their own.
//! The answers are the same whatever the pool's size.
//!
//! The checks count the process's threads (`/proc/self/task`), so they are one test, run one
//! after the other: no other test's thread comes or goes while they count.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::Fixture;
use vfs::{GrepRequest, GrepResult, MountRegistry, WorkerPool};

const FILES: usize = 400;

/// `FILES` files in eight directories; every seventh holds a matching line among filler.
fn tree(fixture: &Fixture) {
    let filler = "nothing to see on this line\n".repeat(200);
    for index in 0..FILES {
        let needle = if index % 7 == 0 { format!("needle {index}\n") } else { String::new() };
        fixture.file(&format!("data/dir{}/file{index:03}.txt", index % 8), &format!("{filler}{needle}{filler}"));
    }
}

fn needle() -> GrepRequest {
    GrepRequest { pattern: "needle".into(), path: Some("/data".into()), max_results: Some(1000), ..Default::default() }
}

/// The names of the process's threads.
#[expect(clippy::disallowed_methods, reason = "the test counts the process's threads in /proc")]
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .collect()
}

fn pool_threads() -> usize {
    threads().iter().filter(|name| name.starts_with("vfs-worker-")).count()
}

/// Waits until the threads of pools dropped by an earlier test have ended.
fn no_pool_threads() {
    let started = Instant::now();
    while pool_threads() > 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the threads of a dropped pool did not end");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `calls` callers at once, each making three greps on its own thread (over the
/// registries in turn), while another thread counts the process's threads every millisecond;
/// returns the most seen, counted also once every caller is done and still there.
fn most_threads_during(registries: &[MountRegistry], calls: usize) -> usize {
    let finished = Arc::new(Barrier::new(calls + 1));
    let release = Arc::new(Barrier::new(calls + 1));
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(0));
    let sampler = std::thread::spawn({
        let (done, most) = (done.clone(), most.clone());
        move || {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(threads().len(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let callers: Vec<_> = (0..calls)
        .map(|index| {
            let agent = registries[index % registries.len()].agent();
            let (finished, release) = (finished.clone(), release.clone());
            std::thread::spawn(move || {
                for _ in 0..3 {
                    let found = agent.grep(&needle()).unwrap();
                    assert_eq!((found.files_searched, found.matches), (FILES, FILES.div_ceil(7)));
                }
                finished.wait();
                release.wait();
            })
        })
        .collect();
    finished.wait();
    most.fetch_max(threads().len(), Ordering::Relaxed);
    release.wait();
    for caller in callers {
        caller.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    most.load(Ordering::Relaxed)
}

#[test]
fn greps_share_a_fixed_set_of_threads_and_answer_alike() {
    concurrent_greps_run_on_the_registrys_pool_and_start_no_threads();
    registries_given_one_pool_share_its_threads();
    the_answer_is_the_same_whatever_the_pools_size();
}

fn concurrent_greps_run_on_the_registrys_pool_and_start_no_threads() {
    no_pool_threads();
    let fixture = Fixture::new();
    tree(&fixture);
    let registry = MountRegistry::builder()
        .mount(fixture.spec("data", "/data", "ro"))
        .workers(3)
        .build(vfs::ambient_authority())
        .unwrap();
    assert_eq!(registry.pool().threads(), 3);
    // The pool's threads start with the first search.
    assert_eq!(pool_threads(), 0);
    registry.agent().grep(&needle()).unwrap();
    assert_eq!(pool_threads(), 3);
    let before = threads().len();

    let calls = 6;
    let most = most_threads_during(std::slice::from_ref(&registry), calls);

    // The callers and the sampler, nothing else: no grep started a thread (a thread per
    // worker and call would be up to 18 more).
    assert_eq!(most, before + calls + 1, "{:?}", threads());
    assert_eq!(pool_threads(), 3);
    drop(registry);
    no_pool_threads();
}

fn registries_given_one_pool_share_its_threads() {
    no_pool_threads();
    let fixture = Fixture::new();
    tree(&fixture);
    let pool = WorkerPool::new(2);
    let registries: Vec<MountRegistry> = (0..3)
        .map(|_| {
            MountRegistry::builder()
                .mount(fixture.spec("data", "/data", "ro"))
                .pool(pool.clone())
                .build(vfs::ambient_authority())
                .unwrap()
        })
        .collect();
    registries[0].agent().grep(&needle()).unwrap();
    assert_eq!(pool_threads(), 2);
    let before = threads().len();

    let most = most_threads_during(&registries, 6);

    assert_eq!(most, before + 6 + 1, "{:?}", threads());
    assert_eq!(pool_threads(), 2);
    // The threads end with the last registry holding the pool.
    drop(pool);
    drop(registries);
    no_pool_threads();
}

fn the_answer_is_the_same_whatever_the_pools_size() {
    let fixture = Fixture::new();
    tree(&fixture);
    let requests = [
        needle(),
        // Stopped by `maxResults` within the first batch: exactly the first matches in walk order.
        GrepRequest { max_results: Some(5), ..needle() },
        GrepRequest { context: Some(1), max_results: Some(40), ..needle() },
        GrepRequest { pattern: "nothing".into(), max_results: Some(250), ..needle() },
    ];
    let answers = |workers: usize| {
        let registry = MountRegistry::builder()
            .mount(fixture.spec("data", "/data", "ro"))
            .workers(workers)
            .build(vfs::ambient_authority())
            .unwrap();
        requests.iter().map(|request| registry.agent().grep(request).unwrap()).collect::<Vec<_>>()
    };
    let one = answers(1);
    // Walk order: the directories in name order, each one's files in name order.
    let first: Vec<String> = one[1].lines.iter().map(|line| format!("{}:{}", line.path.as_str(), line.text)).collect();
    assert_eq!(
        first,
        [
            "/data/dir0/file000.txt:needle 0",
            "/data/dir0/file056.txt:needle 56",
            "/data/dir0/file112.txt:needle 112",
            "/data/dir0/file168.txt:needle 168",
            "/data/dir0/file224.txt:needle 224",
        ]
    );
    assert!(one[1].truncated);
    assert_eq!((one[3].matches, one[3].truncated), (250, true));
    // A search stopped by `maxResults` may have searched a file or two more on more threads
    // (each finishes the file it is in), so `filesSearched` is compared where none stopped.
    let shown = |answers: &[GrepResult]| {
        answers.iter().map(|answer| (answer.lines.clone(), answer.matches, answer.truncated)).collect::<Vec<_>>()
    };
    for workers in [2, 3, 8] {
        let answers = answers(workers);
        assert_eq!(answers[0], one[0], "with {workers} threads");
        assert_eq!(shown(&answers), shown(&one), "with {workers} threads");
    }
}
