//! The dependency policy holds for the real workspace, read offline as `scripts/test` reads it.
//! (The fuzzing workspace is checked by `vfs-compliance deps .` in `scripts/test`, after its
//! step has fetched libFuzzer's crates; a plain `cargo test` may not have them.)

use std::path::PathBuf;

use vfs_compliance::deps::{self, Policy};

#[test]
fn the_workspace_keeps_the_dependency_policy() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let report = deps::check_repository(&root, &["Cargo.toml"], &Policy::WORKSPACE).unwrap();
    let findings: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
    assert_eq!(findings, Vec::<String>::new());
    // Every accepted duplicate is reported, so a reader of the test output sees what it costs.
    assert_eq!(report.notes.len(), deps::DUPLICATES.len(), "{:#?}", report.notes);
}
