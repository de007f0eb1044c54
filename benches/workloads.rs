//! Building the benchmarks' C workloads (`workloads/*.c`) against the release libsdt.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// `target/release`, checked to hold `sdt` and `libsdt.a`.
pub fn release() -> PathBuf {
    let release = workspace().join("target/release");
    assert!(
        release.join("libsdt.a").exists() && release.join("sdt").exists(),
        "build first: cargo build --release (scripts/bench does)"
    );
    release
}

/// Compiles `workloads/<source>.c` with `extra` flags into `out/<name>`.
pub fn build(source: &str, out: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let exe = out.join(name);
    let status = Command::new("gcc")
        .args(["-O2", "-g", "-pthread"])
        .args(extra)
        .arg(workspace().join("benches/workloads").join(format!("{source}.c")))
        .arg("-I")
        .arg(workspace().join("sdt-lib/include"))
        .arg(release().join("libsdt.a"))
        .args(["-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .expect("running gcc");
    assert!(status.success(), "building workloads/{source}.c failed");
    exe
}
