//! The dependency policy: what the workspace may build on.
//!
//! A dependency is code we ship and answer for, so three of its facts are decided here once,
//! not at review time by whoever notices: its license (every license its expression names must be
//! on [`LICENSES`]), where it comes from (crates.io or a path inside the repository; a git
//! dependency or another registry is code nobody here can pin and audit the same way), and
//! whether it is built twice in two versions (each copy costs build time and review, so every
//! duplicate is reported, and refused unless [`DUPLICATES`] says why it is accepted).
//!
//! The facts come from `cargo metadata --locked --offline --filter-platform host-tuple`, run as
//! a subprocess for each of the repository's workspaces ([`WORKSPACES`]): cargo reads the lock
//! file and the manifests of the packages it has already downloaded, so the check never touches
//! the network and judges exactly the versions the build uses. The platform filter is what
//! makes it work offline: packages only other platforms build (Windows' and Android's system
//! crates) are in the lock file but never downloaded here, so their manifests cannot be read.
//! The policy therefore covers what is built on the platform that runs it (CI's Linux).
//!
//! Run it with `cargo run -p vfs-compliance -- deps .`; `docs/compliance.md` shows each finding.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::error::CheckError;

/// The manifests of the repository's workspaces, relative to its root: the main workspace and
/// the fuzzing one (its own workspace with its own lock file).
pub const WORKSPACES: &[&str] = &["Cargo.toml", "fuzz/Cargo.toml"];

/// The licenses a dependency may name. They are the permissive licenses whose only conditions
/// are to keep the copyright and license notices (and, for Apache-2.0, the NOTICE file and the
/// patent terms): anyone may use, change and ship the result under the workspace's own
/// `MIT OR Apache-2.0` without publishing their code. A copyleft license (GPL, LGPL, MPL, EPL)
/// or one with field-of-use conditions is not on the list: adding one is a decision about how
/// vfs may be distributed, to be made in review, with its reason, here.
pub const LICENSES: &[&str] = &[
    "Apache-2.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "BSL-1.0",
    "ISC",
    "MIT",
    // The LLVM license, under which libFuzzer (in `libfuzzer-sys`, fuzzing only) is published.
    "NCSA",
    // The Unicode data license of the ICU4X crates (`idna`, through the object store's `url`).
    "Unicode-3.0",
    "Unlicense",
    "Zlib",
];

/// The license exceptions (`LICENSE WITH EXCEPTION`) a dependency may name: `LLVM-exception`
/// only waives Apache-2.0's attribution for compiled code, so it asks less, not more.
pub const EXCEPTIONS: &[&str] = &["LLVM-exception"];

/// A crate the workspace may build in more than one version, and why that is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duplicate {
    /// The crate's name.
    pub name: &'static str,
    /// Why the copies are accepted for now, and what would remove them.
    pub reason: &'static str,
}

/// The accepted duplicates. An entry whose crate is no longer duplicated in any workspace is a
/// finding too, so the list only ever says what is true.
pub const DUPLICATES: &[Duplicate] = &[
    Duplicate {
        name: "base64",
        reason: "vfs uses 0.22; the object store's HTTP client (hyper-util, through reqwest) moved to 0.23; moving vfs to 0.23 removes it",
    },
    Duplicate { name: "crypto-common", reason: "comes with `digest` below (0.1 for digest 0.10, 0.2 for digest 0.11)" },
    Duplicate {
        name: "digest",
        reason: "object storage only: object_store's CRC crate (crc-fast) is on 0.10, its md-5 and sha2 on 0.11; upstream has to align them",
    },
    Duplicate {
        name: "getrandom",
        reason: "object storage only: ring (TLS) is on 0.2, rand 0.10 on 0.4; upstream has to align them",
    },
    Duplicate {
        name: "itertools",
        reason: "criterion (the benchmarks, a dev-dependency of vfs) is on 0.13, object_store on 0.15; the shipped binary has only 0.15",
    },
    Duplicate {
        name: "syn",
        reason: "the derives moved to syn 3 (serde, clap, thiserror, schemars, rmcp, tokio) but tracing-attributes and zerocopy-derive (under criterion's ciborium) are on syn 2, as is the static check (vfs-compliance); the check can move when those two do",
    },
];

/// The policy a check applies: [`Policy::WORKSPACE`] is the repository's.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// Licenses a dependency may name.
    pub licenses: &'a [&'a str],
    /// License exceptions a dependency may name.
    pub exceptions: &'a [&'a str],
    /// Crates that may be built in more than one version.
    pub duplicates: &'a [Duplicate],
}

impl Policy<'static> {
    /// The repository's policy: [`LICENSES`], [`EXCEPTIONS`] and [`DUPLICATES`].
    pub const WORKSPACE: Self = Self { licenses: LICENSES, exceptions: EXCEPTIONS, duplicates: DUPLICATES };
}

/// A license outside the allow-list, or none, or one that does not parse.
pub const LICENSE: &str = "license";
/// A package from a git repository, another registry or a path outside the repository.
pub const SOURCE: &str = "source";
/// A crate built in two or more versions, or an allow-list entry that no longer applies.
pub const DUPLICATE: &str = "duplicate";

/// The allow-lists, named in the fixes.
const HERE: &str = "crates/vfs-compliance/src/deps.rs";

/// One finding of the dependency check: one line naming the crate and what to do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The workspace's manifest, relative to the checked directory.
    pub manifest: String,
    /// The rule: [`LICENSE`], [`SOURCE`] or [`DUPLICATE`].
    pub rule: &'static str,
    /// What is wrong and what to do, in one line.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} {}: {}", self.rule, self.manifest, self.message)
    }
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Workspaces checked.
    pub workspaces: usize,
    /// Packages judged, summed over the workspaces (a package two workspaces share counts twice).
    pub packages: usize,
    /// What must be fixed.
    pub findings: Vec<Finding>,
    /// Accepted duplicates, one line each with the versions and the reason: reported, not
    /// refused.
    pub notes: Vec<String>,
}

/// One package, as far as the policy cares.
#[derive(Debug)]
struct Package {
    name: String,
    version: String,
    license: Option<String>,
    license_file: Option<String>,
    source: Option<String>,
    manifest_path: PathBuf,
}

/// Runs `cargo metadata` offline for each of `manifests` (relative to `root`, the repository)
/// and checks them against `policy`.
pub fn check_repository(root: &Path, manifests: &[&str], policy: &Policy<'_>) -> Result<Report, CheckError> {
    let root = std::path::absolute(root).map_err(|source| CheckError::Read { path: root.to_path_buf(), source })?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut outputs = Vec::new();
    for manifest in manifests {
        let output = Command::new(&cargo)
            .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", "host-tuple"])
            .arg("--manifest-path")
            .arg(root.join(manifest))
            .output()
            .map_err(|source| CheckError::CargoNotRun { source })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stderr = stderr.lines().map(str::trim).filter(|line| !line.is_empty()).collect::<Vec<_>>().join(" ");
            return Err(CheckError::CargoFailed { manifest: (*manifest).to_owned(), stderr });
        }
        let text = String::from_utf8(output.stdout).map_err(|_| CheckError::Metadata {
            manifest: (*manifest).to_owned(),
            problem: "the output is not UTF-8".to_owned(),
        })?;
        outputs.push(((*manifest).to_owned(), text));
    }
    let workspaces: Vec<(&str, &str)> =
        outputs.iter().map(|(manifest, text)| (manifest.as_str(), text.as_str())).collect();
    check(&root, &workspaces, policy)
}

/// Checks the `cargo metadata` output of each workspace (`(manifest, json)`) against `policy`.
/// `root` is the repository: path packages must lie inside it. Findings are sorted by manifest,
/// rule and message.
pub fn check(root: &Path, workspaces: &[(&str, &str)], policy: &Policy<'_>) -> Result<Report, CheckError> {
    let root = normalize(root);
    let mut report = Report { workspaces: workspaces.len(), ..Report::default() };
    let mut duplicated = BTreeSet::new();
    for (manifest, text) in workspaces {
        let packages = parse(manifest, text)?;
        report.packages += packages.len();
        let finding = |rule, message| Finding { manifest: (*manifest).to_owned(), rule, message };
        for package in &packages {
            if let Some(message) = judge_license(package, policy) {
                report.findings.push(finding(LICENSE, message));
            }
            if let Some(message) = judge_source(package, &root) {
                report.findings.push(finding(SOURCE, message));
            }
        }
        let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for package in &packages {
            versions.entry(&package.name).or_default().push(&package.version);
        }
        for (name, mut versions) in versions {
            if versions.len() < 2 {
                continue;
            }
            versions.sort_by_key(|version| version_key(version));
            let list = versions.join(", ");
            duplicated.insert(name.to_owned());
            match policy.duplicates.iter().find(|entry| entry.name == name) {
                Some(entry) => report.notes.push(format!(
                    "{DUPLICATE} {manifest}: `{name}` is built in {} versions ({list}), accepted: {}",
                    versions.len(),
                    entry.reason
                )),
                None => report.findings.push(finding(
                    DUPLICATE,
                    format!(
                        "`{name}` is built in {} versions ({list}): make its dependents agree on one (`cargo tree -i {name}` shows them), or add `{name}` to DUPLICATES in {HERE} with the reason",
                        versions.len()
                    ),
                )),
            }
        }
    }
    for entry in policy.duplicates {
        if !duplicated.contains(entry.name) {
            report.findings.push(Finding {
                manifest: HERE.to_owned(),
                rule: DUPLICATE,
                message: format!(
                    "`{}` is listed in DUPLICATES but no workspace builds it in more than one version: remove its entry",
                    entry.name
                ),
            });
        }
    }
    report.findings.sort();
    Ok(report)
}

/// The packages of one `cargo metadata` output.
fn parse(manifest: &str, text: &str) -> Result<Vec<Package>, CheckError> {
    let problem = |problem: String| CheckError::Metadata { manifest: manifest.to_owned(), problem };
    let value: Value = serde_json::from_str(text).map_err(|error| problem(format!("not JSON ({error})")))?;
    let packages = value
        .get("packages")
        .and_then(Value::as_array)
        .ok_or_else(|| problem("there is no `packages` list".to_owned()))?;
    packages
        .iter()
        .map(|package| {
            let text = |field: &str| package.get(field).and_then(Value::as_str).map(str::to_owned);
            let required = |field: &str| {
                text(field).ok_or_else(|| problem(format!("a package has no `{field}` (it reads {package})")))
            };
            Ok(Package {
                name: required("name")?,
                version: required("version")?,
                license: text("license"),
                license_file: text("license_file"),
                source: text("source"),
                manifest_path: PathBuf::from(required("manifest_path")?),
            })
        })
        .collect()
}

/// Why a package's license is refused, if it is.
fn judge_license(package: &Package, policy: &Policy<'_>) -> Option<String> {
    let Package { name, version, .. } = package;
    let Some(expression) = &package.license else {
        let file =
            package.license_file.as_deref().map_or(String::new(), |file| format!(" (only a license file, `{file}`)"));
        return Some(format!(
            "`{name} {version}` declares no license expression{file}: replace the crate, or ask its authors to declare an SPDX `license`"
        ));
    };
    let named = match names(expression) {
        Ok(named) => named,
        Err(problem) => {
            return Some(format!(
                "`{name} {version}` has a license expression that does not parse (`{expression}`: {problem}): replace the crate, or ask its authors to fix its `license`"
            ));
        }
    };
    let refused: Vec<String> = named
        .iter()
        .filter(|name| match name {
            Named::License(license) => !policy.licenses.contains(&license.as_str()),
            Named::Exception(exception) => !policy.exceptions.contains(&exception.as_str()),
        })
        .map(|name| match name {
            Named::License(license) | Named::Exception(license) => format!("`{license}`"),
        })
        .collect();
    if refused.is_empty() {
        return None;
    }
    let (list, verb) = if refused.len() == 1 { ("is", "it") } else { ("are", "them") };
    Some(format!(
        "`{name} {version}` is licensed `{expression}`, and {} {list} not on the allow-list: replace the crate, or add {verb} to LICENSES (or EXCEPTIONS) in {HERE} with the reason",
        refused.join(", ")
    ))
}

/// Why a package's source is refused, if it is: crates.io and paths inside `root` pass.
fn judge_source(package: &Package, root: &Path) -> Option<String> {
    let Package { name, version, .. } = package;
    match &package.source {
        Some(source) if is_crates_io(source) => None,
        Some(source) => {
            let kind = if source.starts_with("git+") { "a git repository" } else { "a registry other than crates.io" };
            Some(format!(
                "`{name} {version}` comes from {kind} (`{source}`): depend on a crates.io release instead, or vendor it as a path inside the repository"
            ))
        }
        None if normalize(&package.manifest_path).starts_with(root) => None,
        None => Some(format!(
            "`{name} {version}` is a path dependency outside the repository (`{}`): publish it to crates.io, or move it inside the repository",
            package.manifest_path.display()
        )),
    }
}

/// Whether a cargo source id names crates.io (through the git or the sparse index).
fn is_crates_io(source: &str) -> bool {
    matches!(source, "registry+https://github.com/rust-lang/crates.io-index" | "sparse+https://index.crates.io/")
}

/// `..` and `.` removed lexically, so that a path dependency spelled `../x` is judged where it
/// lies (cargo reports manifests as spelled from the workspace).
fn normalize(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// A version's numeric parts first, so that `0.9` sorts before `0.10`.
fn version_key(version: &str) -> (Vec<u64>, String) {
    let (release, rest) = version.split_once(['-', '+']).unwrap_or((version, ""));
    (release.split('.').map(|part| part.parse().unwrap_or(u64::MAX)).collect(), rest.to_owned())
}

/// A name in a license expression.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Named {
    License(String),
    Exception(String),
}

/// The licenses and exceptions an SPDX expression names, in order, or why it does not parse.
///
/// The grammar: `expression = term { ("OR" | "/") term }`, `term = factor { "AND" factor }`,
/// `factor = "(" expression ")" | license [ "WITH" exception ]`. The `/` is the separator older
/// crates wrote for `OR` (`MIT/Apache-2.0`), which crates.io still shows. Every name counts,
/// whichever side of an `OR` it is on: the check does not choose a license for the project.
fn names(expression: &str) -> Result<Vec<Named>, String> {
    let spaced = expression.replace('(', " ( ").replace(')', " ) ").replace('/', " / ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut parser = Parser { tokens: &tokens, next: 0, named: Vec::new() };
    parser.expression()?;
    match parser.tokens.get(parser.next) {
        None => Ok(parser.named),
        Some(token) => Err(format!("unexpected `{token}`")),
    }
}

/// A recursive-descent reader of the grammar in [`names`].
struct Parser<'a> {
    tokens: &'a [&'a str],
    next: usize,
    named: Vec<Named>,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.tokens.get(self.next).copied()
    }

    fn expression(&mut self) -> Result<(), String> {
        self.term()?;
        while matches!(self.peek(), Some("OR" | "/")) {
            self.next += 1;
            self.term()?;
        }
        Ok(())
    }

    fn term(&mut self) -> Result<(), String> {
        self.factor()?;
        while self.peek() == Some("AND") {
            self.next += 1;
            self.factor()?;
        }
        Ok(())
    }

    fn factor(&mut self) -> Result<(), String> {
        match self.peek() {
            Some("(") => {
                self.next += 1;
                self.expression()?;
                if self.peek() != Some(")") {
                    return Err("a `(` is not closed".to_owned());
                }
                self.next += 1;
            }
            Some(token) if is_identifier(token) => {
                self.next += 1;
                self.named.push(Named::License(token.to_owned()));
                if self.peek() == Some("WITH") {
                    self.next += 1;
                    match self.peek() {
                        Some(exception) if is_identifier(exception) => {
                            self.next += 1;
                            self.named.push(Named::Exception(exception.to_owned()));
                        }
                        _ => return Err("`WITH` is not followed by an exception".to_owned()),
                    }
                }
            }
            Some(token) => return Err(format!("a license is expected where `{token}` is")),
            None => return Err("it ends where a license is expected".to_owned()),
        }
        Ok(())
    }
}

/// An SPDX identifier (letters, digits, `.`, `-`, an optional trailing `+`), not an operator.
fn is_identifier(token: &str) -> bool {
    let body = token.strip_suffix('+').unwrap_or(token);
    !matches!(token, "AND" | "OR" | "WITH")
        && !body.is_empty()
        && body.chars().all(|character| character.is_ascii_alphanumeric() || matches!(character, '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture package: name, version, license, source, manifest path.
    type Fixture<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>, &'a str);

    /// A `cargo metadata` output holding only the fields the check reads.
    fn metadata(packages: &[Fixture<'_>]) -> String {
        let packages: Vec<Value> = packages
            .iter()
            .map(|(name, version, license, source, manifest)| {
                serde_json::json!({
                    "name": name,
                    "version": version,
                    "license": license,
                    "license_file": null,
                    "source": source,
                    "manifest_path": manifest,
                })
            })
            .collect();
        serde_json::json!({ "packages": packages, "workspace_root": "/repo" }).to_string()
    }

    const CRATES_IO: Option<&str> = Some("registry+https://github.com/rust-lang/crates.io-index");

    fn lines(report: &Report) -> Vec<String> {
        report.findings.iter().map(ToString::to_string).collect()
    }

    const POLICY: Policy<'static> = Policy {
        licenses: &["MIT", "Apache-2.0"],
        exceptions: &["LLVM-exception"],
        duplicates: &[Duplicate { name: "syn", reason: "two generations of derives" }],
    };

    fn run(text: &str) -> Report {
        check(Path::new("/repo"), &[("Cargo.toml", text)], &POLICY).unwrap()
    }

    #[test]
    fn a_clean_workspace_passes_and_an_accepted_duplicate_is_reported() {
        let text = metadata(&[
            ("vfs", "0.1.0", Some("MIT OR Apache-2.0"), None, "/repo/crates/vfs/Cargo.toml"),
            ("fuzz", "0.0.0", Some("MIT"), None, "/repo/fuzz/../fuzz/Cargo.toml"),
            ("old", "1.0.0", Some("MIT/Apache-2.0"), CRATES_IO, "/home/.cargo/old/Cargo.toml"),
            ("llvm", "1.0.0", Some("Apache-2.0 WITH LLVM-exception OR MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("syn", "2.0.1", Some("(MIT OR Apache-2.0)"), CRATES_IO, "/c/Cargo.toml"),
            ("syn", "3.0.0", Some("MIT AND Apache-2.0"), Some("sparse+https://index.crates.io/"), "/c/Cargo.toml"),
        ]);
        let report = run(&text);
        assert_eq!(lines(&report), Vec::<String>::new());
        assert_eq!((report.workspaces, report.packages), (1, 6));
        assert_eq!(
            report.notes,
            ["duplicate Cargo.toml: `syn` is built in 2 versions (2.0.1, 3.0.0), accepted: two generations of derives"]
        );
    }

    #[test]
    fn each_license_problem_is_one_line_naming_the_crate() {
        let text = metadata(&[
            ("syn", "2.0.1", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("syn", "3.0.0", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("gpl", "1.2.3", Some("GPL-3.0-only"), CRATES_IO, "/c/Cargo.toml"),
            ("dual", "0.1.0", Some("MIT OR MPL-2.0+ OR ISC"), CRATES_IO, "/c/Cargo.toml"),
            ("exception", "0.1.0", Some("Apache-2.0 WITH Classpath-exception-2.0"), CRATES_IO, "/c/Cargo.toml"),
            ("none", "0.1.0", None, CRATES_IO, "/c/Cargo.toml"),
            ("broken", "0.1.0", Some("MIT OR"), CRATES_IO, "/c/Cargo.toml"),
            ("unclosed", "0.1.0", Some("(MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("lowercase", "0.1.0", Some("MIT or Apache-2.0"), CRATES_IO, "/c/Cargo.toml"),
        ]);
        assert_eq!(
            lines(&run(&text)),
            [
                "license Cargo.toml: `broken 0.1.0` has a license expression that does not parse (`MIT OR`: it ends where a license is expected): replace the crate, or ask its authors to fix its `license`",
                "license Cargo.toml: `dual 0.1.0` is licensed `MIT OR MPL-2.0+ OR ISC`, and `MPL-2.0+`, `ISC` are not on the allow-list: replace the crate, or add them to LICENSES (or EXCEPTIONS) in crates/vfs-compliance/src/deps.rs with the reason",
                "license Cargo.toml: `exception 0.1.0` is licensed `Apache-2.0 WITH Classpath-exception-2.0`, and `Classpath-exception-2.0` is not on the allow-list: replace the crate, or add it to LICENSES (or EXCEPTIONS) in crates/vfs-compliance/src/deps.rs with the reason",
                "license Cargo.toml: `gpl 1.2.3` is licensed `GPL-3.0-only`, and `GPL-3.0-only` is not on the allow-list: replace the crate, or add it to LICENSES (or EXCEPTIONS) in crates/vfs-compliance/src/deps.rs with the reason",
                "license Cargo.toml: `lowercase 0.1.0` has a license expression that does not parse (`MIT or Apache-2.0`: unexpected `or`): replace the crate, or ask its authors to fix its `license`",
                "license Cargo.toml: `none 0.1.0` declares no license expression: replace the crate, or ask its authors to declare an SPDX `license`",
                "license Cargo.toml: `unclosed 0.1.0` has a license expression that does not parse (`(MIT`: a `(` is not closed): replace the crate, or ask its authors to fix its `license`",
            ]
        );
    }

    #[test]
    fn a_license_file_alone_is_named() {
        let text = serde_json::json!({ "packages": [{
            "name": "filed", "version": "1.0.0", "license": null, "license_file": "LICENSE.txt",
            "source": CRATES_IO, "manifest_path": "/c/Cargo.toml",
        }, {
            "name": "syn", "version": "2.0.0", "license": "MIT", "source": CRATES_IO, "manifest_path": "/c/Cargo.toml",
        }, {
            "name": "syn", "version": "3.0.0", "license": "MIT", "source": CRATES_IO, "manifest_path": "/c/Cargo.toml",
        }]})
        .to_string();
        assert_eq!(
            lines(&run(&text)),
            [
                "license Cargo.toml: `filed 1.0.0` declares no license expression (only a license file, `LICENSE.txt`): replace the crate, or ask its authors to declare an SPDX `license`"
            ]
        );
    }

    #[test]
    fn sources_other_than_crates_io_and_the_repository_are_refused() {
        let text = metadata(&[
            ("syn", "2.0.1", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("syn", "3.0.0", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("forked", "0.3.0", Some("MIT"), Some("git+https://example.invalid/forked?rev=abc#abc"), "/g/Cargo.toml"),
            ("internal", "1.0.0", Some("MIT"), Some("sparse+https://registry.example.invalid/"), "/r/Cargo.toml"),
            ("sibling", "0.1.0", Some("MIT"), None, "/repo/../sibling/Cargo.toml"),
            ("prefix", "0.1.0", Some("MIT"), None, "/repository/Cargo.toml"),
        ]);
        assert_eq!(
            lines(&run(&text)),
            [
                "source Cargo.toml: `forked 0.3.0` comes from a git repository (`git+https://example.invalid/forked?rev=abc#abc`): depend on a crates.io release instead, or vendor it as a path inside the repository",
                "source Cargo.toml: `internal 1.0.0` comes from a registry other than crates.io (`sparse+https://registry.example.invalid/`): depend on a crates.io release instead, or vendor it as a path inside the repository",
                "source Cargo.toml: `prefix 0.1.0` is a path dependency outside the repository (`/repository/Cargo.toml`): publish it to crates.io, or move it inside the repository",
                "source Cargo.toml: `sibling 0.1.0` is a path dependency outside the repository (`/repo/../sibling/Cargo.toml`): publish it to crates.io, or move it inside the repository",
            ]
        );
    }

    #[test]
    fn an_unlisted_duplicate_is_refused_and_a_stale_entry_too() {
        let text = metadata(&[
            ("rand", "0.9.2", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("rand", "0.10.0", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("rand", "0.8.5", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
        ]);
        let report = check(Path::new("/repo"), &[("fuzz/Cargo.toml", &text)], &POLICY).unwrap();
        assert_eq!(
            lines(&report),
            [
                "duplicate crates/vfs-compliance/src/deps.rs: `syn` is listed in DUPLICATES but no workspace builds it in more than one version: remove its entry",
                "duplicate fuzz/Cargo.toml: `rand` is built in 3 versions (0.8.5, 0.9.2, 0.10.0): make its dependents agree on one (`cargo tree -i rand` shows them), or add `rand` to DUPLICATES in crates/vfs-compliance/src/deps.rs with the reason",
            ]
        );
        assert_eq!(report.notes, Vec::<String>::new());
    }

    #[test]
    fn an_entry_is_not_stale_while_one_workspace_needs_it() {
        let one = metadata(&[("syn", "2.0.1", Some("MIT"), CRATES_IO, "/c/Cargo.toml")]);
        let two = metadata(&[
            ("syn", "2.0.1", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
            ("syn", "3.0.0", Some("MIT"), CRATES_IO, "/c/Cargo.toml"),
        ]);
        let report = check(Path::new("/repo"), &[("Cargo.toml", &one), ("fuzz/Cargo.toml", &two)], &POLICY).unwrap();
        assert_eq!(lines(&report), Vec::<String>::new());
        assert_eq!((report.workspaces, report.packages, report.notes.len()), (2, 3, 1));
    }

    #[test]
    fn unreadable_metadata_is_an_error_not_a_pass() {
        let error = check(Path::new("/repo"), &[("Cargo.toml", "{}")], &POLICY).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cannot read what `cargo metadata` said about `Cargo.toml`: there is no `packages` list"
        );
        let error =
            check(Path::new("/repo"), &[("Cargo.toml", r#"{"packages": [{"name": "x"}]}"#)], &POLICY).unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"cannot read what `cargo metadata` said about `Cargo.toml`: a package has no `version` (it reads {"name":"x"})"#
        );
    }

    #[test]
    fn versions_sort_by_their_numbers() {
        let mut versions = vec!["0.10.0", "0.9.2", "1.0.0-rc.1", "0.9.10"];
        versions.sort_by_key(|version| version_key(version));
        assert_eq!(versions, ["0.9.2", "0.9.10", "0.10.0", "1.0.0-rc.1"]);
    }
}
