//! The memory of a running process, sampled, shared by the benchmarks.

// Each benchmark uses some of these.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The highest memory figures of a process seen while it ran, in KiB.
#[derive(Default, Clone, Copy)]
pub struct Peak {
    /// `VmHWM`: resident high-water mark, the store's mapped spare files included.
    pub hwm_kib: u64,
    /// The largest `RssAnon`: the process's own anonymous memory.
    pub anon_kib: u64,
}

/// Reads /proc/PID/status every `every` until `stop` is set.
pub fn sample_memory(pid: u32, every: Duration, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Peak> {
    std::thread::spawn(move || {
        let mut peak = Peak::default();
        let path = format!("/proc/{pid}/status");
        while !stop.load(Ordering::Relaxed) {
            // A process that has exited has no Vm lines left: the last reading stands.
            if let Ok(status) = std::fs::read_to_string(&path) {
                for line in status.lines() {
                    let kib =
                        || line.split_whitespace().nth(1).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
                    if line.starts_with("VmHWM:") {
                        peak.hwm_kib = peak.hwm_kib.max(kib());
                    } else if line.starts_with("RssAnon:") {
                        peak.anon_kib = peak.anon_kib.max(kib());
                    }
                }
            }
            std::thread::sleep(every);
        }
        peak
    })
}
