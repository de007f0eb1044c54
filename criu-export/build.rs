//! Compiles `proto/*.proto` (our subset of CRIU's image schema) into Rust with prost.
//! protox parses the files in Rust, so no `protoc` is needed to build.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from("proto");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir)?.map(|entry| entry.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "proto"));
    files.sort();
    println!("cargo:rerun-if-changed=proto");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let descriptors = protox::compile(&files, [&dir])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
