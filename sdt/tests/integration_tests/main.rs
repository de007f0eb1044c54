//! End-to-end tests of `sdt`: real multithreaded C programs under `sdt run`, real ptrace,
//! real gdb reading the cores. Build first: `cargo build --release` (scripts/test does),
//! so that libsdt.a sits beside the `sdt` binary.
//!
//! Each module lists its tests in `sdt_test_harness::tests!`, and `main!` below lists the
//! modules: a test that needs what this machine lacks (root, QEMU, a tool) is reported
//! ignored with the reason, never ok.

// A test function or module left out of those lists is dead code: a compile error.
#![deny(dead_code)]

mod harness;

mod attach;
mod background;
mod behaviour;
mod capture;
mod compare;
mod credentials;
mod criu_export;
mod damage;
mod diff;
mod errors;
mod faults;
mod gdb;
mod guest;
mod install;
mod kmod;
mod mpi;
mod mpi_analysis;
mod mpi_jobs;
mod mpi_replay;
mod readme;
mod removal;
mod restore;
mod sanitizers;
mod seccomp;
mod security;
mod symbols;
mod tracking;

sdt_test_harness::main!(
    attach,
    background,
    behaviour,
    capture,
    compare,
    credentials,
    criu_export,
    damage,
    diff,
    errors,
    faults,
    gdb,
    guest,
    install,
    kmod,
    mpi_analysis,
    mpi_jobs,
    mpi_replay,
    mpi,
    readme,
    removal,
    restore,
    sanitizers,
    seccomp,
    security,
    symbols,
    tracking
);
