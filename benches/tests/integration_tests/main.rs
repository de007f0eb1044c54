//! The benchmarks' own tests: the paper-evaluation workloads' self-checks, under SDT and
//! without, and `bench-paper`'s handling of missing PARSEC and SPLASH-2 sources.

mod paper;
