//! The journal's cost (`docs/performance.md`): a 4 KiB write, an edit of a 1 MiB file and a
//! recursive delete of 10,000 files through the tools, with `--journal` and without, in the
//! same run, alternating; then what another process's writes wait while one compacts a long
//! log. `cargo bench -p vfs-host --bench journal` (`-- --quick`: fewer rounds, a shorter log;
//! `-- --compaction`: only the last, three times).
#![expect(clippy::disallowed_methods, reason = "fixture: the benchmark builds its trees on disk")]
#![expect(clippy::print_stdout, reason = "tooling: a benchmark prints its table")]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

fn tools(base: &Path, name: &str, journal: bool) -> vfs_host::ToolService {
    let work = base.join(name);
    std::fs::create_dir_all(&work).unwrap();
    let options = vfs_host::LaunchOptions {
        mounts: vec![format!("{}:/w:rw", work.display())],
        journal: journal.then(|| base.join(format!("{name}-journal"))),
        no_read_before_edit: true,
        current_dir: base.to_path_buf(),
        ..vfs_host::LaunchOptions::default()
    };
    vfs_host::compose(&options, vfs::ambient_authority()).unwrap().tools(None)
}

fn call(tools: &vfs_host::ToolService, tool: &str, arguments: &serde_json::Value) -> Duration {
    let serde_json::Value::Object(arguments) = arguments.clone() else { unreachable!() };
    let started = Instant::now();
    let output = tools.call(tool, Some(arguments)).unwrap();
    let took = started.elapsed();
    assert!(!output.is_error, "{tool}: {}", output.text);
    took
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn row(name: &str, off: Vec<Duration>, on: Vec<Duration>) {
    let (off, on) = (median(off), median(on));
    println!(
        "| {name} | {:.3} ms | {:.3} ms | {:.2}× |",
        off.as_secs_f64() * 1e3,
        on.as_secs_f64() * 1e3,
        on.as_secs_f64() / off.as_secs_f64()
    );
}

fn main() {
    let quick = std::env::args().any(|argument| argument == "--quick");
    let base = tempfile::tempdir().unwrap();
    if std::env::args().any(|argument| argument == "--compaction") {
        for round in 0..3 {
            compaction_stall(&base.path().join(format!("round-{round}")), quick);
            alternating(&base.path().join(format!("alternating-{round}")), quick);
            at_bound(&base.path().join(format!("at-bound-{round}")), quick);
        }
        return;
    }
    let (off, on) = (tools(base.path(), "off", false), tools(base.path(), "on", true));
    let both = [&off, &on];
    println!("| operation (median) | journal off | journal on | ratio |");
    println!("|---|---|---|---|");

    let rounds = if quick { 20 } else { 200 };
    let content = "x".repeat(4095) + "\n";
    let mut samples = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for (index, tools) in both.iter().enumerate() {
            let path = format!("/w/file-{}.txt", round % 10);
            let arguments = json!({ "path": path, "content": content, "overwrite": true });
            samples[index].push(call(tools, "write_file", &arguments));
        }
    }
    let [write_off, write_on] = samples;
    row("write_file, 4 KiB over a 4 KiB file", write_off, write_on);

    let rounds = if quick { 6 } else { 30 };
    let big = "line of text in a large file\n".repeat(1024 * 1024 / 29);
    for name in ["off", "on"] {
        std::fs::write(base.path().join(name).join("big.txt"), format!("MARKER-A\n{big}")).unwrap();
    }
    let mut samples = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let (old, new) = if round % 2 == 0 { ("MARKER-A", "MARKER-B") } else { ("MARKER-B", "MARKER-A") };
        for (index, tools) in both.iter().enumerate() {
            let arguments = json!({ "path": "/w/big.txt", "edits": [{ "oldText": old, "newText": new }] });
            samples[index].push(call(tools, "edit_file", &arguments));
        }
    }
    let [edit_off, edit_on] = samples;
    row("edit_file, one line of a 1 MiB file", edit_off, edit_on);

    let (files, rounds) = if quick { (1_000, 1) } else { (10_000, 3) };
    for written_back in [false, true] {
        let mut samples = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (index, tools) in both.iter().enumerate() {
                let tree = base.path().join(["off", "on"][index]).join("tree");
                for file in 0..files {
                    let directory = tree.join(format!("d{}", file / 100));
                    std::fs::create_dir_all(&directory).unwrap();
                    std::fs::write(directory.join(format!("f{file}.txt")), format!("file {file}\n")).unwrap();
                }
                if written_back {
                    // As a project's files are: on the disk, not only in the page cache (a
                    // file never written back is unlinked without freeing a block).
                    std::process::Command::new("sync").status().unwrap();
                }
                samples[index].push(call(tools, "delete_file", &json!({ "path": "/w/tree", "recursive": true })));
            }
        }
        let [delete_off, delete_on] = samples;
        let state = if written_back { "on the disk (synced first)" } else { "just written (page cache only)" };
        row(&format!("delete_file, recursive, {files} files {state}"), delete_off, delete_on);
    }
    compaction_stall(base.path(), quick);
    alternating(base.path(), quick);
    at_bound(base.path(), quick);
}

/// A journal at its bound, whose log holds `MiB` of entries (each says it keeps 4 KiB of
/// images): every write drops the oldest entry. Printed: a write on a new journal (the
/// baseline), then a write at the bound.
fn at_bound(base: &Path, quick: bool) {
    // Within three quarters of the log's bound at the default (8 MiB): past those, a start
    // alone drops or forgets the oldest entries.
    let mebibytes = if quick { 2 } else { 5 };
    let (mut entries, mut index, mut claimed) = (String::new(), 0u64, 0u64);
    while entries.len() < mebibytes * 1024 * 1024 {
        let id = format!("1700000000000-{index:013x}");
        let image = format!("{id}.0.0");
        let entry = json!({ "id": id, "call": id, "operation": "write", "paths": ["/w/kept.txt"], "images": [image], "image_bytes": 4096, "parts": [], "session": "s", "time": "2026-12-01T00:00:00Z", "undoes": null });
        entries.push_str(&(entry.to_string() + "\n"));
        index += 1;
        claimed += 4096;
    }
    let launch = |name: &str, filled: bool| {
        let journal = base.join(format!("{name}-journal"));
        std::fs::create_dir_all(&journal).unwrap();
        if filled {
            std::fs::write(journal.join("journal.jsonl"), &entries).unwrap();
        }
        let work = base.join(name);
        std::fs::create_dir_all(&work).unwrap();
        let options = vfs_host::LaunchOptions {
            mounts: vec![format!("{}:/w:rw", work.display())],
            journal: Some(journal),
            // The images and the log 64 KiB past it: the first write drops a few entries.
            journal_max_bytes: Some(claimed + entries.len() as u64 - 64 * 1024),
            no_read_before_edit: true,
            current_dir: base.to_path_buf(),
            ..vfs_host::LaunchOptions::default()
        };
        vfs_host::compose(&options, vfs::ambient_authority()).unwrap()
    };
    let (fresh, full) = (launch("fresh", false), launch("full", true));
    let tools = [fresh.tools(None), full.tools(None)];
    let content = "x".repeat(4095) + "\n";
    let write = |tools: &vfs_host::ToolService, index: usize| {
        let arguments = json!({ "path": format!("/w/file-{}.txt", index % 10), "content": content, "overwrite": true });
        call(tools, "write_file", &arguments)
    };
    // The first write on each reads the log whole (nothing is counted yet).
    write(&tools[0], 0);
    write(&tools[1], 0);
    let rounds = if quick { 10 } else { 40 };
    let mut samples = [Vec::new(), Vec::new()];
    for index in 1..=rounds {
        for (which, tools) in tools.iter().enumerate() {
            samples[which].push(write(tools, index));
        }
    }
    let [fresh, full] = samples;
    let (fresh, full) = (median(fresh), median(full));
    println!();
    println!("| a write on a journal at its bound, with a {mebibytes} MiB log (median) | time |");
    println!("|---|---|");
    println!("| on a new journal | {:.3} ms |", fresh.as_secs_f64() * 1e3);
    println!(
        "| at the bound (each drops the oldest entry) | {:.3} ms ({:.2}× new) |",
        full.as_secs_f64() * 1e3,
        full.as_secs_f64() / fresh.as_secs_f64()
    );
}

/// A launch of `/w` in `base/name` with the journal in `base/shared-journal`, which several
/// launches share as several processes would.
fn shared(base: &Path, name: &str) -> vfs_host::Launch {
    let work = base.join(name);
    std::fs::create_dir_all(&work).unwrap();
    let options = vfs_host::LaunchOptions {
        mounts: vec![format!("{}:/w:rw", work.display())],
        journal: Some(base.join("shared-journal")),
        no_read_before_edit: true,
        current_dir: base.to_path_buf(),
        ..vfs_host::LaunchOptions::default()
    };
    vfs_host::compose(&options, vfs::ambient_authority()).unwrap()
}

/// Two launches share a journal whose log holds `MiB` of entries it keeps, and write in turn,
/// as two servers on one project do: each finds the other's lines before its own. Printed:
/// one launch writing alone on the same log (the baseline), then each write of the two in turn.
fn alternating(base: &Path, quick: bool) {
    // Within three quarters of the log's bound at the default (8 MiB): past those, a start
    // alone drops or forgets the oldest entries.
    let mebibytes = if quick { 2 } else { 5 };
    std::fs::create_dir_all(base.join("shared-journal")).unwrap();
    let mut entries = String::new();
    let mut index = 0u64;
    while entries.len() < mebibytes * 1024 * 1024 {
        let id = format!("1700000000000-{index:013x}");
        let entry = json!({ "id": id, "call": id, "operation": "write", "paths": ["/w/kept.txt"], "images": [], "image_bytes": 0, "parts": [], "session": "s", "time": "2026-12-01T00:00:00Z", "undoes": null });
        entries.push_str(&(entry.to_string() + "\n"));
        index += 1;
    }
    std::fs::write(base.join("shared-journal/journal.jsonl"), entries).unwrap();
    let (first, second) = (shared(base, "first"), shared(base, "second"));
    let tools = [first.tools(None), second.tools(None)];
    let content = "x".repeat(4095) + "\n";
    let write = |tools: &vfs_host::ToolService, index: usize| {
        let arguments = json!({ "path": format!("/w/file-{}.txt", index % 10), "content": content, "overwrite": true });
        call(tools, "write_file", &arguments)
    };
    let rounds = if quick { 10 } else { 40 };
    let alone: Vec<Duration> = (0..rounds).map(|index| write(&tools[0], index)).collect();
    let in_turn: Vec<Duration> = (0..rounds).map(|index| write(&tools[index % 2], index)).collect();
    let (alone, in_turn) = (median(alone), median(in_turn));
    println!();
    println!("| two processes writing in turn on a {mebibytes} MiB log (median) | time |");
    println!("|---|---|");
    println!("| one writing alone | {:.3} ms |", alone.as_secs_f64() * 1e3);
    println!(
        "| each in turn | {:.3} ms ({:.2}× alone) |",
        in_turn.as_secs_f64() * 1e3,
        in_turn.as_secs_f64() / alone.as_secs_f64()
    );
}

/// Two launches share one journal whose log holds `MiB` of what a compaction leaves out (the
/// intents of calls that ended): the first one's next write compacts it (its finish does),
/// while the second writes on, as another agent of a daemon would. Printed: the second's
/// write median before, its longest write while the compaction ran, and the compacting
/// write's own time (the compaction's length, the baseline of the same run).
fn compaction_stall(base: &Path, quick: bool) {
    let mebibytes = if quick { 2 } else { 12 };
    let journal = base.join("shared-journal");
    let launch = |name: &str| shared(base, name);
    // The first before the log is long (it compacts at its next write), the second after (it
    // does not: its log has not doubled since it attached).
    let first = launch("first");
    // Appended as another process's ended calls would leave them.
    let mut filler = String::new();
    let mut ended = 0u64;
    while filler.len() < mebibytes * 1024 * 1024 {
        let id = format!("1700000000000-{ended:013x}");
        let intent = json!({ "intent": id, "call": id, "operation": "write", "paths": ["/w/filler.txt"], "images": [], "session": "s", "time": "2026-12-01T00:00:00Z" });
        filler.push_str(&format!("{intent}\n{}\n", json!({ "settled": id })));
        ended += 1;
    }
    #[expect(clippy::disallowed_types, reason = "fixture: lines appended as another process appends them")]
    let mut log = std::fs::OpenOptions::new().append(true).open(journal.join("journal.jsonl")).unwrap();
    std::io::Write::write_all(&mut log, filler.as_bytes()).unwrap();
    drop(log);
    let second = launch("second");
    // Another session of the compacting launch, as another agent of the same daemon.
    let (first_tools, second_tools, sibling_tools) = (first.tools(None), second.tools(None), first.tools(None));
    let content = "x".repeat(4095) + "\n";
    let write = |tools: &vfs_host::ToolService, index: usize| {
        let arguments = json!({ "path": format!("/w/file-{}.txt", index % 10), "content": content, "overwrite": true });
        call(tools, "write_file", &arguments)
    };
    let before: Vec<Duration> = (0..20).map(|index| write(&second_tools, index)).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    let writes = |tools: &vfs_host::ToolService, first: usize| {
        let mut during = Vec::new();
        let mut index = first;
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            during.push(write(tools, index));
            index += 1;
        }
        during
    };
    let (compacting, during, sibling) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| writes(&second_tools, 0));
        // The second is writing before the compaction begins.
        std::thread::sleep(Duration::from_millis(20));
        let compacting = scope.spawn(|| {
            let compacting = write(&first_tools, 0);
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            compacting
        });
        // The other session begins once the compacting write has: the compacting write's
        // count of the other process's 12 MiB (read whole) holds its first write.
        std::thread::sleep(Duration::from_millis(20));
        let sibling = writes(&sibling_tools, 1);
        (compacting.join().unwrap(), writer.join().unwrap(), sibling)
    });
    let compacted = std::fs::metadata(journal.join("journal.jsonl")).unwrap().len();
    assert!(compacted < 1024 * 1024, "the log was not compacted: {compacted} bytes");
    let longest = during.iter().max().copied().unwrap_or_default();
    let sibling_longest = sibling.iter().max().copied().unwrap_or_default();
    println!();
    println!("| another process's write while one compacts a {mebibytes} MiB log | time |");
    println!("|---|---|");
    println!("| its write, median before | {:.3} ms |", median(before).as_secs_f64() * 1e3);
    println!("| the compacting write (the compaction's length) | {:.3} ms |", compacting.as_secs_f64() * 1e3);
    println!(
        "| its longest write meanwhile ({} writes) | {:.3} ms ({:.2}× the compaction) |",
        during.len(),
        longest.as_secs_f64() * 1e3,
        longest.as_secs_f64() / compacting.as_secs_f64()
    );
    println!(
        "| the compacting launch's other session, its longest write meanwhile ({} writes) | {:.3} ms ({:.2}× the compaction) |",
        sibling.len(),
        sibling_longest.as_secs_f64() * 1e3,
        sibling_longest.as_secs_f64() / compacting.as_secs_f64()
    );
}
