//! The MCP words of what the core refers to. The core carries what to do next (`vfs::Hint`),
//! and which operation or argument a text is about (`vfs::Operation`, `vfs::Argument`), as
//! values; the tools word them. Each text here is what an agent reads, byte for byte: the
//! tools' names, their arguments as the schemas spell them, and `overwrite: true` where the
//! core says only "overwrite".
#![expect(clippy::disallowed_methods, reason = "fixture: the test lays out files before the calls")]

use std::time::Duration;

use serde_json::{Value, json};
use vfs::{Limits, MountRegistry, MountRoot, MountSpec};
use vfs_host::ToolService;

/// A writable `/src` over a fresh directory holding `files`, with `limits`.
fn service(files: &[(&str, &[u8])], limits: Limits) -> (tempfile::TempDir, ToolService) {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let spec = MountSpec::new(dir.path().to_str().unwrap(), MountRoot::new("/src").unwrap(), "rw".parse().unwrap());
    let registry = MountRegistry::builder().mount(spec).limits(limits).build(vfs::ambient_authority()).unwrap();
    (dir, ToolService::new(registry, None))
}

/// The text of a call that the tool refuses.
fn refused(tools: &ToolService, tool: &str, arguments: Value) -> String {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    let output = tools.call(tool, Some(arguments)).unwrap();
    assert!(output.is_error, "{tool}: {}", output.text);
    output.text
}

/// The text of a call that succeeds.
fn answered(tools: &ToolService, tool: &str, arguments: Value) -> String {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    let output = tools.call(tool, Some(arguments)).unwrap();
    assert!(!output.is_error, "{tool}: {}", output.text);
    output.text
}

#[test]
fn the_hints_of_errors_are_said_as_tool_arguments() {
    let files: [(&str, &[u8]); 2] = [("a.txt", b"x = 1;\ny = 1;\n"), ("d/f.txt", b"f\n")];
    let (_dir, tools) = service(&files, Limits::default());
    assert_eq!(
        refused(&tools, "write_file", json!({ "path": "/src/a.txt", "content": "new" })),
        "`/src/a.txt` already exists; pass `overwrite: true` to replace it"
    );
    answered(&tools, "read_text_file", json!({ "path": "/src/a.txt" }));
    let edit = |old: &str| json!({ "path": "/src/a.txt", "edits": [{ "oldText": old, "newText": "z" }] });
    assert_eq!(
        refused(&tools, "edit_file", edit("= 1;")),
        "edit 1 for `/src/a.txt`: `oldText` matches 2 places; add surrounding lines to make it unique, or pass `replaceAll: true`"
    );
    assert_eq!(
        refused(&tools, "edit_file", edit("nowhere")),
        "edit 1 for `/src/a.txt`: `oldText` was not found; read the file and copy the text exactly"
    );
    assert_eq!(
        refused(&tools, "delete_file", json!({ "path": "/src/d" })),
        "`/src/d` is a directory that is not empty; pass `recursive: true` to delete it with its contents"
    );
    assert_eq!(
        refused(&tools, "grep", json!({ "pattern": "(" })),
        "`(` is not a valid regular expression; pass `literal: true` to search for the text as written"
    );
    let huge = "\\w{1000}".repeat(3);
    assert!(
        refused(&tools, "grep", json!({ "pattern": huge }))
            .ends_with("grow it); simplify it, or pass `literal: true` to search for the text as written")
    );
}

#[test]
fn arguments_are_named_as_the_tools_spell_them() {
    let files: [(&str, &[u8]); 3] = [("a.txt", b"a\n"), ("b.bin", b"b\0inary"), ("c.txt", b"\xff\xfe text")];
    let (_dir, tools) = service(&files, Limits::default());
    let read = |window: Value| {
        let mut arguments = json!({ "path": "/src/a.txt" });
        arguments.as_object_mut().unwrap().extend(window.as_object().unwrap().clone());
        refused(&tools, "read_text_file", arguments)
    };
    assert_eq!(read(json!({ "head": 0 })), "`head`, `tail` and `limit` must be at least 1");
    assert_eq!(read(json!({ "offset": 0 })), "`offset` is 1-based: the first line is `offset: 1`");
    assert_eq!(read(json!({ "head": 1, "tail": 1 })), "give `head` or `tail`, not both");
    assert_eq!(read(json!({ "tail": 1, "limit": 1 })), "`head`/`tail` do not mix with `offset`/`limit`; use one pair");
    assert_eq!(
        refused(&tools, "read_multiple_files", json!({ "paths": [] })),
        "`paths` is empty; give one or more virtual paths"
    );
    answered(&tools, "read_text_file", json!({ "path": "/src/a.txt" }));
    assert_eq!(
        refused(&tools, "edit_file", json!({ "path": "/src/a.txt", "edits": [] })),
        "`edits` is empty; give at least one {oldText, newText}"
    );
    assert_eq!(
        refused(&tools, "edit_file", json!({ "path": "/src/a.txt", "edits": [{ "oldText": "", "newText": "x" }] })),
        "edit 1: `oldText` is empty"
    );
    assert_eq!(
        refused(&tools, "directory_tree", json!({ "path": "/src", "maxDepth": 0 })),
        "`maxDepth` must be at least 1"
    );
    assert_eq!(
        refused(&tools, "directory_tree", json!({ "path": "/src", "excludePatterns": vec!["x"; 65] })),
        "65 `excludePatterns` given, at most 64; combine them with braces, like `{target,dist}`"
    );
    assert_eq!(
        refused(&tools, "directory_tree", json!({ "path": "/src", "excludePatterns": vec!["*a".repeat(500); 64] })),
        "the `excludePatterns` together are too large to compile; use fewer or simpler ones"
    );
    assert_eq!(
        refused(&tools, "search_files", json!({ "path": "/src", "pattern": "[z-a]" })),
        "`pattern`: `[z-a]` is not a valid glob (invalid range; 'z' > 'a'); try `*.rs` or `**/*.md`"
    );
    assert_eq!(
        refused(&tools, "search_files", json!({ "path": "/src", "pattern": "" })),
        "`pattern` is empty; use a glob such as `*.rs` or `**/test_*.py`"
    );
    assert_eq!(
        refused(&tools, "grep", json!({ "pattern": "a", "include": "[" })),
        "`include`: `[` is not a valid glob (unclosed character class; missing ']'); try `*.rs` or `**/*.md`"
    );
    assert_eq!(
        refused(&tools, "grep", json!({ "pattern": "a".repeat(9000) })),
        "`pattern` has 9000 bytes, more than the 8192-byte limit for a pattern; use a shorter one"
    );
    assert_eq!(
        refused(&tools, "read_text_file", json!({ "path": "/src/b.bin" })),
        "`/src/b.bin` looks binary (it contains NUL bytes); use read_media_file for images and audio"
    );
    assert_eq!(
        refused(&tools, "read_text_file", json!({ "path": "/src/c.txt" })),
        "`/src/c.txt` is not UTF-8 text; use read_media_file for binary content"
    );
}

#[test]
fn a_cut_result_says_how_to_narrow_in_the_tools_words() {
    let files: [(&str, &[u8]); 3] = [("a.txt", b"hit\n"), ("b.txt", b"hit\n"), ("c.txt", b"hit\n")];
    let mut limits = Limits::default();
    limits.entries = 2;
    let (_dir, tools) = service(&files, limits);
    let note = |text: String| text.lines().last().unwrap().to_owned();
    assert_eq!(
        note(answered(&tools, "grep", json!({ "pattern": "hit", "maxResults": 1 }))),
        "[truncated at 1 matches; narrow with `path`, `include` or a more specific pattern, or raise `maxResults`]"
    );
    assert_eq!(
        note(answered(&tools, "list_directory", json!({ "path": "/src" }))),
        "[truncated: showing 2 of 3 entries; narrow with search_files]"
    );
    assert_eq!(
        note(answered(&tools, "list_directory_with_sizes", json!({ "path": "/src" }))),
        "[truncated: showing 2 of 3 entries; narrow with search_files]"
    );
    assert_eq!(
        note(answered(&tools, "directory_tree", json!({ "path": "/src" }))),
        "[truncated after 2 entries; pass a smaller maxDepth, excludePatterns, or a deeper path]"
    );
    assert_eq!(
        note(answered(&tools, "search_files", json!({ "path": "/src", "pattern": "*.txt" }))),
        "[truncated at 2 matches; use a more specific pattern or path]"
    );
}

#[test]
fn a_call_out_of_time_is_named_by_its_tool_and_says_what_to_narrow() {
    let files: [(&str, &[u8]); 2] = [("a.txt", b"a\n"), ("d/f.txt", b"f\n")];
    let mut limits = Limits::default();
    limits.call_time = Duration::ZERO;
    let (_dir, tools) = service(&files, limits);
    let said = |tool: &str, arguments: Value| refused(&tools, tool, arguments);
    let spent = |tool: &str, hint: &str| format!("`{tool}` ran past its 1 s time budget and was stopped; {hint}");
    assert_eq!(
        said("grep", json!({ "pattern": "a" })),
        spent("grep", "narrow it with `path`, `include` or a more specific pattern")
    );
    assert_eq!(
        said("directory_tree", json!({ "path": "/src" })),
        spent("directory_tree", "pass a smaller `maxDepth`, `excludePatterns` or a deeper `path`")
    );
    assert_eq!(
        said("search_files", json!({ "path": "/src", "pattern": "*" })),
        spent("search_files", "search below a deeper `path`, or with a more specific pattern")
    );
    assert_eq!(
        said("read_text_file", json!({ "path": "/src/a.txt" })),
        spent("read_text_file", "read a window nearer the start (`head`, or `offset` and `limit`)")
    );
}
