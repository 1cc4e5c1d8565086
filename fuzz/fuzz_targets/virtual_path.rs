//! `VirtualPath` parse and display: `new` agrees with `from_str`, the canonical text re-parses
//! to itself, and it never holds `.`, `..` or empty segments.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vfs::VirtualPath;

fuzz_target!(|input: &str| {
    let parsed = VirtualPath::new(input);
    assert_eq!(parsed, input.parse::<VirtualPath>());
    if let Ok(path) = parsed {
        assert!(path.as_str().starts_with('/'));
        assert!(path.components().all(|segment| !segment.is_empty() && segment != "." && segment != ".."));
        assert_eq!(VirtualPath::new(&path.to_string()).as_ref(), Ok(&path));
    }
});
