//! `docs/tools.md` carries the output of `vfs tools` between markers; this keeps it current.

use crate::util::TestDir;

const TOOLS_MD: &str = include_str!("../../../../docs/tools.md");
const BEGIN: &str = "<!-- begin: vfs tools -->\n```json\n";
const END: &str = "```\n<!-- end: vfs tools -->";

#[test]
fn docs_tools_md_matches_the_schemas() {
    let test = TestDir::new();
    let run = test.run(&["tools"]);
    assert_eq!(run.code, 0);
    let start = TOOLS_MD.find(BEGIN).expect("docs/tools.md has the begin marker") + BEGIN.len();
    let end = TOOLS_MD[start..].find(END).expect("docs/tools.md has the end marker") + start;
    assert!(
        TOOLS_MD[start..end] == run.stdout,
        "docs/tools.md is out of date: replace the block between the markers with the output of `cargo run -q -p vfs-cli -- tools`"
    );
}

const CLI_MD: &str = include_str!("../../../../docs/cli.md");

/// Every option of every command is documented in `docs/cli.md`.
#[test]
fn docs_cli_md_names_every_option() {
    let test = TestDir::new();
    let mut missing = Vec::new();
    for command in ["serve", "mounts", "check", "tools", "call", "fuse", "run", "undo", "journal list"] {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.push("--help");
        let run = test.run(&args);
        assert_eq!(run.code, 0, "{command} --help: {}", run.stderr);
        for word in run.stdout.split(|c: char| c.is_whitespace() || c == ',') {
            let Some(option) = word.strip_prefix("--") else { continue };
            let option: String = option.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            if option.is_empty() || ["help", "version"].contains(&option.as_str()) {
                continue;
            }
            let spelled = format!("`--{option}");
            if !CLI_MD.contains(&spelled) && !missing.contains(&spelled) {
                missing.push(spelled);
            }
        }
    }
    assert!(missing.is_empty(), "docs/cli.md does not document: {}", missing.join(", "));
}
