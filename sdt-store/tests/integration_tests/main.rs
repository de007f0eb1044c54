//! Integration tests of the snapshot store: write runs to a temporary directory, read them
//! back through the public API.
//!
//! Each module lists its tests in `sdt_test_harness::tests!`, and `main!` below lists the
//! modules: a test that needs what this machine lacks (root, QEMU, a tool) is reported
//! ignored with the reason, never ok.

// A test function or module left out of those lists is dead code: a compile error.
#![deny(dead_code)]

mod chain;
mod common;
mod damage;
mod encodings;
mod errors;
mod jobs;
mod kept;
mod patches;
mod props;
mod raw;
mod removal;
mod roundtrip;
mod safety;

sdt_test_harness::main!(
    chain, damage, encodings, errors, jobs, kept, patches, props, raw, removal, roundtrip, safety
);
