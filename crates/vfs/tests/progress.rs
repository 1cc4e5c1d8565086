//! Progress reports of long calls: the first at the start, then true counts that only grow,
//! reported by whichever thread is working; none once the call is cancelled, none after it
//! returns.
//!
//! The sinks here take a little longer over each report than the quarter second the deadline
//! keeps between two reports, so the next count after a report always goes out: the calls are
//! as slow as their reports, whatever the machine's speed, and the sequences are exact.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use common::Fixture;
use vfs::{Budget, ErrorKind, GrepRequest, MountRegistry, Progress, ProgressSink};

/// Longer than the deadline's quarter second between reports.
const SLOW: Duration = Duration::from_millis(260);

/// What a sink was told, and by which thread.
#[derive(Default)]
struct Seen {
    reports: Mutex<Vec<(Progress, ThreadId)>>,
    /// Set by the test once the call has returned.
    returned: AtomicBool,
    /// Reports that came after `returned` was set.
    late: AtomicUsize,
}

impl Seen {
    /// A sink that records each report into `seen`, runs `then` on it, and takes [`SLOW`].
    fn sink(seen: &Arc<Self>, then: impl Fn(&Progress) + Send + Sync + 'static) -> ProgressSink {
        let seen = seen.clone();
        Arc::new(move |progress: Progress| {
            if seen.returned.load(Ordering::SeqCst) {
                seen.late.fetch_add(1, Ordering::SeqCst);
            }
            then(&progress);
            seen.reports.lock().unwrap().push((progress, std::thread::current().id()));
            std::thread::sleep(SLOW);
        })
    }

    /// Marks the call returned, waits longer than a report takes, and checks that nothing came
    /// after the return; then the reports.
    fn after_return(&self) -> Vec<(Progress, ThreadId)> {
        self.returned.store(true, Ordering::SeqCst);
        let reports = self.reports.lock().unwrap().clone();
        std::thread::sleep(SLOW * 2);
        assert_eq!(self.late.load(Ordering::SeqCst), 0, "a report came after the call returned");
        assert_eq!(self.reports.lock().unwrap().len(), reports.len());
        reports
    }
}

/// The `done`, `total` and message of each report.
fn counts(reports: &[(Progress, ThreadId)]) -> Vec<(u64, Option<u64>, String)> {
    reports.iter().map(|(progress, _)| (progress.done, progress.total, progress.message.clone())).collect()
}

const FILES: usize = 300;

/// `FILES` files in ten directories; every fifth file holds two matching lines among filler.
/// Returns the number of matching lines.
fn search_tree(fixture: &Fixture) -> usize {
    let filler = "nothing to see on this line\n".repeat(64);
    let mut matches = 0;
    for index in 0..FILES {
        let needles = if index % 5 == 0 { "needle one\nneedle two\n" } else { "" };
        matches += needles.lines().count();
        fixture.file(&format!("data/dir{}/file{index}.txt", index % 10), &format!("{filler}{needles}{filler}"));
    }
    matches
}

fn registry(fixture: &Fixture) -> MountRegistry {
    MountRegistry::builder().mount(fixture.spec("data", "/data", "ro")).build(vfs::ambient_authority()).unwrap()
}

/// The files and matches a grep report counts, from its message.
fn grep_counts(progress: &Progress) -> (u64, usize) {
    let (files, matches) = progress.message.split_once(" files searched, ").expect(&progress.message);
    let matches = matches.strip_suffix(" matches").expect(&progress.message);
    (files.parse().unwrap(), matches.parse().unwrap())
}

fn needle() -> GrepRequest {
    GrepRequest { pattern: "needle".into(), path: Some("/data".into()), ..GrepRequest::default() }
}

#[test]
fn a_grep_reports_at_the_start_then_true_counts_from_its_workers() {
    let fixture = Fixture::new();
    let total_matches = search_tree(&fixture);
    let registry = registry(&fixture);
    let seen = Arc::new(Seen::default());
    let agent = registry.agent().with_budget(Budget::unlimited().with_progress(Seen::sink(&seen, |_| {})));

    let found = agent.grep(&needle()).unwrap();
    let reports = seen.after_return();

    assert_eq!((found.files_searched, found.matches, found.truncated), (FILES, total_matches, false));
    // The first report is made at the start, by the calling thread, before any file is counted.
    let caller = std::thread::current().id();
    assert_eq!(counts(&reports[..1]), [(0, None, "0 files searched, 0 matches".to_owned())]);
    assert_eq!(reports[0].1, caller);
    // The start report took longer than a quarter second, so the first file counted after it
    // is reported: by the worker that searched it, while the search runs, not at the merge.
    assert!(reports.len() >= 2, "{:?}", counts(&reports));
    let mut last = (0, 0);
    for (progress, thread) in &reports[1..] {
        assert_ne!(*thread, caller, "a count was reported from the merge, not a worker");
        let (files, matches) = grep_counts(progress);
        assert_eq!((progress.done, progress.total), (files, None));
        assert!(files > last.0 && matches >= last.1, "counts went back: {:?}", counts(&reports));
        assert!(files <= FILES as u64 && matches <= total_matches, "{:?}", counts(&reports));
        last = (files, matches);
    }
}

#[test]
fn a_grep_cancelled_from_its_sink_reports_nothing_more_and_says_so() {
    let fixture = Fixture::new();
    search_tree(&fixture);
    let registry = registry(&fixture);
    let seen = Arc::new(Seen::default());
    let flag = Arc::new(AtomicBool::new(false));
    let cancel = flag.clone();
    // Cancelled as soon as a file is counted, from within the worker's report.
    let sink = Seen::sink(&seen, move |progress| {
        if progress.done > 0 {
            cancel.store(true, Ordering::SeqCst);
        }
    });
    let agent = registry.agent().with_budget(Budget::unlimited().with_cancel_flag(flag).with_progress(sink));

    let error = agent.grep(&needle()).unwrap_err();
    let reports = seen.after_return();

    assert_eq!(error.kind(), ErrorKind::Cancelled);
    // The start report, then the one that set the flag: the other workers' counts after it are
    // not reported.
    assert_eq!(reports.len(), 2, "{:?}", counts(&reports));
    assert_eq!(reports[0].0.done, 0);
    assert!(reports[1].0.done > 0);
}

/// Two mounts, `/a` with three entries and `/b` with one, for walks from `/`.
fn two_mounts(fixture: &Fixture) -> MountRegistry {
    fixture.file("a/one.txt", "1\n");
    fixture.file("a/sub/two.txt", "2\n");
    fixture.file("b/three.txt", "3\n");
    MountRegistry::builder()
        .mount(fixture.spec("a", "/a", "ro"))
        .mount(fixture.spec("b", "/b", "ro"))
        .build(vfs::ambient_authority())
        .unwrap()
}

#[test]
fn a_tree_over_several_mounts_counts_the_whole_call() {
    let fixture = Fixture::new();
    let registry = two_mounts(&fixture);
    let seen = Arc::new(Seen::default());
    let agent = registry.agent().with_budget(Budget::unlimited().with_progress(Seen::sink(&seen, |_| {})));

    let tree = agent.tree("/", None, &[]).unwrap();
    let reports = seen.after_return();

    // `a`, its three entries, `b` and its one: each mount's walk goes on from the count before
    // it, and each report (taking longer than a quarter second) lets the next count out.
    assert_eq!(tree.count, 6);
    let expected: Vec<_> = (0..=6).map(|done| (done, None, format!("{done} entries listed"))).collect();
    assert_eq!(counts(&reports), expected);
}

#[test]
fn a_name_search_over_several_mounts_counts_the_whole_call() {
    let fixture = Fixture::new();
    let registry = two_mounts(&fixture);
    let seen = Arc::new(Seen::default());
    let agent = registry.agent().with_budget(Budget::unlimited().with_progress(Seen::sink(&seen, |_| {})));

    let found = agent.search_files("/", "*.txt", &[]).unwrap();
    let reports = seen.after_return();

    assert_eq!(found.matches.len(), 3);
    // `/a/one.txt`, `/a/sub`, `/a/sub/two.txt`, `/b/three.txt`, each counted once judged.
    let expected: Vec<_> = [(0, 0), (1, 1), (2, 1), (3, 2), (4, 3)]
        .map(|(done, found)| (done, None, format!("{done} entries scanned, {found} matches")))
        .into();
    assert_eq!(counts(&reports), expected);
}

#[test]
fn a_multi_file_read_counts_files_read_of_the_total() {
    let fixture = Fixture::new();
    let registry = two_mounts(&fixture);
    let seen = Arc::new(Seen::default());
    let agent = registry.agent().with_budget(Budget::unlimited().with_progress(Seen::sink(&seen, |_| {})));

    let paths = ["/a/one.txt", "/a/sub/two.txt", "/b/three.txt"].map(str::to_owned);
    let read = agent.read_multiple(&paths).unwrap();
    let reports = seen.after_return();

    assert!(read.iter().all(|(_, result)| result.is_ok()));
    let expected: Vec<_> = (0..=3).map(|done| (done, Some(3), format!("{done} of 3 files read"))).collect();
    assert_eq!(counts(&reports), expected);
}
