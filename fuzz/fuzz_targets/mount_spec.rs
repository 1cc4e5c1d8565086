//! The mount-string grammar: any string that parses round-trips through `Display`, and every
//! refusal is one line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vfs::MountSpec;

fuzz_target!(|input: &str| {
    match input.parse::<MountSpec>() {
        Ok(spec) => {
            let display = spec.to_string();
            assert_eq!(display.parse::<MountSpec>().as_ref(), Ok(&spec), "{display}");
        }
        Err(error) => assert!(!error.to_string().contains('\n')),
    }
});
