//! The human `bp` CLI: thin entry point over the library.
fn main() {}
