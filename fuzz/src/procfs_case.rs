//! Any bytes as every `/proc` file `sdt-procfs` parses: see [`run`].

use sdt_procfs::Stat;
use sdt_store::{Credentials, Mapping, SeccompMode};

/// Gives `bytes` to each parser of `sdt-procfs`, panicking if one panics, or if what one
/// parsed, written again as the kernel writes it, parses to something else (a maps line,
/// the credential lines of `status`, a command line).
pub fn run(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        for mapping in sdt_procfs::parse_maps(text) {
            assert_eq!(sdt_procfs::parse_maps_line(&maps_line(&mapping)), Some(mapping));
        }
    }
    if let Some(creds) = sdt_procfs::parse_credentials(bytes) {
        assert_eq!(sdt_procfs::parse_credentials(&status(&creds)), Some(creds));
    }
    let _ = sdt_procfs::parse_real_ids(bytes);
    let _ = sdt_procfs::parse_ns_tid(bytes);
    let _ = sdt_procfs::parse_signal_sets(bytes);
    let _ = sdt_procfs::parse_fdinfo(bytes);
    if let Some(stat) = Stat::parse(bytes) {
        let _ = (stat.state(), stat.ids(), stat.memory_layout(), stat.is_exiting(), stat.is_kernel_thread());
        for n in 0..64 {
            let _ = stat.field(n);
        }
    }
    let _ = sdt_procfs::parse_statm_resident(bytes);
    let _ = sdt_procfs::parse_cpu_idle_ticks(bytes);
    let _ = sdt_procfs::parse_flocks(bytes);
    let _ = sdt_procfs::parse_meminfo_bytes(bytes, "MemAvailable");
    let _ = sdt_procfs::parse_memory_cgroup(bytes);
    let _ = sdt_procfs::parse_cgroup_bytes(bytes);
    let _ = sdt_procfs::parse_memory_stat(bytes, "inactive_file");
    let args = sdt_procfs::parse_cmdline(bytes);
    let raw: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    assert_eq!(sdt_procfs::parse_cmdline(&raw), args);
}

/// `m` as a line of `/proc/PID/maps`.
fn maps_line(m: &Mapping) -> String {
    format!("{:x}-{:x} {} {:08x} {} {} {}", m.start, m.end, m.perms, m.offset, m.dev, m.inode, m.path)
}

/// The credential lines of a `status` file that gives `c`.
fn status(c: &Credentials) -> Vec<u8> {
    let ids = |ids: [u32; 4]| ids.map(|i| i.to_string()).join("\t");
    let groups: String = c.groups.iter().map(|g| format!("{g} ")).collect();
    let seccomp = match c.seccomp {
        SeccompMode::Disabled => 0,
        SeccompMode::Strict => 1,
        SeccompMode::Filter => 2,
    };
    format!(
        "Uid:\t{}\nGid:\t{}\nGroups:\t{groups}\nCapInh:\t{:016x}\nCapPrm:\t{:016x}\nCapEff:\t{:016x}\n\
         CapBnd:\t{:016x}\nCapAmb:\t{:016x}\nNoNewPrivs:\t{}\nSeccomp:\t{seccomp}\n",
        ids(c.uids.as_array()),
        ids(c.gids.as_array()),
        c.caps.inheritable,
        c.caps.permitted,
        c.caps.effective,
        c.caps.bounding,
        c.caps.ambient,
        u8::from(c.no_new_privs),
    )
    .into_bytes()
}
