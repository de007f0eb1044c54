//! End-to-end tests of `sdt`: real multithreaded C programs under `sdt run`, real ptrace,
//! real gdb reading the cores. Build first: `cargo build --release` (scripts/test does),
//! so that libsdt.a sits beside the `sdt` binary.

mod harness;

mod background;
mod behaviour;
mod capture;
mod credentials;
mod criu_export;
mod damage;
mod errors;
mod faults;
mod gdb;
mod guest;
mod kmod;
mod restore;
mod security;
mod symbols;
mod tracking;
