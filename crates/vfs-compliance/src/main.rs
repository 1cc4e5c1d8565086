//! `vfs-compliance check [DIR]`: the static check of the workspace's own code. Prints one
//! finding per rule violation (`RULE file:line: message` and a `fix:` line) and exits 1 when
//! there is any, 2 when the check cannot run, 0 when the code is clean.
//!
//! `vfs-compliance deps [DIR]`: the dependency policy of the repository at `DIR` (licenses,
//! sources, duplicate versions), read offline from `cargo metadata`. Prints one line per finding
//! and exits like `check`.
//!
//! `vfs-compliance leaks --mount SPEC … [--internal SPEC …] [--spelling PATH …]`: the leak
//! checker for tests outside Rust (the end-to-end tests): reads agent-bound text on standard
//! input and exits 1, naming each leak, when it holds a physical path or an internal root.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use vfs_compliance::deps::{self, Policy, WORKSPACES};
use vfs_compliance::static_check::{self, REASONS, RULES};

const USAGE: &str = "usage: vfs-compliance check [DIR]   (DIR defaults to the current directory)
       vfs-compliance deps [DIR]
       vfs-compliance rules";

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    match arguments.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["check"] => run(&mut out, &mut err, &PathBuf::from(".")),
        ["check", dir] => run(&mut out, &mut err, &PathBuf::from(dir)),
        ["deps"] => dependencies(&mut out, &mut err, &PathBuf::from(".")),
        ["deps", dir] => dependencies(&mut out, &mut err, &PathBuf::from(dir)),
        ["rules"] => {
            for rule in RULES {
                let _ = writeln!(out, "{}: {}\n  fix: {}", rule.id, rule.summary, rule.fix);
            }
            let _ = writeln!(out, "ratified exemption reasons:");
            for (tag, meaning) in REASONS {
                let _ = writeln!(out, "  {tag}: {meaning}");
            }
            ExitCode::SUCCESS
        }
        ["leaks", options @ ..] => leaks(&mut out, &mut err, options, vfs::ambient_authority()),
        ["-h" | "--help" | "help"] => {
            let _ = writeln!(out, "{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            let _ = writeln!(err, "{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(out: &mut impl std::io::Write, err: &mut impl std::io::Write, dir: &std::path::Path) -> ExitCode {
    let report = match static_check::check_workspace(dir) {
        Ok(report) => report,
        Err(error) => {
            let _ = writeln!(err, "error: {error}");
            return ExitCode::from(2);
        }
    };
    for finding in &report.findings {
        let _ = writeln!(out, "{finding}");
    }
    if report.findings.is_empty() {
        let _ = writeln!(out, "vfs-compliance: OK ({} Rust files checked, 0 findings)", report.files);
        ExitCode::SUCCESS
    } else {
        let _ = writeln!(
            out,
            "vfs-compliance: {} finding(s) in {} Rust files checked",
            report.findings.len(),
            report.files
        );
        ExitCode::FAILURE
    }
}

fn dependencies(out: &mut impl std::io::Write, err: &mut impl std::io::Write, dir: &std::path::Path) -> ExitCode {
    let report = match deps::check_repository(dir, WORKSPACES, &Policy::WORKSPACE) {
        Ok(report) => report,
        Err(error) => {
            let _ = writeln!(err, "error: {error}");
            if let Some(hint) = error.hint() {
                let _ = writeln!(err, "\nhint: {hint}");
            }
            return ExitCode::from(2);
        }
    };
    for note in &report.notes {
        let _ = writeln!(out, "{note}");
    }
    for finding in &report.findings {
        let _ = writeln!(out, "{finding}");
    }
    let checked = format!("{} packages of {} workspaces checked", report.packages, report.workspaces);
    if report.findings.is_empty() {
        let _ = writeln!(out, "vfs-compliance deps: OK ({checked}, 0 findings)");
        ExitCode::SUCCESS
    } else {
        let _ = writeln!(out, "vfs-compliance deps: {} finding(s) in {checked}", report.findings.len());
        ExitCode::FAILURE
    }
}

/// Checks text for leaks against the mounts named in `options`, opened with the operator's
/// `authority`.
fn leaks(
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
    options: &[&str],
    authority: vfs::AmbientAuthority,
) -> ExitCode {
    let mut builder = vfs::MountRegistry::builder();
    let mut spellings = Vec::new();
    let mut pairs = options.chunks(2);
    for pair in &mut pairs {
        let [flag, value] = pair else {
            let _ = writeln!(err, "{USAGE}");
            return ExitCode::from(2);
        };
        let spec = || value.parse::<vfs::MountSpec>();
        let added = match *flag {
            "--mount" => spec().map(|spec| {
                builder.mount(spec);
            }),
            "--internal" => spec().map(|spec| {
                builder.internal(spec);
            }),
            "--spelling" => {
                spellings.push((*value).to_owned());
                Ok(())
            }
            _ => {
                let _ = writeln!(err, "{USAGE}");
                return ExitCode::from(2);
            }
        };
        if let Err(error) = added {
            let _ = writeln!(err, "error: {error}");
            return ExitCode::from(2);
        }
    }
    let registry = match builder.build(authority) {
        Ok(registry) => registry,
        Err(error) => {
            let _ = writeln!(err, "error: {error}");
            return ExitCode::from(2);
        }
    };
    let mut checker = vfs_compliance::LeakChecker::new(&registry);
    for spelling in &spellings {
        checker = checker.with_spelling(spelling);
    }
    let mut text = String::new();
    if let Err(error) = std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text) {
        let _ = writeln!(err, "error: cannot read standard input: {error}");
        return ExitCode::from(2);
    }
    let found = checker.check(&text);
    for leak in &found {
        let _ = writeln!(out, "leak: {leak}");
    }
    if found.is_empty() {
        let _ = writeln!(out, "vfs-compliance: no leak in {} bytes", text.len());
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
