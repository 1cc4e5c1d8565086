//! The `vfs` binary (in progress).
fn main() {}
