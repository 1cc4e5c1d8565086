//! The conformance kit, run for the local backend.

use vfs_compliance::kit::{self, LocalFactory};

#[test]
fn the_local_backend_passes_every_scenario() {
    let report = kit::run_all(&LocalFactory);
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
        LocalFactory.build(layout, &careless)
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
