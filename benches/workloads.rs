//! Building the benchmarks' C workloads (`workloads/*.c`) against the release libsdt.

// Each benchmark uses some of these.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

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
    build_with("gcc", source, out, name, extra)
}

/// [`build`] with another C compiler (`mpicc`).
pub fn build_with(cc: &str, source: &str, out: &Path, name: &str, extra: &[&str]) -> PathBuf {
    // Built under a name of its own and renamed into place: two tests building the same
    // program never run a half-written one.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let exe = out.join(name);
    let tmp = out.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let status = Command::new(cc)
        .args(["-O2", "-g", "-pthread"])
        .args(extra)
        .arg(workspace().join("benches/workloads").join(format!("{source}.c")))
        .arg("-I")
        .arg(workspace().join("sdt-lib/include"))
        .arg(release().join("libsdt.a"))
        .args(["-ldl", "-lm", "-o"])
        .arg(&tmp)
        .status()
        .unwrap_or_else(|e| panic!("running {cc}: {e}"));
    assert!(status.success(), "building workloads/{source}.c failed");
    std::fs::rename(&tmp, &exe).expect("moving the built program into place");
    exe
}

/// `heap` (built from `workloads/heap.c`) started with `threads` threads over `heap_mb`
/// MiB, once its heap is filled and its threads wait: a process to dump until SIGTERM.
pub fn start_waiting_heap(exe: &Path, threads: u32, heap_mb: u32) -> Child {
    let mut child = Command::new(exe)
        .args([threads.to_string(), heap_mb.to_string(), "0".into(), "0".into()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("workload");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    child
}

/// Seconds gdb's `gcore` takes to dump process `pid` into `dir`, and the core's size
/// (the core is removed).
pub fn gcore(dir: &Path, pid: u32) -> (f64, u64) {
    let prefix = dir.join("gcore");
    let start = Instant::now();
    let out = Command::new("gcore").arg("-o").arg(&prefix).arg(pid.to_string()).output().expect("gcore");
    let secs = start.elapsed().as_secs_f64();
    assert!(out.status.success(), "gcore failed: {}", String::from_utf8_lossy(&out.stderr));
    let core = PathBuf::from(format!("{}.{pid}", prefix.display()));
    let size = std::fs::metadata(&core).map(|m| m.len()).unwrap_or(0);
    std::fs::remove_file(&core).ok();
    (secs, size)
}
