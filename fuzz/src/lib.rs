//! Shared parts of the fuzz targets (`fuzz_targets/`): the structure-aware store case
//! that the `store` target draws, and that tests replay.

pub mod store_case;
