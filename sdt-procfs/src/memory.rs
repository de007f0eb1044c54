//! How much memory the system can spare: `/proc/meminfo`, `/proc/self/cgroup`, and the
//! memory controller's limit, usage and `memory.stat` files of cgroup v1 and v2.

/// A `/proc/meminfo` field in bytes (`"MemAvailable"`, `"MemTotal"`): the file gives
/// kibibytes.
pub fn parse_meminfo_bytes(meminfo: &[u8], key: &str) -> Option<u64> {
    let text = std::str::from_utf8(meminfo).ok()?;
    let value = text.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))?;
    let kib = value.trim().strip_suffix("kB")?.trim_end().parse::<u64>().ok()?;
    kib.checked_mul(1024)
}

/// Where a process sits in the memory controller's hierarchy, from its
/// `/proc/PID/cgroup`: the path of the v1 `memory` hierarchy's line (`4:memory:/a/b`),
/// else that of the v2 line (`0::/a/b`). `None` when neither is there or a path is not
/// absolute.
pub fn parse_memory_cgroup(cgroup: &[u8]) -> Option<MemoryCgroup> {
    let text = std::str::from_utf8(cgroup).ok()?;
    let mut unified = None;
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if !path.starts_with('/') {
            continue;
        }
        if controllers.split(',').any(|c| c == "memory") {
            return Some(MemoryCgroup::V1(path.to_owned()));
        }
        if controllers.is_empty() {
            unified = Some(MemoryCgroup::V2(path.to_owned()));
        }
    }
    unified
}

/// A process's cgroup as [`parse_memory_cgroup`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryCgroup {
    /// In the v1 `memory` hierarchy, at this path.
    V1(String),
    /// In the v2 hierarchy, at this path.
    V2(String),
}

/// A memory limit or usage file's number in bytes: `memory.max` and
/// `memory.limit_in_bytes` (where `max`, or v1's near-`u64::MAX` figure, is no limit:
/// `None`), `memory.current` and `memory.usage_in_bytes`.
pub fn parse_cgroup_bytes(file: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(file).ok()?.trim();
    if text == "max" {
        return None;
    }
    // Cgroup v1 writes "no limit" as the largest page multiple that fits in an i64.
    text.parse::<u64>().ok().filter(|&bytes| bytes < 1 << 62)
}

/// A number of a cgroup's `memory.stat` (`key value` lines): `inactive_file` (v2) or
/// `total_inactive_file` (v1), the page cache the kernel reclaims first.
pub fn parse_memory_stat(stat: &[u8], key: &str) -> Option<u64> {
    let text = std::str::from_utf8(stat).ok()?;
    text.lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo() {
        let meminfo =
            b"MemTotal:       24684032 kB\nMemFree:        22788012 kB\nMemAvailable:   24166500 kB\n";
        assert_eq!(parse_meminfo_bytes(meminfo, "MemAvailable"), Some(24166500 * 1024));
        assert_eq!(parse_meminfo_bytes(meminfo, "MemTotal"), Some(24684032 * 1024));
        assert_eq!(parse_meminfo_bytes(meminfo, "Mem"), None);
        assert_eq!(parse_meminfo_bytes(b"MemAvailable: 12\n", "MemAvailable"), None);
        assert_eq!(parse_meminfo_bytes(b"MemAvailable: 99999999999999999999 kB\n", "MemAvailable"), None);
        assert_eq!(parse_meminfo_bytes(b"\xff", "MemAvailable"), None);
    }

    #[test]
    fn memory_cgroup() {
        let hybrid = b"12:pids:/user.slice\n4:memory:/sdttest\n0::/user.slice/session-1.scope\n";
        assert_eq!(parse_memory_cgroup(hybrid), Some(MemoryCgroup::V1("/sdttest".into())));
        let v2 = b"0::/system.slice/sdt.service\n";
        assert_eq!(parse_memory_cgroup(v2), Some(MemoryCgroup::V2("/system.slice/sdt.service".into())));
        assert_eq!(parse_memory_cgroup(b"3:cpu,memory:/a:b\n"), Some(MemoryCgroup::V1("/a:b".into())));
        assert_eq!(parse_memory_cgroup(b"2:cpu:/\n"), None);
        assert_eq!(parse_memory_cgroup(b"0::relative\n"), None);
        assert_eq!(parse_memory_cgroup(b"garbage"), None);
    }

    #[test]
    fn cgroup_bytes() {
        assert_eq!(parse_cgroup_bytes(b"1572864000\n"), Some(1572864000));
        assert_eq!(parse_cgroup_bytes(b"max\n"), None);
        assert_eq!(parse_cgroup_bytes(b"9223372036854771712\n"), None);
        assert_eq!(parse_cgroup_bytes(b"-1"), None);
        assert_eq!(parse_cgroup_bytes(b""), None);
    }

    #[test]
    fn memory_stat() {
        let stat = b"cache 4096\ninactive_file 8192\ntotal_inactive_file 12288\n";
        assert_eq!(parse_memory_stat(stat, "inactive_file"), Some(8192));
        assert_eq!(parse_memory_stat(stat, "total_inactive_file"), Some(12288));
        assert_eq!(parse_memory_stat(stat, "inactive"), None);
        assert_eq!(parse_memory_stat(b"inactive_file x\n", "inactive_file"), None);
    }
}
