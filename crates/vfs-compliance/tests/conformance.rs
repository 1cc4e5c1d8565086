//! The conformance kit, run for the local backend.

use vfs_compliance::kit::{self, LocalFactory};

#[test]
fn the_local_backend_passes_every_scenario() {
    let report = kit::run_all(&LocalFactory(vfs::ambient_authority()));
    report.assert_all_passed();
    assert_eq!(report.passed.len(), kit::scenarios().len());
}

/// A backend that gets visibility and rights wrong must fail the kit: the scenarios have teeth.
struct Careless {
    everything_agent_facing: bool,
    everything_writable: bool,
}

impl kit::Factory for Careless {
    fn name(&self) -> &'static str {
        "careless"
    }

    fn build(
        &self,
        layout: &vfs_compliance::fixture::Layout,
        plan: &kit::Plan<'_>,
    ) -> Result<vfs::MountRegistry, String> {
        let mut careless = plan.clone();
        for mount in &mut careless.mounts {
            if self.everything_agent_facing {
                mount.visibility = vfs::Visibility::AgentFacing;
            }
            if self.everything_writable {
                mount.rights = "rw";
            }
        }
        LocalFactory(vfs::ambient_authority()).build(layout, &careless)
    }
}

#[test]
fn a_careless_backend_fails_the_kit() {
    let leaky = kit::run_all(&Careless { everything_agent_facing: true, everything_writable: false });
    let failed: Vec<&str> = leaky.failed.iter().map(|(name, _)| *name).collect();
    assert!(failed.contains(&"an internal root is an unknown root"), "{failed:?}");
    assert!(failed.contains(&"nested mounts keep their own rights and visibility"), "{failed:?}");
    let writable = kit::run_all(&Careless { everything_agent_facing: false, everything_writable: true });
    let failed: Vec<&str> = writable.failed.iter().map(|(name, _)| *name).collect();
    assert!(failed.contains(&"rights and overrides decide, with exact denials"), "{failed:?}");
    assert!(failed.contains(&"the longest root wins at a segment boundary"), "{failed:?}");
}

/// A store that declares it lacks a capability it has: the scenario it skips passes anyway,
/// and the report fails, so a skip cannot outlive its reason.
struct Understated;

impl kit::Factory for Understated {
    fn name(&self) -> &'static str {
        "understated"
    }

    fn build(
        &self,
        layout: &vfs_compliance::fixture::Layout,
        plan: &kit::Plan<'_>,
    ) -> Result<vfs::MountRegistry, String> {
        LocalFactory(vfs::ambient_authority()).build(layout, plan)
    }

    fn capabilities(&self) -> Result<vfs::Capabilities, String> {
        let mut capabilities = LocalFactory(vfs::ambient_authority()).capabilities()?;
        capabilities.links = false;
        Ok(capabilities)
    }
}

#[test]
fn a_skip_the_store_does_not_need_fails_the_kit() {
    let report = kit::run_all(&Understated);
    assert_eq!(report.stale, ["links inside work, links out are refused"]);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let failure = std::panic::catch_unwind(|| report.assert_all_passed()).unwrap_err();
    let text = failure.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        text.contains("links inside work, links out are refused: skipped for a capability the store declares it lacks, yet it passed"),
        "{text}"
    );
}
