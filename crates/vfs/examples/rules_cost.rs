//! What name rules cost a listing of 1,000 entries, a 4 KiB read, a name search and a grep
//! over the same 1,000 files, measured so that a noisy 2-core machine cannot tilt the
//! comparison (`docs/performance.md`, "Name rules").
//!
//! Without arguments: rounds of five calls of each variant in turn (none, the default rules,
//! the defaults plus mount-string rules), the order rotating every round, and the median of
//! each variant's rounds with its ratio to no rules. With `VARIANT CALLS`: only that many
//! calls of one variant, for an instruction count that does not depend on the machine's load:
//!
//! ```text
//! cargo build --release -p vfs --example rules_cost
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/rules_cost list-defaults 2000
//! ```
//!
//! and the same with 0 calls, to subtract the set-up.
#![expect(clippy::disallowed_methods, reason = "fixture: an example builds its tree on disk")]
#![expect(clippy::print_stdout, reason = "an example prints its findings")]

use std::time::{Duration, Instant};

use vfs::{AgentAccessor, GrepRequest, MountRegistry, MountSpec, NameRule, ReadWindow};

const MOUNT_RULES: &str = ";**/*.key:hidden;secrets:hidden;docs/*.md:ro";
const ROUNDS: usize = 200;
const CALLS_PER_ROUND: usize = 5;

/// One registry per variant, over the same directory.
fn registries(data: &std::path::Path) -> [(&'static str, MountRegistry); 3] {
    let plain = |rules: &str| -> MountSpec { format!("{}:/src:ro{rules}", data.display()).parse().unwrap() };
    let build = |spec: MountSpec, defaults: bool| {
        let mut builder = MountRegistry::builder();
        builder.mount(spec);
        if defaults {
            builder.name_rules(NameRule::defaults());
        }
        builder.build(vfs::ambient_authority()).unwrap()
    };
    [
        ("none", build(plain(""), false)),
        ("defaults", build(plain(""), true)),
        ("defaults and mount string", build(plain(MOUNT_RULES), true)),
    ]
}

fn call(agent: &AgentAccessor, operation: &str) {
    match operation {
        "list" => {
            std::hint::black_box(agent.list("/src").unwrap());
        }
        "search" => {
            std::hint::black_box(agent.search_files("/src", "**/*.txt", &[]).unwrap());
        }
        "grep" => {
            let request = GrepRequest {
                pattern: "entry 0999".to_owned(),
                path: Some("/src".to_owned()),
                ..GrepRequest::default()
            };
            std::hint::black_box(agent.grep(&request).unwrap());
        }
        _ => {
            std::hint::black_box(agent.read_text("/src/file.txt", &ReadWindow::default()).unwrap());
        }
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    for index in 0..1000 {
        std::fs::write(data.join(format!("entry-{index:04}.txt")), format!("entry {index:04}\n")).unwrap();
    }
    std::fs::write(data.join("file.txt"), "x".repeat(4095) + "\n").unwrap();
    let registries = registries(&data);
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if let [variant, calls] = arguments.as_slice() {
        // `list-none`, `read-defaults`, `grep-mount`, …
        let (operation, which) = variant.split_once('-').expect("VARIANT is OPERATION-RULES, like list-defaults");
        let index =
            ["none", "defaults", "mount"].iter().position(|name| *name == which).expect("none, defaults or mount");
        let agent = registries[index].1.agent();
        for _ in 0..calls.parse::<usize>().unwrap() {
            call(&agent, operation);
        }
        return;
    }
    for operation in ["list", "read", "search", "grep"] {
        let agents: Vec<(&str, AgentAccessor)> =
            registries.iter().map(|(name, registry)| (*name, registry.agent())).collect();
        let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(ROUNDS); agents.len()];
        for round in 0..ROUNDS {
            for turn in 0..agents.len() {
                let index = (round + turn) % agents.len();
                let started = Instant::now();
                for _ in 0..CALLS_PER_ROUND {
                    call(&agents[index].1, operation);
                }
                samples[index].push(started.elapsed() / u32::try_from(CALLS_PER_ROUND).unwrap());
            }
        }
        let medians: Vec<Duration> = samples.into_iter().map(median).collect();
        for ((name, _), median) in agents.iter().zip(&medians) {
            let ratio = median.as_secs_f64() / medians[0].as_secs_f64();
            println!("{operation} | {name} | {:.2} µs | {ratio:.3}×", median.as_secs_f64() * 1e6);
        }
    }
}
