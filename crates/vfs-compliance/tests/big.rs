//! Big inputs, alone in their own test binary so that the resident-memory figures are theirs:
//! a window of a 4 GiB sparse file read with bounded memory, and a 100,000-entry directory
//! listed with bounded output and time.
#![expect(clippy::disallowed_methods, reason = "fixture: reads /proc/self/status and builds a big directory")]

use std::time::{Duration, Instant};

use vfs::{ErrorKind, GrepRequest, ReadWindow};
use vfs_compliance::kit::{AgentView, LocalFactory, standard};

const GIB: u64 = 1024 * 1024 * 1024;

/// The peak resident set size of this process, in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

#[test]
fn big_inputs_stay_bounded() {
    let world = standard(&LocalFactory(vfs::ambient_authority())).unwrap();
    let layout = &world.layout;
    let agent = world.agent();

    // A 4 GiB sparse file: two lines at the start, one in the middle, one at the end.
    layout.file("data/huge.log", "first\nsecond\n");
    layout.set_len("data/huge.log", 4 * GIB);
    layout.write_at("data/huge.log", 2 * GIB, b"\nmiddle\n");
    layout.write_at("data/huge.log", 4 * GIB - 11, b"\nlast line\n");
    let before = peak_kib();
    let started = Instant::now();
    let head = agent.read_text("/src/huge.log", &ReadWindow { head: Some(2), ..ReadWindow::default() }).unwrap();
    assert_eq!(head.content, "first\nsecond\n");
    assert!(head.truncated);
    let tail = agent.read_text("/src/huge.log", &ReadWindow { tail: Some(1), ..ReadWindow::default() }).unwrap();
    assert_eq!(tail.content, "last line\n");
    assert_eq!(tail.size, 4 * GIB);
    let info = agent.info("/src/huge.log").unwrap();
    assert_eq!(info.size, 4 * GIB);
    assert!(info.version.is_some());
    assert_eq!(agent.read_media("/src/huge.log").unwrap_err().kind(), ErrorKind::TooLarge);
    // A whole-file read stops at the byte cap (here on NUL bytes, which mark it binary).
    let whole = agent.read_text("/src/huge.log", &ReadWindow::default());
    world.show(&whole).unwrap();
    let grep = agent.grep(&GrepRequest { pattern: "last".into(), path: Some("/src".into()), ..GrepRequest::default() });
    world.show(&grep).unwrap();
    let grown = peak_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "reading a window of a 4 GiB file grew the peak RSS by {grown} KiB");
    assert!(started.elapsed() < Duration::from_secs(20), "the big-file reads took {:?}", started.elapsed());

    // A directory of 100,000 entries.
    layout.mkdir("out/many");
    for index in 0..100_000 {
        std::fs::write(layout.path(&format!("out/many/entry-{index:06}")), "").unwrap();
    }
    let limit = world.registry.limits().entries;
    let started = Instant::now();
    let listing = agent.list("/output/many").unwrap();
    assert_eq!((listing.entries.len(), listing.total, listing.truncated), (limit, 100_000, true));
    let text = world.show(&Ok::<_, vfs::Error>(listing)).unwrap();
    assert!(text.lines().count() <= limit + 1 && text.len() < 64 * 1024, "{} bytes", text.len());
    assert!(
        text.ends_with(&format!("[truncated: showing {limit} of 100000 entries; narrow with a search of names]\n"))
    );
    let tree = agent.tree("/output", None, &[]).unwrap();
    assert!(tree.truncated && tree.count <= limit);
    let search = agent.search_files("/output/many", "entry-09999*", &[]).unwrap();
    assert_eq!(search.matches.len(), 10);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(30), "listing 100,000 entries took {elapsed:?}");
    world.show(&Ok::<_, vfs::Error>(tree)).unwrap();
    assert!(agent.list("/output").unwrap().agent_view().contains("[DIR] many"));
}
