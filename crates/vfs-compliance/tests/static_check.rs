//! The static check: every rule fires on a planted violation in a small fake workspace, stays
//! quiet on the allowed forms, and the real workspace has no finding at all.

use std::path::PathBuf;

use vfs_compliance::fixture::Layout;
use vfs_compliance::static_check::{self, Finding, REQUIRED_METHODS, check_clippy_config, check_source};

/// `(rule, line)` pairs of the findings.
fn rules(findings: &[Finding]) -> Vec<(&'static str, usize)> {
    findings.iter().map(|finding| (finding.rule, finding.line)).collect()
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const RAW: &str = r#"use std::fs;
use std::path::Path;

fn exists(path: &Path) -> bool {
    path.exists()
}

async fn read() {
    let _ = tokio::fs::read("x").await;
    let _ = std::fs::File::open("x");
    let _ = Path::new("x").canonicalize();
    assert!(Path::new("y").is_dir());
}
"#;

#[test]
fn raw_fs_fires_outside_the_storage_module() {
    let findings = check_source("crates/app/src/lib.rs", RAW);
    assert_eq!(
        rules(&findings),
        [("raw-fs", 1), ("raw-fs", 5), ("raw-fs", 9), ("raw-fs", 10), ("raw-fs", 11), ("raw-fs", 12)],
        "{findings:#?}"
    );
    assert_eq!(
        findings[0].to_string(),
        "raw-fs crates/app/src/lib.rs:1: raw filesystem access through `std::fs`\n  fix: go through a vfs accessor (AgentAccessor/PrivilegedAccessor); only crates/vfs/src/storage/ touches the disk"
    );
}

#[test]
fn raw_fs_is_allowed_in_storage_and_in_test_code() {
    assert_eq!(check_source("crates/vfs/src/storage/local.rs", RAW), []);
    assert_eq!(check_source("crates/vfs/src/storage/object/mod.rs", RAW), []);
    assert_eq!(check_source("crates/app/tests/fixtures.rs", RAW), []);
    assert_eq!(check_source("crates/app/benches/walk.rs", RAW), []);
    assert_eq!(check_source("fuzz/fuzz_targets/plan.rs", RAW), []);
    let in_test_module = "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { std::fs::read(\"x\").unwrap(); }\n}\n";
    assert_eq!(check_source("crates/app/src/lib.rs", in_test_module), []);
    let in_test_fn = "#[test]\nfn g() { std::fs::read(\"x\").unwrap(); }\n";
    assert_eq!(check_source("crates/app/src/lib.rs", in_test_fn), []);
    let not_test = "#[cfg(not(test))]\nfn g() { std::fs::read(\"x\").unwrap(); }\n";
    assert_eq!(rules(&check_source("crates/app/src/lib.rs", not_test)), [("raw-fs", 2)]);
}

#[test]
fn path_fields_fire_on_public_agent_facing_types() {
    let source = r"use std::path::PathBuf;
pub struct Outcome {
    pub path: PathBuf,
    pub name: String,
}
pub enum Payload {
    Host(std::ffi::OsString),
    Virtual(String),
}
pub(crate) struct Internal {
    path: PathBuf,
}
pub struct Wrapped {
    paths: Vec<Option<&'static std::path::Path>>,
}
";
    let findings = check_source("crates/vfs/src/ops/outcome.rs", source);
    assert_eq!(rules(&findings), [("path-field", 3), ("path-field", 7), ("path-field", 14)], "{findings:#?}");
    assert_eq!(findings[0].message, "public agent-facing type `Outcome` has field `path` of type `PathBuf`");
    // The same types in an operator-facing module are fine.
    assert_eq!(check_source("crates/vfs/src/registry.rs", source), []);
    // Host tool types are agent-facing by file, and anything deriving JsonSchema by its derive.
    let tool = "#[derive(Debug, schemars::JsonSchema)]\npub struct ReadArgs {\n    pub path: std::path::PathBuf,\n}\n";
    assert_eq!(rules(&check_source("crates/host/src/tools.rs", tool)), [("path-field", 3)]);
    // Every part of the surface is, whatever its file's name.
    assert_eq!(rules(&check_source("crates/host/src/tools/handlers.rs", source))[0], ("path-field", 3));
    assert_eq!(rules(&check_source("crates/host/src/words.rs", source))[0], ("path-field", 3));
    assert_eq!(rules(&check_source("crates/host/src/settings.rs", tool)), [("path-field", 3)]);
    assert_eq!(rules(&check_source("crates/host/src/mcp.rs", source))[0], ("path-field", 3));
}

#[test]
fn minting_fires_outside_the_logger_and_in_unexplained_tests() {
    let source = "fn f(registry: &vfs::MountRegistry) {\n    let _ = registry.mint_privileged(\"/llm-logs\");\n    let _ = vfs::MountRegistry::mint_privileged(registry, \"/llm-logs\");\n}\n";
    assert_eq!(
        rules(&check_source("crates/host/src/server.rs", source)),
        [("mint-privileged", 2), ("mint-privileged", 3)]
    );
    assert_eq!(check_source("crates/host/src/exchange_log.rs", source), []);
    assert_eq!(check_source("crates/host/src/logger/mod.rs", source), []);
    let findings = check_source("crates/host/tests/logger.rs", source);
    assert_eq!(rules(&findings), [("mint-privileged", 2), ("mint-privileged", 3)]);
    assert_eq!(findings[0].message, "test code mints a privileged accessor without saying why");
    let explained = "fn f(registry: &vfs::MountRegistry) {\n    #[expect(clippy::disallowed_methods, reason = \"proves the logger reaches only its root\")]\n    let _ = registry.mint_privileged(\"/llm-logs\");\n}\n";
    assert_eq!(check_source("crates/host/tests/logger.rs", explained), []);
    // Outside tests, a clippy reason needs a ratified tag.
    assert_eq!(rules(&check_source("crates/host/src/server.rs", explained)), [("exemption", 2)]);
    let ratified = explained.replace("reason = \"", "reason = \"capability-proof: ");
    assert_eq!(check_source("crates/host/src/server.rs", &ratified), []);
}

#[test]
fn the_ambient_authority_is_minted_only_in_the_binarys_main_and_in_tests() {
    let source = "fn f() {\n    let authority = vfs::ambient_authority();\n    let again = ambient_authority();\n    let minter = vfs::ambient_authority;\n    assert!(g(vfs::ambient_authority()));\n}\n";
    let findings = check_source("crates/host/src/launch.rs", source);
    assert_eq!(
        rules(&findings),
        [("ambient-authority", 2), ("ambient-authority", 3), ("ambient-authority", 4), ("ambient-authority", 5)]
    );
    assert_eq!(findings[0].message, "the ambient authority is minted here");
    assert_eq!(
        findings[0].fix(),
        "take the AmbientAuthority as a parameter from the caller; only the binary's main mints it (ADR 0010)"
    );
    // Another file of the binary is not its `main`.
    assert_eq!(rules(&check_source("crates/cli/src/journal.rs", source)).len(), 4);
    assert_eq!(check_source("crates/cli/src/main.rs", source), []);
    // The leak checker's `main` mounts what its operator names; an example is a program of
    // its own. Another file of the compliance crate (the kit) is neither.
    assert_eq!(check_source("crates/vfs-compliance/src/main.rs", source), []);
    assert_eq!(check_source("crates/vfs/examples/agent_view.rs", source), []);
    assert_eq!(rules(&check_source("crates/vfs/src/examples/mod.rs", source)).len(), 4);
    assert_eq!(rules(&check_source("crates/vfs-compliance/src/kit.rs", source)).len(), 4);
    // Tests mint their own: test files, and `#[cfg(test)]` or `#[test]` items anywhere.
    assert_eq!(check_source("crates/host/tests/launch.rs", source), []);
    let in_module = format!("#[cfg(test)]\nmod tests {{\n{source}}}\n");
    assert_eq!(check_source("crates/host/src/launch.rs", &in_module), []);
    // Naming the function in a `use` (the core's re-export) or a signature mints nothing.
    let named =
        "pub use storage::ambient::{AmbientAuthority, ambient_authority};\nfn f(authority: vfs::AmbientAuthority) {}\n";
    assert_eq!(check_source("crates/vfs/src/lib.rs", named), []);
    // A ratified comment exempts it like any exemptable rule.
    let exempted = "fn f() {\n    // vfs-compliance: allow(ambient-authority) reason=tooling: a dev tool's own main\n    let authority = vfs::ambient_authority();\n}\n";
    assert_eq!(check_source("crates/app/src/main.rs", exempted), []);
}

#[test]
fn the_ambient_authority_cannot_be_minted_out_of_sight() {
    // Renamed on import, the call would not read as a mint: the rename is the finding.
    let renamed = "use vfs::ambient_authority as mint;\nfn f() {\n    let authority = mint();\n}\n";
    let findings = check_source("crates/host/src/launch.rs", renamed);
    assert_eq!(rules(&findings), [("ambient-authority", 1)]);
    assert_eq!(findings[0].message, "`ambient_authority` is imported as `mint`; call it by its own name");
    // Inside a macro whose body is not a list of expressions.
    let in_macro = "macro_rules! authority {\n    () => { vfs::ambient_authority() };\n}\n";
    assert_eq!(rules(&check_source("crates/host/src/launch.rs", in_macro)), [("ambient-authority", 1)]);
    // Code that builds in production too is not test code: `any(test, unix)` holds on unix.
    let call = "fn f() {\n    let authority = vfs::ambient_authority();\n}\n";
    let either = format!("#[cfg(any(test, unix))]\n{call}");
    assert_eq!(rules(&check_source("crates/host/src/launch.rs", &either)), [("ambient-authority", 3)]);
    let only_tests = format!("#[cfg(all(unix, test))]\n{call}");
    assert_eq!(check_source("crates/host/src/launch.rs", &only_tests), []);
    let not_tests = format!("#[cfg(not(test))]\n{call}");
    assert_eq!(rules(&check_source("crates/host/src/launch.rs", &not_tests)), [("ambient-authority", 3)]);
}

#[test]
fn agent_text_fires_on_io_errors_and_host_paths() {
    let source = r#"use std::path::Path;
fn a(path: &Path) -> String {
    format!("cannot open {}", path.display())
}
fn b(error: std::io::Error) -> String {
    format!("failed: {error}")
}
fn c(host: &Path, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "{:?}", host);
}
fn d(virtual_path: &str, error: &std::io::Error) -> String {
    let kind = error.kind();
    format!("`{virtual_path}`: {kind:?}")
}
fn e(name: &std::ffi::OsStr) -> String {
    format!("{}", name.to_string_lossy())
}
fn f() -> String {
    format!("{}", std::io::Error::last_os_error())
}
"#;
    let findings = check_source("crates/vfs/src/ops/text.rs", source);
    assert_eq!(
        rules(&findings),
        [("agent-text", 3), ("agent-text", 6), ("agent-text", 10), ("agent-text", 17), ("agent-text", 20)],
        "{findings:#?}"
    );
    // Operator-facing modules may name host paths.
    assert_eq!(check_source("crates/vfs/src/registry.rs", source), []);
}

#[test]
fn comment_exemptions_need_a_ratified_reason() {
    let marker = "// vfs-compliance:";
    let good = format!(
        "{marker} allow(raw-fs) reason=fixture: builds a layout\nfn layout() {{\n    std::fs::create_dir_all(\"x\").unwrap();\n    std::fs::write(\"x/a\", \"\").unwrap();\n}}\nfn other() {{\n    std::fs::write(\"x/b\", \"\").unwrap();\n}}\nfn trailing() -> bool {{\n    std::path::Path::new(\"x\").exists() {marker} allow(raw-fs) reason=tooling\n}}\n"
    );
    assert_eq!(rules(&check_source("crates/app/src/lib.rs", &good)), [("raw-fs", 7)]);
    let whole = format!("{marker} allow-file(raw-fs, mint-privileged) reason=tooling: a dev tool\n{RAW}");
    assert_eq!(check_source("crates/app/src/lib.rs", &whole), []);
    for (bad, message) in [
        ("allow(raw-fs)", "the exemption has no `reason=TAG`"),
        ("allow(raw-fs) reason=because", "`because` is not a ratified reason"),
        ("allow(everything) reason=fixture", "the exemption names `everything`"),
        ("ignore(raw-fs) reason=fixture", "a `vfs-compliance:` comment must read"),
    ] {
        let source = format!("{marker} {bad}\nfn f() {{}}\n");
        let findings = check_source("crates/app/src/lib.rs", &source);
        assert_eq!(rules(&findings), [("exemption", 1)], "{bad}");
        assert!(findings[0].message.starts_with(message), "{bad}: {}", findings[0].message);
    }
    // The marker inside a string literal or a doc comment is not an exemption.
    let literal = format!("/// {marker} allow(raw-fs)\nconst S: &str = \"{marker} allow(raw-fs)\";\n");
    assert_eq!(check_source("crates/app/src/lib.rs", &literal), []);
}

#[test]
fn clippy_exemptions_outside_storage_need_a_ratified_reason() {
    let weak = "#[expect(clippy::disallowed_methods, reason = \"we need it\")]\nfn f() {\n    std::fs::read(\"x\").unwrap();\n}\n";
    let findings = check_source("crates/host/src/settings.rs", weak);
    assert_eq!(rules(&findings), [("exemption", 1)]);
    let ratified = weak.replace("we need it", "operator-input: reads the settings file at launch");
    assert_eq!(check_source("crates/host/src/settings.rs", &ratified), []);
    let crate_wide = "#![allow(clippy::disallowed_methods)]\nfn f() {\n    std::fs::read(\"x\").unwrap();\n}\n";
    assert_eq!(rules(&check_source("crates/host/src/lib.rs", crate_wide)), [("exemption", 1)]);
}

#[test]
fn unparsable_files_are_findings() {
    assert_eq!(rules(&check_source("crates/app/src/lib.rs", "fn broken( {")).first().map(|f| f.0), Some("parse"));
}

#[test]
fn a_weakened_clippy_list_fires() {
    #[expect(clippy::disallowed_methods, reason = "fixture: reads the real clippy.toml")]
    let real = std::fs::read_to_string(workspace_root().join("clippy.toml")).unwrap();
    assert_eq!(check_clippy_config(Some(&real)), []);
    let weakened = real.replace("{ path = \"std::fs::read_dir\",", "# removed: std::fs::read_dir");
    let findings = check_clippy_config(Some(&weakened));
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].rule, "clippy-list");
    assert_eq!(findings[0].message, "`disallowed-methods` no longer lists `std::fs::read_dir`");
    let no_types = real.replace("disallowed-types", "allowed-types");
    assert_eq!(check_clippy_config(Some(&no_types)).len(), 2);
    assert_eq!(check_clippy_config(None).len(), 1);
    assert_eq!(check_clippy_config(Some("")).len(), REQUIRED_METHODS.len() + 2);
}

#[test]
fn every_rule_fires_in_a_planted_workspace() {
    let layout = Layout::new();
    layout.file("clippy.toml", "disallowed-methods = []\n");
    layout.file("crates/app/src/lib.rs", RAW);
    layout.file("crates/vfs/src/storage/local.rs", RAW);
    layout.file("crates/vfs/src/ops/out.rs", "pub struct Out {\n    pub path: std::path::PathBuf,\n}\n");
    layout.file(
        "crates/host/src/server.rs",
        "fn f(r: &vfs::MountRegistry) {\n    let _ = r.mint_privileged(\"/llm-logs\");\n}\n",
    );
    layout.file(
        "crates/vfs/src/error.rs",
        "fn f(p: &std::path::Path) -> String {\n    format!(\"{}\", p.display())\n}\n",
    );
    layout.file("crates/app/src/bad.rs", "// vfs-compliance: allow(raw-fs)\nfn f() {}\n");
    layout.file("crates/host/src/launch.rs", "fn f() {\n    let _ = vfs::ambient_authority();\n}\n");
    layout.file("crates/app/src/broken.rs", "fn (");
    layout.file("target/debug/build/generated.rs", RAW);
    layout.file(".hidden/x.rs", RAW);
    let report = static_check::check_workspace(layout.base()).unwrap();
    assert_eq!(report.files, 8);
    let mut fired: Vec<&str> = report.findings.iter().map(|finding| finding.rule).collect();
    fired.sort_unstable();
    fired.dedup();
    assert_eq!(
        fired,
        [
            "agent-text",
            "ambient-authority",
            "clippy-list",
            "exemption",
            "mint-privileged",
            "parse",
            "path-field",
            "raw-fs"
        ]
    );
    for rule in static_check::RULES {
        assert!(fired.contains(&rule.id), "rule {} never fired", rule.id);
    }
    let binary = env!("CARGO_BIN_EXE_vfs-compliance");
    let output = std::process::Command::new(binary).arg("check").arg(layout.base()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("raw-fs crates/app/src/lib.rs:1: raw filesystem access through `std::fs`\n  fix: "),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!("vfs-compliance: {} finding(s) in 8 Rust files checked\n", report.findings.len()))
    );
}

#[test]
fn the_workspace_itself_has_no_finding() {
    let report = static_check::check_workspace(&workspace_root()).unwrap();
    assert!(report.files > 10);
    let text: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
    assert!(report.findings.is_empty(), "{}", text.join("\n"));
}
