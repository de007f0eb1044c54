//! The seeds of the `store` and `procfs` targets (`fuzz/seeds/<target>/`), replayed as
//! the fuzzer reads them: the cases they describe hold, without cargo-fuzz, in every test
//! run.

use arbitrary::{Arbitrary, Unstructured};
use sdt_fuzz::store_case::{self, Case};

/// The seeds of `target`, by name.
fn seeds(target: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target);
    let mut seeds: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    seeds.sort();
    assert!(!seeds.is_empty(), "no seeds in {dir:?}");
    seeds
}

#[test]
fn procfs_seeds_hold() {
    for seed in seeds("procfs") {
        sdt_fuzz::procfs_case::run(&std::fs::read(&seed).unwrap());
    }
}

#[test]
fn store_seeds_hold() {
    for seed in seeds("store") {
        let bytes = std::fs::read(&seed).unwrap();
        // As `fuzz_target!` draws a typed input.
        let case = Case::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
        store_case::run(&case);
    }
}
