//! Shared parts of the fuzz targets (`fuzz_targets/`), which tests replay: the
//! structure-aware store case that the `store` target draws, and the `procfs` target's
//! checks.

pub mod procfs_case;
pub mod store_case;
