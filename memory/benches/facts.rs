//! Facts bench (filled in later).
fn main() {}
