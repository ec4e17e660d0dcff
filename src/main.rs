//! The `browser-pilot` executable: thin entry point over the library.
fn main() {}
