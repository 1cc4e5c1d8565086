//! Content search through vfs from the command line, for the benchmark against ripgrep:
//! `grep_bench DIR PATTERN` mounts DIR read-only at `/data` and prints the matches as an agent
//! would see them.
#![expect(clippy::print_stdout, reason = "an example prints its findings")]

use vfs::{GrepRequest, Limits, MountRegistry, MountRoot, MountSpec, Rights};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let (Some(directory), Some(pattern)) = (arguments.next(), arguments.next()) else {
        return Err("usage: grep_bench DIR PATTERN".into());
    };
    let spec = MountSpec::new(directory, MountRoot::new("/data")?, Rights::ReadOnly);
    let mut limits = Limits::default();
    limits.matches = 1_000_000;
    let registry = MountRegistry::builder().mount(spec).limits(limits).build(vfs::ambient_authority())?;
    let request = GrepRequest { pattern, max_results: Some(1_000_000), ..GrepRequest::default() };
    let result = registry.agent().grep(&request)?;
    print!("{}", result.to_text());
    Ok(())
}
