//! The `browser-pilot-conformance` executable: the black-box stdio runner.
fn main() {}
