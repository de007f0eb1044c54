//! Whether the machine has CPU time to spare: the compactor's cue to work while the
//! program runs. A low-priority thread alone is not enough: run in the short gaps of a
//! program whose threads wait on each other (barriers, locks), it takes the memory
//! bandwidth and caches they come back to.

use std::time::Duration;

/// Ticks of `/proc/stat` (`USER_HZ`, 100 on every Linux the kernel ABI allows).
const TICK_NS: u64 = 10_000_000;

/// CPU time left idle on the machine between two looks.
pub(crate) struct IdleMeter {
    /// At the last look: monotonic ns, idle ns of every CPU.
    last: Option<(u64, u64)>,
}

impl IdleMeter {
    pub(crate) fn new() -> IdleMeter {
        IdleMeter { last: look() }
    }

    /// CPUs' worth of time left idle since the last look; `None` without `/proc/stat`.
    /// (sdt's own work is not idle time: after compacting, the compactor looks again
    /// over a window it left alone.)
    pub(crate) fn spare_cpus(&mut self) -> Option<f64> {
        let (then, idle_then) = self.last?;
        let now = look();
        self.last = now;
        let (now, idle_now) = now?;
        let wall = now.saturating_sub(then).max(1);
        Some(idle_now.saturating_sub(idle_then) as f64 / wall as f64)
    }
}

/// How long the compactor watches the machine before deciding again.
pub(crate) const WINDOW: Duration = Duration::from_millis(100);

/// Now (monotonic ns), and the time every CPU has been idle (ns), from `/proc/stat`.
fn look() -> Option<(u64, u64)> {
    let stat = std::fs::read("/proc/stat").ok()?;
    Some((sdt_sys::monotonic_ns(), sdt_procfs::parse_cpu_idle_ticks(&stat)? * TICK_NS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_reads_this_machine() {
        let mut meter = IdleMeter::new();
        std::thread::sleep(Duration::from_millis(30));
        let spare = meter.spare_cpus().expect("/proc/stat");
        let cpus = std::thread::available_parallelism().unwrap().get() as f64;
        assert!((0.0..=cpus + 0.5).contains(&spare), "{spare}");
    }
}
