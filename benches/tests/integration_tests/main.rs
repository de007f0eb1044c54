//! The benchmarks' own tests: the large-footprint workloads' checks, the paper-evaluation
//! workloads' self-checks under SDT and without, and `bench-paper`'s handling of missing
//! PARSEC and SPLASH-2 sources.

mod large;
mod paper;

#[path = "../../workloads.rs"]
mod workloads;
