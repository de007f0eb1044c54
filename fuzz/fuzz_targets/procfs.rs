//! Any bytes as every `/proc` file `sdt-procfs` parses (`sdt_fuzz::procfs_case`): never
//! panics, and what parses re-renders, as the kernel writes it, to text that parses the
//! same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| sdt_fuzz::procfs_case::run(bytes));
