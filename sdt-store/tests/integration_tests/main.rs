//! Integration tests of the snapshot store: write runs to a temporary directory, read them
//! back through the public API.

mod chain;
mod common;
mod damage;
mod encodings;
mod errors;
mod patches;
mod props;
mod raw;
mod roundtrip;
mod safety;
