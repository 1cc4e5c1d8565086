//! The journal's cost (`docs/performance.md`): a 4 KiB write, an edit of a 1 MiB file and a
//! recursive delete of 10,000 files through the tools, with `--journal` and without, in the
//! same run, alternating. `cargo bench -p vfs-host --bench journal` (`-- --quick`: fewer
//! rounds).
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
}
