//! Files of `Key:\tvalue` lines: `/proc/PID/status` (credentials, ids, signal sets),
//! `/proc/PID/fdinfo/N` and `/proc/PID/timers`; and the table of `/proc/PID/limits`.

use sdt_store::{Capabilities, Credentials, Ids, PosixTimer, RLIM_INFINITY, ResourceLimit, SeccompMode};

/// The value of the first line of `file` that starts with `key` (`"Uid:"`) and is UTF-8
/// after it, untrimmed. Other lines, a thread's name that is not UTF-8 among them, are
/// passed over.
fn field<'a>(file: &'a [u8], key: &str) -> Option<&'a str> {
    file.split(|&b| b == b'\n').find_map(|line| std::str::from_utf8(line.strip_prefix(key.as_bytes())?).ok())
}

/// A 64-bit mask in hexadecimal, as `status` writes `CapEff:` or `SigCgt:`: at most 16
/// digits.
fn mask(file: &[u8], key: &str) -> Option<u64> {
    let hex = field(file, key)?.trim();
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Parses the credential lines of a `/proc/PID/status` file. `None` if one that every
/// supported kernel writes (`Uid:`, `Gid:`, `Groups:`, `CapInh:`, `CapPrm:`,
/// `CapEff:`, `CapBnd:`) is missing or does not parse; the younger ones (`CapAmb:`,
/// `NoNewPrivs:`, `Seccomp:`) read as 0 when absent. Other lines, and bytes that are
/// not UTF-8 in them (a thread's name), are ignored.
pub fn parse_credentials(status: &[u8]) -> Option<Credentials> {
    let ids = |key: &str| -> Option<Ids> {
        let mut values = field(status, key)?.split_whitespace().map(|v| v.parse::<u32>());
        let mut next = || values.next()?.ok();
        let ids = Ids { real: next()?, effective: next()?, saved: next()?, fs: next()? };
        values.next().is_none().then_some(ids)
    };
    let number = |key: &str| -> Option<Option<u32>> {
        match field(status, key) {
            None => Some(None),
            Some(v) => v.trim().parse().ok().map(Some),
        }
    };
    let groups =
        field(status, "Groups:")?.split_whitespace().map(|g| g.parse().ok()).collect::<Option<Vec<u32>>>()?;
    let seccomp = parse_seccomp(status)?;
    let no_new_privs = match number("NoNewPrivs:")?.unwrap_or(0) {
        0 => false,
        1 => true,
        _ => return None,
    };
    let ambient = match field(status, "CapAmb:") {
        None => 0,
        Some(_) => mask(status, "CapAmb:")?,
    };
    Some(Credentials {
        uids: ids("Uid:")?,
        gids: ids("Gid:")?,
        groups,
        caps: Capabilities {
            inheritable: mask(status, "CapInh:")?,
            permitted: mask(status, "CapPrm:")?,
            effective: mask(status, "CapEff:")?,
            bounding: mask(status, "CapBnd:")?,
            ambient,
        },
        no_new_privs,
        seccomp,
    })
}

/// The seccomp mode of a `status` file's thread (`Seccomp:`; disabled where the kernel
/// is too old to write the line). `None` if the line does not parse.
pub fn parse_seccomp(status: &[u8]) -> Option<SeccompMode> {
    let Some(value) = field(status, "Seccomp:") else { return Some(SeccompMode::Disabled) };
    match value.trim().parse::<u32>().ok()? {
        0 => Some(SeccompMode::Disabled),
        1 => Some(SeccompMode::Strict),
        2 => Some(SeccompMode::Filter),
        _ => None,
    }
}

/// The real user and group ids of a `status` file (the first numbers of its `Uid:` and
/// `Gid:` lines), each 0 where its line is missing or does not parse.
pub fn parse_real_ids(status: &[u8]) -> (u32, u32) {
    let real = |key: &str| field(status, key).and_then(|v| v.split_whitespace().next()?.parse().ok());
    (real("Uid:").unwrap_or(0), real("Gid:").unwrap_or(0))
}

/// A `personality` file's value (hexadecimal).
pub fn parse_personality(text: &[u8]) -> Option<u32> {
    u32::from_str_radix(std::str::from_utf8(text).ok()?.trim(), 16).ok()
}

/// The file mode creation mask of a `status` file (`Umask:`, octal).
pub fn parse_umask(status: &[u8]) -> Option<u32> {
    u32::from_str_radix(field(status, "Umask:")?.trim(), 8).ok()
}

/// The id of a thread in its own (innermost) pid namespace: the last entry of the
/// `NSpid:` line of its `status`.
pub fn parse_ns_tid(status: &[u8]) -> Option<i32> {
    field(status, "NSpid:")?.split_whitespace().last()?.parse().ok()
}

/// The process a thread belongs to (`Tgid:`): its own id for a process's main thread.
pub fn parse_tgid(status: &[u8]) -> Option<i32> {
    field(status, "Tgid:")?.trim().parse().ok()
}

/// The process tracing this one (`TracerPid:`), `None` where none does or the line is
/// missing.
pub fn parse_tracer_pid(status: &[u8]) -> Option<i32> {
    field(status, "TracerPid:")?.trim().parse().ok().filter(|&pid| pid != 0)
}

/// The caught and the ignored signals (`SigCgt:`, `SigIgn:` of a `status` file), bit
/// `n-1` for signal `n`; a set whose line is missing or does not parse is empty.
pub fn parse_signal_sets(status: &[u8]) -> (u64, u64) {
    (mask(status, "SigCgt:").unwrap_or(0), mask(status, "SigIgn:").unwrap_or(0))
}

/// `pos` (decimal) and `flags` (octal) of an `fdinfo` file, each 0 where its line is
/// missing or does not parse.
pub fn parse_fdinfo(info: &[u8]) -> (u64, u32) {
    let value = |key: &str| field(info, key).map(str::trim);
    let pos = value("pos:").and_then(|v| v.parse().ok()).unwrap_or(0);
    let flags = value("flags:").and_then(|v| u32::from_str_radix(v, 8).ok()).unwrap_or(0);
    (pos, flags)
}

/// The mount and inode (`mnt_id:`, `ino:`) of an `fdinfo` file's open file, which tell
/// whether a descriptor still refers to the file it did; `None` if either is missing.
pub fn parse_fdinfo_identity(info: &[u8]) -> Option<(u64, u64)> {
    let value = |key: &str| field(info, key)?.trim().parse().ok();
    Some((value("mnt_id:")?, value("ino:")?))
}

/// An eventfd's counter, whether it is a semaphore and its id, from its `fdinfo`
/// (`eventfd-count:` in hexadecimal; `eventfd-semaphore:` and `eventfd-id:`, which tell
/// descriptors of one eventfd from another's, where the kernel writes them, Linux 6.6).
/// `None` if the count is missing.
pub fn parse_eventfd(info: &[u8]) -> Option<(u64, bool, Option<u32>)> {
    let count = u64::from_str_radix(field(info, "eventfd-count:")?.trim(), 16).ok()?;
    let semaphore = field(info, "eventfd-semaphore:").is_some_and(|v| v.trim() == "1");
    let id = field(info, "eventfd-id:").and_then(|v| v.trim().parse().ok());
    Some((count, semaphore, id))
}

/// The watches of an epoll instance's `fdinfo`: for each `tfd:` line, the watched
/// descriptor, its events, its data and the inode of the file registered (all but the
/// descriptor in hexadecimal). `None` if a `tfd:` line does not parse.
pub fn parse_epoll(info: &[u8]) -> Option<Vec<(i32, u32, u64, u64)>> {
    let text = std::str::from_utf8(info).ok()?;
    let hex = |v: &str| u64::from_str_radix(v, 16).ok();
    text.lines()
        .filter(|line| line.starts_with("tfd:"))
        .map(|line| {
            let mut words = line.split_whitespace();
            let mut after = |key: &str| {
                words.find(|w| w.starts_with(key)).and_then(|w| match w.strip_prefix(key) {
                    Some("") => words.next(),
                    rest => rest,
                })
            };
            let fd = after("tfd:")?.parse().ok()?;
            let events = u32::try_from(hex(after("events:")?)?).ok()?;
            let data = hex(after("data:")?)?;
            let ino = hex(after("ino:")?)?;
            Some((fd, events, data, ino))
        })
        .collect()
}

/// A timerfd's clock, pending expirations, and the nanoseconds to its next expiration and
/// between two, from its `fdinfo` (`it_value: (S, NS)`). `None` if a line is missing.
pub fn parse_timerfd(info: &[u8]) -> Option<(i32, u64, u64, u64)> {
    let pair = |key: &str| -> Option<u64> {
        let (secs, nanos) = field(info, key)?.trim().strip_prefix('(')?.strip_suffix(')')?.split_once(',')?;
        secs.trim().parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(nanos.trim().parse().ok()?)
    };
    let clockid = field(info, "clockid:")?.trim().parse().ok()?;
    let ticks = field(info, "ticks:")?.trim().parse().ok()?;
    Some((clockid, ticks, pair("it_value:")?, pair("it_interval:")?))
}

/// A signalfd's mask (`sigmask:`), bit `n-1` for signal `n`.
pub fn parse_signalfd(info: &[u8]) -> Option<u64> {
    mask(info, "sigmask:")
}

/// The POSIX timers of `/proc/PID/timers` (`ID:`, `signal: N/…`, `notify:`, `ClockID:`
/// lines, one group per timer). A group missing a line or not parsing is left out.
pub fn parse_timers(timers: &[u8]) -> Vec<PosixTimer> {
    let text = String::from_utf8_lossy(timers);
    let mut out = Vec::new();
    let mut group: Vec<&str> = Vec::new();
    let mut flush = |group: &mut Vec<&str>| {
        let value = |key: &str| group.iter().find_map(|l| l.strip_prefix(key)).map(str::trim);
        let timer = || -> Option<PosixTimer> {
            Some(PosixTimer {
                id: value("ID:")?.parse().ok()?,
                signo: value("signal:")?.split('/').next()?.parse().ok()?,
                notify: value("notify:")?.to_owned(),
                clock: value("ClockID:")?.parse().ok()?,
            })
        };
        out.extend(timer());
        group.clear();
    };
    for line in text.lines() {
        if line.starts_with("ID:") && !group.is_empty() {
            flush(&mut group);
        }
        group.push(line);
    }
    flush(&mut group);
    out
}

/// The names `/proc/PID/limits` gives the resources, in `RLIMIT_*` order.
const LIMIT_NAMES: [&str; 16] = [
    "Max cpu time",
    "Max file size",
    "Max data size",
    "Max stack size",
    "Max core file size",
    "Max resident set",
    "Max processes",
    "Max open files",
    "Max locked memory",
    "Max address space",
    "Max file locks",
    "Max pending signals",
    "Max msgqueue size",
    "Max nice priority",
    "Max realtime priority",
    "Max realtime timeout",
];

/// The resource limits of `/proc/PID/limits` (a heading, then `Max … SOFT HARD UNITS`
/// rows; `unlimited` for no limit), in `RLIMIT_*` order. A row that does not parse is
/// left out.
pub fn parse_limits(limits: &[u8]) -> Vec<ResourceLimit> {
    let text = String::from_utf8_lossy(limits);
    let value = |v: &str| match v {
        "unlimited" => Some(RLIM_INFINITY),
        n => n.parse().ok(),
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((resource, rest)) =
            LIMIT_NAMES.iter().enumerate().find_map(|(i, name)| Some((i as u32, line.strip_prefix(name)?)))
        else {
            continue;
        };
        let mut values = rest.split_whitespace();
        if let (Some(soft), Some(hard)) = (values.next().and_then(value), values.next().and_then(value)) {
            out.push(ResourceLimit { resource, soft, hard });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use sdt_store::ALL_CAPS;

    use super::*;

    /// The credential lines of a thread of uid 1001 with two supplementary groups and
    /// one capability, among lines it ignores (a name that is not UTF-8 included).
    const STATUS: &[u8] = b"Name:\tw\xffrker\n\
        Umask:\t0027\n\
        State:\tS (sleeping)\n\
        Uid:\t1001\t1001\t1001\t1001\n\
        Gid:\t1001\t1001\t1001\t1001\n\
        FDSize:\t64\n\
        Groups:\t27 1002 \n\
        NSpid:\t4242\t7\n\
        SigIgn:\t0000000000001000\n\
        SigCgt:\t0000000000004a02\n\
        CapInh:\t0000000000000000\n\
        CapPrm:\t0000000000000400\n\
        CapEff:\t0000000000000400\n\
        CapBnd:\t000001ffffffffff\n\
        CapAmb:\t0000000000000400\n\
        NoNewPrivs:\t1\n\
        Seccomp:\t0\n\
        Seccomp_filters:\t0\n";

    #[test]
    fn a_personality_is_hexadecimal() {
        assert_eq!(parse_personality(b"00040000\n"), Some(0x40000));
        assert_eq!(parse_personality(b"nope\n"), None);
    }

    #[test]
    fn the_umask_is_octal() {
        assert_eq!(parse_umask(STATUS), Some(0o027));
        assert_eq!(parse_umask(b"Name:\tx\n"), None);
        assert_eq!(parse_umask(b"Umask:\t0089\n"), None);
    }

    #[test]
    fn a_full_status() {
        let c = parse_credentials(STATUS).unwrap();
        assert_eq!(c.uids, Ids::all(1001));
        assert_eq!(c.gids, Ids::all(1001));
        assert_eq!(c.groups, [27, 1002]);
        let net_bind_service = 1 << 10;
        assert_eq!(
            c.caps,
            Capabilities {
                inheritable: 0,
                permitted: net_bind_service,
                effective: net_bind_service,
                bounding: ALL_CAPS,
                ambient: net_bind_service,
            }
        );
        assert!(c.no_new_privs);
        assert_eq!(c.seccomp, SeccompMode::Disabled);
        assert_eq!(parse_real_ids(STATUS), (1001, 1001));
        assert_eq!(parse_ns_tid(STATUS), Some(7));
        assert_eq!(parse_tracer_pid(STATUS), None);
        assert_eq!(parse_tgid(b"Name:\tx\nTgid:\t4242\nPid:\t4250\n"), Some(4242));
        assert_eq!(parse_tgid(b"Pid:\t4250\n"), None);
        assert_eq!(parse_tracer_pid(b"Name:\tx\nTracerPid:\t4242\n"), Some(4242));
        assert_eq!(parse_signal_sets(STATUS), (0x4a02, 0x1000));
    }

    #[test]
    fn ids_in_their_order_and_spaces_around_values() {
        let status = b"Uid:  0 1001\t 2 3 \nGid:\t5\t6\t7\t8\nGroups:\n\
            CapInh: 0\nCapPrm:\t ffffffffffffffff \nCapEff:\t8000000000000001\nCapBnd:\t1ff\n\
            Seccomp:\t 2\n";
        let c = parse_credentials(status).unwrap();
        assert_eq!(c.uids, Ids { real: 0, effective: 1001, saved: 2, fs: 3 });
        assert_eq!(c.gids.as_array(), [5, 6, 7, 8]);
        assert!(c.groups.is_empty());
        // 64-bit masks: the top bit too.
        assert_eq!(c.caps.permitted, u64::MAX);
        assert_eq!(c.caps.effective, 1 << 63 | 1);
        assert_eq!(c.caps.bounding, 0x1ff);
        // Lines younger kernels add read as unset when absent.
        assert_eq!((c.caps.ambient, c.no_new_privs), (0, false));
        assert_eq!(c.seccomp, SeccompMode::Filter);
        assert_eq!(parse_real_ids(status), (0, 5));
    }

    #[test]
    fn missing_or_bad_lines() {
        let without = |key: &[u8]| -> Vec<u8> {
            STATUS
                .split_inclusive(|&b| b == b'\n')
                .filter(|l| !l.starts_with(key))
                .flatten()
                .copied()
                .collect()
        };
        for key in ["Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:"] {
            assert_eq!(parse_credentials(&without(key.as_bytes())), None, "without {key}");
        }
        assert!(parse_credentials(&without(b"CapAmb:")).is_some());
        let with = |line: &[u8]| [STATUS, line].concat();
        let bad: [&[u8]; 7] = [
            b"Uid:\t1\t2\t3\n",
            b"Uid:\t1\t2\t3\t4\t5\n",
            b"Gid:\t1\t2\tx\t4\n",
            b"Groups:\t1 -2\n",
            b"CapEff:\t10000000000000000\n",
            b"Seccomp:\t3\n",
            b"NoNewPrivs:\t2\n",
        ];
        for line in bad {
            // The first line of a key counts: put the bad one first.
            let status =
                [line, &without(&line[..line.iter().position(|&b| b == b':').unwrap() + 1])].concat();
            assert_eq!(parse_credentials(&status), None, "{}", String::from_utf8_lossy(line));
            // And a duplicate after a good one is ignored.
            assert!(parse_credentials(&with(line)).is_some());
        }
        assert_eq!(parse_credentials(b""), None);
        assert_eq!(parse_credentials(&STATUS[..STATUS.len() / 2]), None);
        assert_eq!(parse_real_ids(b"Uid:\nGid:\tx\n"), (0, 0));
        assert_eq!(parse_signal_sets(b"SigCgt:\t00000000000000001\nSigIgn:\tz\n"), (0, 0));
        assert_eq!(parse_signal_sets(b""), (0, 0));
    }

    #[test]
    fn namespace_tid() {
        assert_eq!(parse_ns_tid(b"Name:\t\xff\nNSpid:\t4242\t17\t3\nNSpgid:\t1\n"), Some(3));
        assert_eq!(parse_ns_tid(b"NSpid:\t4242\n"), Some(4242));
        assert_eq!(parse_ns_tid(b"NSpid:\n"), None);
        assert_eq!(parse_ns_tid(b"NSpid:\t4242\tx\n"), None);
        assert_eq!(parse_ns_tid(b"Pid:\t4242\n"), None);
    }

    #[test]
    fn fdinfo_fields() {
        assert_eq!(parse_fdinfo(b"pos:\t4096\nflags:\t02100002\nmnt_id:\t25\nino:\t7\n"), (4096, 0o2100002));
        assert_eq!(parse_fdinfo(b"flags:\t9\npos:\t-1\n"), (0, 0));
        assert_eq!(parse_fdinfo(b"garbage\xff"), (0, 0));
    }

    #[test]
    fn fdinfo_names_its_file_by_mount_and_inode() {
        assert_eq!(
            parse_fdinfo_identity(b"pos:\t0\nflags:\t02\nmnt_id:\t16\nino:\t1057\n"),
            Some((16, 1057))
        );
        assert_eq!(parse_fdinfo_identity(b"pos:\t0\nflags:\t02\n"), None);
    }

    #[test]
    fn eventfd_counts_are_hexadecimal() {
        let info = b"pos:\t0\nflags:\t02004002\nmnt_id:\t16\nino:\t1057\neventfd-count:                a\n\
            eventfd-id: 3\neventfd-semaphore: 1\n";
        assert_eq!(parse_eventfd(info), Some((10, true, Some(3))));
        assert_eq!(parse_eventfd(b"eventfd-count: ffffffffffffffff\n"), Some((u64::MAX, false, None)));
        assert_eq!(parse_eventfd(b"pos:\t0\n"), None);
    }

    #[test]
    fn epoll_watches_name_descriptors_events_data_and_inodes() {
        let info = b"pos:\t0\nflags:\t02\nmnt_id:\t16\nino:\t1057\n\
            tfd:        3 events:       19 data:                7  pos:0 ino:4e3 sdev:f\n\
            tfd:       12 events: 80000001 data: ffffffffffffffff  pos:0 ino:10 sdev:d\n";
        assert_eq!(parse_epoll(info), Some(vec![(3, 0x19, 7, 0x4e3), (12, 0x8000_0001, u64::MAX, 0x10)]));
        assert_eq!(parse_epoll(b"pos:\t0\n"), Some(vec![]));
        assert_eq!(parse_epoll(b"tfd: x events: 1 data: 0 ino:1\n"), None);
    }

    #[test]
    fn timerfds_and_signalfds_are_read_from_fdinfo() {
        let timer = b"pos:\t0\nflags:\t02\nclockid: 1\nticks: 3\nsettime flags: 00\n\
            it_value: (99, 999872913)\nit_interval: (3600, 0)\n";
        assert_eq!(parse_timerfd(timer), Some((1, 3, 99_999_872_913, 3_600_000_000_000)));
        assert_eq!(parse_timerfd(b"clockid: 1\nticks: 0\n"), None);
        assert_eq!(parse_signalfd(b"pos:\t0\nsigmask:\t0000000000000200\n"), Some(1 << 9));
    }

    #[test]
    fn posix_timers() {
        let text = b"ID: 1\nsignal: 14/0000000000000000\nnotify: signal/pid.13436\nClockID: 0\n\
            ID: 0\nsignal: 10/00007f0000001000\nnotify: thread/tid.13437\nClockID: 1\n\
            ID: 2\nsignal: x/0\nnotify: none/pid.1\nClockID: 0\n";
        let timers = parse_timers(text);
        assert_eq!(timers.len(), 2, "{timers:?}");
        assert_eq!(timers[0], PosixTimer { id: 1, signo: 14, notify: "signal/pid.13436".into(), clock: 0 });
        assert_eq!(timers[1], PosixTimer { id: 0, signo: 10, notify: "thread/tid.13437".into(), clock: 1 });
        assert!(parse_timers(b"").is_empty());
    }

    #[test]
    fn resource_limits() {
        let text = b"Limit                     Soft Limit           Hard Limit           Units     \n\
            Max cpu time              unlimited            unlimited            seconds   \n\
            Max stack size            8388608              unlimited            bytes     \n\
            Max open files            1024                 524288               files     \n\
            Max nice priority         0                    0                    \n\
            Max realtime timeout      unlimited            unlimited            us        \n";
        let limits = parse_limits(text);
        let of = |resource: u32| limits.iter().find(|l| l.resource == resource).copied();
        assert_eq!(limits.len(), 5, "{limits:?}");
        assert_eq!(of(0), Some(ResourceLimit { resource: 0, soft: RLIM_INFINITY, hard: RLIM_INFINITY }));
        assert_eq!(of(3), Some(ResourceLimit { resource: 3, soft: 8 << 20, hard: RLIM_INFINITY }));
        assert_eq!(of(7), Some(ResourceLimit { resource: 7, soft: 1024, hard: 524288 }));
        assert_eq!(of(13), Some(ResourceLimit { resource: 13, soft: 0, hard: 0 }));
        assert_eq!(of(15).map(|l| l.soft), Some(RLIM_INFINITY));
    }
}
