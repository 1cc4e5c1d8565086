//! Mounts the current directory read-only at `/workspace` and prints what an agent would see:
//! the prompt mount table, the virtual root, and a shallow tree of the workspace.
#![expect(clippy::print_stdout, reason = "an example prints its findings")]

use vfs::{MountRegistry, MountRoot, MountSpec, Rights};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = MountSpec::new(".", MountRoot::new("/workspace")?, Rights::ReadOnly);
    let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority())?;
    let agent = registry.agent();
    println!("{}", registry.prompt_table());
    println!("$ list_directory /\n{}", agent.list("/")?.to_text());
    println!(
        "$ directory_tree /workspace (maxDepth 2)\n{}",
        agent.tree("/workspace", Some(2), &[".git".into(), "target".into()])?.to_text()
    );
    Ok(())
}
