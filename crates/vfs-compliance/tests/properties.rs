//! Property tests for the path and mount grammars, and for confinement under random plans.

use proptest::prelude::*;
use vfs::{MountSpec, ParsePathError, Precondition, ReadWindow, VirtualPath};
use vfs_compliance::kit::{AgentView, LocalFactory, SECRET, standard};

/// The reference model of `docs/design.md`, resolution rules 1 and 2, written as rewrites of
/// the text to a fixed point rather than as the parser's segment stack, so the two agree only
/// if both follow the rules: collapse `//`, drop `.`, apply `..` never above `/`.
fn model(input: &str) -> Result<String, ParsePathError> {
    // Rule 1, for the inputs the strategies make (all start with `/`): the first failed check,
    // in the order `docs/design.md` and `ParsePathError` give them.
    if input.len() > vfs::MAX_PATH_BYTES {
        return Err(ParsePathError::TooLong);
    }
    if input.contains('\0') {
        return Err(ParsePathError::Nul);
    }
    if input.chars().any(char::is_control) {
        return Err(ParsePathError::Control);
    }
    if input.split('/').any(|segment| segment.len() > vfs::MAX_SEGMENT_BYTES) {
        return Err(ParsePathError::SegmentTooLong);
    }
    let mut text = input.to_owned();
    while let Some(rewritten) = rewrite(&text) {
        text = rewritten;
    }
    Ok(text)
}

/// One rewrite of rule 2, or `None` once the text is canonical.
fn rewrite(text: &str) -> Option<String> {
    if let Some(at) = text.find("//") {
        return Some(format!("{}{}", &text[..at], &text[at + 1..]));
    }
    if let Some(at) = text.find("/./") {
        return Some(format!("{}{}", &text[..at], &text[at + 2..]));
    }
    if text == "/." || text == "/.." {
        return Some("/".to_owned());
    }
    if let Some(kept) = text.strip_suffix("/.") {
        return Some(kept.to_owned());
    }
    if let Some(rest) = text.strip_prefix("/../") {
        return Some(format!("/{rest}"));
    }
    // The first `..` segment and the name before it cancel (an earlier `..` would have been
    // found first, and one at the start is handled above).
    let dot_dot = text.match_indices("/..").map(|(at, _)| at).find(|at| {
        let after = &text[at + 3..];
        after.is_empty() || after.starts_with('/')
    });
    if let Some(at) = dot_dot {
        let name = text[..at].rfind('/').unwrap_or(0);
        let rest = &text[at + 3..];
        return Some(if name == 0 && rest.is_empty() { "/".to_owned() } else { format!("{}{rest}", &text[..name]) });
    }
    if text.len() > 1 && text.ends_with('/') {
        return Some(text[..text.len() - 1].to_owned());
    }
    None
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("...".to_owned()),
        Just("%2e%2e".to_owned()),
        Just("a\\..\\b".to_owned()),
        Just("~".to_owned()),
        "[a-z0-9._-]{1,8}",
        "\\PC{1,4}",
    ]
}

fn path_text() -> impl Strategy<Value = String> {
    prop::collection::vec(segment(), 0..12).prop_map(|segments| format!("/{}", segments.join("/")))
}

/// Paths the parser must refuse, or only just accept: segments at and past the segment limit,
/// control characters and NUL, and paths near the length limit.
fn edge_path_text() -> impl Strategy<Value = String> {
    let edge_segment = prop_oneof![
        segment(),
        Just("a".repeat(vfs::MAX_SEGMENT_BYTES)),
        Just("b".repeat(vfs::MAX_SEGMENT_BYTES + 1)),
        "[a-z]{0,2}[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}][a-z]{0,2}",
    ];
    prop::collection::vec(edge_segment, 0..24).prop_map(|segments| format!("/{}", segments.join("/")))
}

fn root_text() -> impl Strategy<Value = String> {
    prop::collection::vec("[A-Za-z0-9_-][A-Za-z0-9._-]{0,6}", 1..4)
        .prop_map(|segments| format!("/{}", segments.join("/")))
}

fn physical_text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9_./ -]{1,16}", "[a-zA-Z0-9_:;|./ -]{1,16}", "[A-Z]:\\\\[a-z0-9\\\\]{0,8}"]
}

fn quoted(physical: &str) -> String {
    let bytes = physical.as_bytes();
    let drive =
        bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && matches!(bytes[2], b'\\' | b'/');
    let body = if drive { &physical[2..] } else { physical };
    // One letter, or one letter and `:`, would read back as a drive path.
    let drive_like = bytes[0].is_ascii_alphabetic() && (bytes.len() == 1 || (bytes[1] == b':' && !drive));
    if drive_like || body.contains([':', ';', '|', '"']) || physical.ends_with('\\') {
        format!("\"{physical}\"")
    } else {
        physical.to_owned()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn canonical_paths_follow_the_model_and_never_climb(input in prop_oneof![3 => path_text(), 1 => edge_path_text()]) {
        let parsed = VirtualPath::new(&input);
        prop_assert_eq!(parsed.clone().map(|path| path.as_str().to_owned()), model(&input));
        if let Ok(path) = &parsed {
            prop_assert!(path.components().all(|segment| !segment.is_empty() && segment != "." && segment != ".."));
            let again: VirtualPath = path.to_string().parse().unwrap();
            prop_assert_eq!(&again, path);
            prop_assert_eq!(VirtualPath::new(path.as_str()).ok(), Some(path.clone()));
        }
    }

    #[test]
    fn a_path_below_a_root_stays_below_it_or_leaves_it_lexically(root in root_text(), rest in path_text()) {
        let joined = format!("{root}{rest}");
        if let (Ok(root_path), Ok(path)) = (VirtualPath::new(&root), VirtualPath::new(&joined)) {
            // `..` may leave a root only lexically (to another root), never into a host path:
            // the canonical form is the model's, which has no `..` left.
            prop_assert_eq!(Ok(path.as_str().to_owned()), model(&joined));
            if !rest.split('/').any(|segment| segment == "..") {
                prop_assert!(path.starts_with(&root_path));
            }
        }
    }

    #[test]
    fn mount_strings_round_trip(
        physical in physical_text(),
        root in root_text(),
        rights in prop::sample::select(vec!["", ":ro", ":rw", ":rwnd", ":RO", ":Rw"]),
        overrides in prop::collection::vec(("[a-z]{1,5}(/[a-z]{1,5}){0,2}", prop::sample::select(vec!["ro", "rw", "rwnd"])), 0..3),
        rules in prop::collection::vec(("(\\*\\*/)?[a-z*?][a-z*?]{0,3}(/[a-z*][a-z.*]{0,3}){0,2}", prop::sample::select(vec!["ro", "hidden", "HIDDEN"])), 0..3),
    ) {
        let mut text = format!("{}:{root}{rights}", quoted(&physical));
        let mut seen = Vec::new();
        for (path, token) in &overrides {
            if !seen.contains(path) {
                seen.push(path.clone());
                text.push_str(&format!(";{path}:{token}"));
            }
        }
        let mut ruled = Vec::new();
        for (glob, token) in &rules {
            let is_rule = *token != "ro" || glob.contains(['*', '?']);
            if is_rule && !ruled.contains(glob) && !seen.contains(glob) {
                ruled.push(glob.clone());
                text.push_str(&format!(";{glob}:{token}"));
            }
        }
        let spec: MountSpec = match text.parse() {
            Ok(spec) => spec,
            Err(error) => {
                // Only a root made of dots alone, or an override inside a hidden rule, may be
                // refused here.
                let dots = root.split('/').any(|segment| segment == "." || segment == "..");
                prop_assert!(dots || error.to_string().contains("which is hidden"), "{text}: {error}");
                return Ok(());
            }
        };
        prop_assert_eq!(spec.physical(), physical.as_str());
        prop_assert_eq!(spec.root().as_str(), root.as_str());
        prop_assert_eq!(spec.overrides().len(), seen.len());
        prop_assert_eq!(spec.rules().len(), ruled.len());
        let again: MountSpec = spec.to_string().parse().unwrap();
        prop_assert_eq!(&again, &spec);
    }

    #[test]
    fn any_string_that_parses_as_a_mount_round_trips(text in "\\PC{0,40}") {
        if let Ok(spec) = text.parse::<MountSpec>() {
            let display = spec.to_string();
            let again: MountSpec = display.parse().unwrap();
            prop_assert_eq!(again, spec);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A random plan of path tokens and operations against a temporary mount never reads or
    /// changes anything outside it and never shows a physical path or the internal root.
    #[test]
    fn random_plans_stay_confined(
        steps in prop::collection::vec(
            (prop::sample::select(vec!["read", "write", "list", "mkdir", "delete", "link-out", "link-in", "move"]),
             prop::collection::vec(prop::sample::select(vec![".", "..", "a", "b", "link", "llm-logs", "src", "output"]), 1..6)),
            1..12,
        ),
    ) {
        let world = standard(&LocalFactory(vfs::ambient_authority())).unwrap();
        let outside = world.layout.snapshot("outside");
        let logs = world.layout.snapshot("logs");
        let agent = world.agent();
        for (operation, tokens) in steps {
            let path = format!("/output/{}", tokens.join("/"));
            let text = match operation {
                "read" => agent.read_text(&path, &ReadWindow::default()).agent_view(),
                "write" => agent.write(&path, "x\n", &Precondition::Any).agent_view(),
                "list" => agent.list(&path).agent_view(),
                "mkdir" => agent.create_directory(&path).agent_view(),
                "delete" => agent.delete(&path, true, &Precondition::Any).agent_view(),
                "move" => agent.move_path(&path, "/output/moved", &Precondition::Any, &Precondition::Any).agent_view(),
                "link-out" => {
                    let name = tokens.last().copied().unwrap_or("link");
                    if !matches!(name, "." | "..") {
                        let _ = std::os::unix::fs::symlink(world.layout.path("outside"), world.layout.path(&format!("out/{name}")));
                    }
                    String::new()
                }
                _ => {
                    let name = tokens.last().copied().unwrap_or("link");
                    if !matches!(name, "." | "..") {
                        let _ = std::os::unix::fs::symlink("..", world.layout.path(&format!("out/{name}")));
                    }
                    String::new()
                }
            };
            prop_assert!(world.check_text(&text).is_ok(), "{operation} {path}: {text}");
            prop_assert!(!text.contains(SECRET));
        }
        prop_assert_eq!(world.layout.snapshot("outside"), outside);
        prop_assert_eq!(world.layout.snapshot("logs"), logs);
    }
}

#[test]
fn a_one_letter_physical_path_round_trips() {
    for (text, physical) in [("\"A\":/src:rw", "A"), ("\"a:\":/src:rw", "a:")] {
        let spec: MountSpec = text.parse().unwrap();
        assert_eq!(spec.physical(), physical);
        let display = spec.to_string();
        assert_eq!(display.parse::<MountSpec>().map_err(|error| error.to_string()), Ok(spec), "{display}");
    }
}

/// The model itself, on cases worked by hand, so a wrong model cannot agree with a wrong parser.
#[test]
fn the_model_follows_the_rules() {
    let cases = [
        ("/", Ok("/")),
        ("/src//app/./lib/../main.rs", Ok("/src/app/main.rs")),
        ("/a/b/../../..", Ok("/")),
        ("/../a/..", Ok("/")),
        ("/a/../../b/./", Ok("/b")),
        ("/.../..../x", Ok("/.../..../x")),
        ("/a/..b/c..", Ok("/a/..b/c..")),
        ("/a\\..\\b/..", Ok("/")),
        ("/a/\u{7}", Err(ParsePathError::Control)),
        ("/a/\0", Err(ParsePathError::Nul)),
    ];
    for (input, expected) in cases {
        assert_eq!(model(input), expected.map(str::to_owned), "{input:?}");
    }
    let long = format!("/{}", "a".repeat(256));
    assert_eq!(model(&long), Err(ParsePathError::SegmentTooLong));
    assert_eq!(
        model(&format!("{long}/..")),
        Err(ParsePathError::SegmentTooLong),
        "a long name is refused even if cancelled"
    );
    assert_eq!(model(&"/a".repeat(2049)), Err(ParsePathError::TooLong));
}
