//! How far the capture buffer may grow: as far as the memory the machine, and sdt's
//! cgroup, can spare. A larger capture goes through it a window at a time, each written
//! to the raw file at once (see [`sdt_store::SpillFile::write_through`]), slower, so that
//! a program too large for a second copy of itself in memory is captured rather than
//! killed by the kernel for want of memory (the killer picks the largest process: the
//! program).

use std::path::{Path, PathBuf};

use sdt_procfs::MemoryCgroup;

/// Memory left to the program, and everything else, however large the buffer grows.
const RESERVE: u64 = 256 << 20;

/// The most the capture buffer may hold when it holds `held` bytes now: those, and what
/// [`MemoryRoom::for_captures`] allows more; unbounded when that cannot be read.
pub(crate) fn buffer_limit(held: usize) -> usize {
    match MemoryRoom::now().for_captures() {
        Some(more) => held.saturating_add(usize::try_from(more).unwrap_or(usize::MAX)),
        None => usize::MAX,
    }
}

/// The memory this process may still take, as the machine and its cgroups limit it.
#[derive(Clone, Copy, Debug)]
pub struct MemoryRoom {
    /// The machine's `MemAvailable`.
    pub available: Option<u64>,
    /// For sdt's cgroup and each one above it, the memory limit less what the cgroup
    /// uses (its inactive page cache aside, which the kernel reclaims first): the least;
    /// `None` without a limit.
    pub cgroup: Option<u64>,
}

impl MemoryRoom {
    /// The room now.
    pub fn now() -> MemoryRoom {
        let available = read(Path::new("/proc/meminfo"))
            .and_then(|meminfo| sdt_procfs::parse_meminfo_bytes(&meminfo, "MemAvailable"));
        MemoryRoom { available, cgroup: cgroup_headroom() }
    }

    /// Bytes a capture may copy into memory more than it has: the least room, less the
    /// 256 MiB kept for the program; `None` when neither can be read.
    pub fn for_captures(&self) -> Option<u64> {
        Some(self.available.into_iter().chain(self.cgroup).min()?.saturating_sub(RESERVE))
    }
}

/// The least headroom of the limits from this process's memory cgroup up to the root of
/// the hierarchy (mounted where systemd mounts it); `None` without a limit.
fn cgroup_headroom() -> Option<u64> {
    let (root, path, files) = match sdt_procfs::parse_memory_cgroup(&read(Path::new("/proc/self/cgroup"))?)? {
        MemoryCgroup::V1(path) => ("/sys/fs/cgroup/memory", path, V1),
        MemoryCgroup::V2(path) => ("/sys/fs/cgroup", path, V2),
    };
    let root = PathBuf::from(root);
    let mut dir = root.join(path.trim_start_matches('/'));
    let mut least: Option<u64> = None;
    loop {
        if let Some(free) = files.headroom(&dir) {
            least = Some(least.map_or(free, |l| l.min(free)));
        }
        if dir == root || !dir.pop() || !dir.starts_with(&root) {
            return least;
        }
    }
}

/// The names of a cgroup's memory files in one version of the hierarchy.
#[derive(Clone, Copy)]
struct MemoryFiles {
    limit: &'static str,
    usage: &'static str,
    /// The `memory.stat` line of the page cache not used lately.
    inactive_file: &'static str,
}

const V1: MemoryFiles = MemoryFiles {
    limit: "memory.limit_in_bytes",
    usage: "memory.usage_in_bytes",
    inactive_file: "total_inactive_file",
};
const V2: MemoryFiles =
    MemoryFiles { limit: "memory.max", usage: "memory.current", inactive_file: "inactive_file" };

impl MemoryFiles {
    /// What the cgroup at `dir` may still take, when it has a limit.
    fn headroom(&self, dir: &Path) -> Option<u64> {
        let limit = sdt_procfs::parse_cgroup_bytes(&read(&dir.join(self.limit))?)?;
        let used =
            read(&dir.join(self.usage)).and_then(|u| sdt_procfs::parse_cgroup_bytes(&u)).unwrap_or(limit);
        let reclaimable = read(&dir.join("memory.stat"))
            .and_then(|stat| sdt_procfs::parse_memory_stat(&stat, self.inactive_file))
            .unwrap_or(0);
        Some(limit.saturating_sub(used.saturating_sub(reclaimable)))
    }
}

fn read(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}
