//! The conformance kit, run for the object-storage backend: against the in-process store
//! (`memory://`) and against the S3-compatible server that `scripts/test` starts
//! (`VFS_TEST_S3_BUCKET` and the `AWS_*` variables).
//!
//! The factory uploads each planned directory of the layout under its own key prefix (through
//! a throwaway read-write registry, so the upload uses the backend under test), then mounts
//! the prefixes with the planned rights and visibility. Object storage has no local tree, so
//! the kit skips the scenarios about links and special files, and says why; every other
//! scenario must pass.
#![expect(clippy::disallowed_methods, reason = "fixture: the test reads the layout it uploads")]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use vfs::{MountRegistry, MountSpec, Precondition, Visibility};
use vfs_compliance::fixture::Layout;
use vfs_compliance::kit::{self, Factory, Plan};

/// The scenarios object storage skips: links and special files exist only in a local tree.
const SKIPPED: &[(&str, &str)] = &[
    ("links inside work, links out are refused", "the store has no symbolic links"),
    ("special files are refused at once", "the store holds no FIFOs, sockets or devices"),
];

/// Mounts prefixes below `base` (`s3://bucket/run` or `memory://name`).
struct ObjectFactory {
    base: String,
}

static PREFIXES: AtomicUsize = AtomicUsize::new(0);

fn upload(directory: &Path, url: &str) -> Result<(), String> {
    let spec: MountSpec = format!("{url}:/upload:rw").parse().map_err(|error: vfs::SpecError| error.to_string())?;
    let registry =
        MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).map_err(|error| error.to_string())?;
    let agent = registry.agent();
    // Planned directories may nest (the nesting scenario), so an object may come twice.
    let overwrite = Precondition::Any;
    let mut pending = vec![(directory.to_path_buf(), String::from("/upload"))];
    while let Some((physical, virtual_path)) = pending.pop() {
        for entry in std::fs::read_dir(&physical).map_err(|error| error.to_string())? {
            let entry = entry.map_err(|error| error.to_string())?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().map_err(|error| error.to_string())?;
            let child = format!("{virtual_path}/{name}");
            if kind.is_dir() {
                pending.push((entry.path(), child));
            } else if kind.is_file() {
                let content = std::fs::read_to_string(entry.path()).map_err(|error| error.to_string())?;
                agent.write(&child, &content, &overwrite).map_err(|error| error.to_string())?;
            }
        }
    }
    Ok(())
}

impl Factory for ObjectFactory {
    fn name(&self) -> &str {
        &self.base
    }

    fn serves_layout_directly(&self) -> bool {
        false
    }

    fn build(&self, layout: &Layout, plan: &Plan<'_>) -> Result<MountRegistry, String> {
        let mut builder = MountRegistry::builder();
        builder.limits(plan.limits);
        let world = PREFIXES.fetch_add(1, Ordering::Relaxed);
        for mount in &plan.mounts {
            // Overrides (`rw;vendor:ro`) stay in the rights part of the spec.
            let url = format!("{}/world-{world}/{}", self.base, mount.directory);
            upload(&layout.path(mount.directory), &url)?;
            let spec: MountSpec = format!("{url}:{}:{}", mount.root, mount.rights)
                .parse()
                .map_err(|error: vfs::SpecError| error.to_string())?;
            match mount.visibility {
                Visibility::Internal => builder.internal(spec),
                Visibility::AgentFacing => builder.mount(spec),
            };
        }
        builder.build(vfs::ambient_authority()).map_err(|error| error.to_string())
    }
}

fn assert_passes(factory: &ObjectFactory) {
    let report = kit::run_all(factory);
    report.assert_all_passed();
    assert_eq!(report.skipped, SKIPPED, "the skipped scenarios and their reasons");
    assert_eq!(report.passed.len(), kit::scenarios().len() - SKIPPED.len());
}

#[test]
fn the_in_process_object_store_passes_every_scenario_it_can_express() {
    assert_passes(&ObjectFactory { base: format!("memory://kit-{}", std::process::id()) });
}

#[test]
fn the_s3_backend_passes_every_scenario_it_can_express() {
    let Ok(bucket) = std::env::var("VFS_TEST_S3_BUCKET") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run this against the S3 server scripts/test starts");
        return;
    };
    assert_passes(&ObjectFactory { base: format!("s3://{bucket}/kit-{}", std::process::id()) });
}
