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
