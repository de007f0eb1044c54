//! The exporter checked by CRIU's own image tool: `crit` decodes every image of the unit
//! tests' sample snapshot and encodes it back to the same bytes. (Real snapshots, and
//! `criu restore` in the QEMU guest, are the CLI's integration tests.)
//!
//! Each module lists its tests in `sdt_test_harness::tests!`, and `main!` below lists the
//! modules: a test that needs what this machine lacks (crit) is reported ignored with the
//! reason, never ok.

// A test function or module left out of those lists is dead code: a compile error.
#![deny(dead_code)]

mod crit;

/// The unit tests' sample snapshot, of which these tests use a part.
#[allow(dead_code)]
#[path = "../../src/fake.rs"]
mod fake;

sdt_test_harness::main!(crit);
