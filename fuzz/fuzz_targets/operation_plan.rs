//! A plan of path tokens and operations against a temporary mount: nothing outside the mounts
//! changes, and no physical path, outside content or internal root reaches the agent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vfs::{ReadWindow, Precondition};
use vfs_compliance::kit::{AgentView, LocalFactory, SECRET, standard};

const TOKENS: &[&str] = &[".", "..", "a", "b", "link", "llm-logs", "src", "output", "", "%2e%2e", "a\\..", "~"];

fuzz_target!(|bytes: &[u8]| {
    let world = standard(&LocalFactory(vfs::ambient_authority())).expect("the standard world builds");
    let outside = world.layout.snapshot("outside");
    let logs = world.layout.snapshot("logs");
    let agent = world.agent();
    for step in bytes.chunks(4).take(16) {
        let operation = step[0] % 8;
        let path = format!(
            "/output/{}",
            step[1..].iter().map(|byte| TOKENS[usize::from(*byte) % TOKENS.len()]).collect::<Vec<_>>().join("/")
        );
        let name = step.get(1).map_or("link", |byte| TOKENS[usize::from(*byte) % TOKENS.len()]);
        let text = match operation {
            0 => agent.read_text(&path, &ReadWindow::default()).agent_view(),
            1 => agent.write(&path, "x\n", &Precondition::Any).agent_view(),
            2 => agent.list(&path).agent_view(),
            3 => agent.create_directory(&path).agent_view(),
            4 => agent.delete(&path, true, &Precondition::Any).agent_view(),
            5 => agent.move_path(&path, "/output/moved", &Precondition::Any, &Precondition::Any).agent_view(),
            6 => {
                if !matches!(name, "" | "." | "..") {
                    let _ = std::os::unix::fs::symlink(
                        world.layout.path("outside"),
                        world.layout.path(&format!("out/{name}")),
                    );
                }
                String::new()
            }
            _ => {
                if !matches!(name, "" | "." | "..") {
                    let _ = std::os::unix::fs::symlink("..", world.layout.path(&format!("out/{name}")));
                }
                String::new()
            }
        };
        assert!(world.check_text(&text).is_ok(), "{path}: {text}");
        assert!(!text.contains(SECRET));
    }
    assert_eq!(world.layout.snapshot("outside"), outside);
    assert_eq!(world.layout.snapshot("logs"), logs);
});
