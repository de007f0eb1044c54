//! `sdt doctor`: checks what SDT needs on this machine, each by trying it, and says how to
//! fix what is missing; and the long `sdt --version`, which names what the kernel offers.

use std::ffi::CString;
use std::path::Path;
use std::process::{Command, ExitCode};

use sdt_sys::spawn::{self, spawn_seized};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Ok,
    /// SDT works without it, with less.
    Optional,
    /// Something SDT needs is missing.
    Missing,
}

/// One line of the report: what was checked, what was found, and how to fix it.
struct Check {
    name: &'static str,
    verdict: Verdict,
    found: String,
    fix: Option<&'static str>,
}

pub fn doctor() -> ExitCode {
    println!("sdt doctor: what SDT needs on this machine (each checked by trying it)");
    let checks = [
        ptrace(),
        attach(),
        write_tracking(),
        huge_pages(),
        shared_memory(),
        memory(),
        restore(),
        gdb(),
        criu(),
        kernel_module(),
    ];
    for c in &checks {
        let mark = match c.verdict {
            Verdict::Ok => "ok",
            Verdict::Optional => "--",
            Verdict::Missing => "MISSING",
        };
        println!("  {mark:<8} {:<15} {}", c.name, c.found);
        if let Some(fix) = c.fix.filter(|_| c.verdict != Verdict::Ok) {
            println!("  {:<8} {:<15} fix: {fix}", "", "");
        }
    }
    let missing: Vec<&str> =
        checks.iter().filter(|c| c.verdict == Verdict::Missing).map(|c| c.name).collect();
    if missing.is_empty() {
        println!("sdt doctor: everything `sdt run`, `sdt gdb` and `sdt export` need is here");
        ExitCode::SUCCESS
    } else {
        println!("sdt doctor: missing: {}", missing.join(", "));
        ExitCode::FAILURE
    }
}

/// `sdt run` seizes the program it starts: done here with `true`, as `sdt run` does it.
fn ptrace() -> Check {
    let found = ["/bin/true", "/usr/bin/true"].into_iter().find(|p| Path::new(p).exists());
    let result = match found {
        None => Err("no /bin/true to try it on".to_owned()),
        Some(path) => {
            let program = CString::new(path).expect("no NUL in a literal");
            let cmd = spawn::Command {
                program: program.clone(),
                args: vec![program],
                env: Vec::new(),
                ptrace_options: 0,
                keep: Vec::new(),
            };
            match spawn_seized(&cmd) {
                Ok(pid) => {
                    sdt_sys::kill_process(pid, libc::SIGKILL).ok();
                    sdt_sys::reap(pid);
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        }
    };
    match result {
        Ok(()) => Check {
            name: "ptrace",
            verdict: Verdict::Ok,
            found: "sdt run can trace the programs it starts".into(),
            fix: None,
        },
        Err(e) => Check {
            name: "ptrace",
            verdict: Verdict::Missing,
            found: format!("sdt run cannot trace a program: {e}"),
            fix: Some(
                "allow ptrace: `sudo sysctl kernel.yama.ptrace_scope=1`; in a container, run it with \
                 --cap-add=SYS_PTRACE and a seccomp profile that permits ptrace",
            ),
        },
    }
}

/// `sdt attach` seizes a process it did not start: tried on a `sleep` whose parent has
/// exited, no descendant of sdt's, as Yama's `ptrace_scope` 1 tells them apart.
fn attach() -> Check {
    let check = |verdict, found: String| Check {
        name: "attach",
        verdict,
        found,
        fix: Some(
            "run sdt attach as root (CAP_SYS_PTRACE), or allow it: `sudo sysctl kernel.yama.ptrace_scope=0`",
        ),
    };
    let orphan = Command::new("/bin/sh")
        .args(["-c", "sleep 10 >/dev/null 2>&1 & echo $!"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .and_then(sdt_sys::Tid::new);
    let Some(pid) = orphan else {
        return check(Verdict::Optional, "could not start a process to try it on (/bin/sh, sleep)".into());
    };
    let seized = sdt_sys::ptrace::seize(pid, 0);
    sdt_sys::kill_process(pid, libc::SIGKILL).ok();
    if seized.is_ok() {
        // Its death is reported to the tracer first.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        sdt_sys::wait::wait_for_until(pid, deadline).ok();
    }
    match seized {
        Ok(()) => check(Verdict::Ok, "sdt attach can trace processes it did not start".into()),
        Err(e) => {
            let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
            let scope = match scope.trim() {
                "" => String::new(),
                n => format!(" (kernel.yama.ptrace_scope is {n})"),
            };
            check(
                Verdict::Optional,
                format!("sdt attach cannot trace a process it did not start: {e}{scope}"),
            )
        }
    }
}

/// What the kernel offers for finding the pages written between captures.
fn write_tracking() -> Check {
    let features = KernelFeatures::probe();
    if features.uffd_wp && features.pagemap_scan {
        Check {
            name: "write tracking",
            verdict: Verdict::Ok,
            found: format!(
                "userfaultfd async write-protect and PAGEMAP_SCAN (Linux {}): captures copy only written pages",
                features.release
            ),
            fix: None,
        }
    } else {
        Check {
            name: "write tracking",
            verdict: Verdict::Optional,
            found: format!(
                "Linux {} lacks {}: captures copy and hash every resident page (page-hash mode), slower",
                features.release,
                features.missing().join(" and ")
            ),
            fix: Some(
                "Linux 6.7 or later (userfaultfd must be allowed: vm.unprivileged_userfaultfd or user-mode faults)",
            ),
        }
    }
}

/// `sdt restore` and `sdt refine` create a PID namespace: directly with `CAP_SYS_ADMIN`,
/// else in a user namespace of its own.
fn restore() -> Check {
    let check = |verdict, found: String, fix| Check { name: "restore", verdict, found, fix };
    if sdt_sys::probe::pid_namespace(false).is_ok() {
        return check(Verdict::Ok, "sdt restore can create PID namespaces (CAP_SYS_ADMIN)".into(), None);
    }
    match sdt_sys::probe::pid_namespace(true) {
        Ok(()) => check(
            Verdict::Ok,
            "sdt restore resumes your programs in a user namespace of their own (no CAP_SYS_ADMIN): as you, \
             with other users' files shown as nobody's"
                .into(),
            None,
        ),
        Err(e) => check(
            Verdict::Optional,
            format!(
                "sdt restore and sdt refine cannot run here: without CAP_SYS_ADMIN, a user namespace was \
                 refused ({e}: {})",
                e.source
            ),
            Some(
                "run them as root, or allow user namespaces (sysctl user.max_user_namespaces, \
                 kernel.unprivileged_userns_clone)",
            ),
        ),
    }
}

/// Transparent huge pages: the write tracking splits a program's huge pages at its first
/// write after a capture, and they stay split (README: Limits).
fn huge_pages() -> Check {
    let setting = std::fs::read_to_string(THP_SETTING).ok();
    let check = |verdict, found: &str, fix| Check { name: "huge pages", verdict, found: found.into(), fix };
    match setting.as_deref().and_then(chosen) {
        Some("always") => check(
            Verdict::Optional,
            "transparent huge pages for every program (`always`): the write tracking splits a program's \
             huge pages for good at its first write after a capture",
            Some(
                "for a program that reads and writes its memory at random (TLB-bound), `sdt run --tracking \
                 page-hash` keeps them (README: Limits)",
            ),
        ),
        Some("madvise") => check(
            Verdict::Ok,
            "transparent huge pages only where a program asks (`madvise`); see README: Limits for those",
            None,
        ),
        Some(other) => check(Verdict::Ok, &format!("transparent huge pages `{other}`"), None),
        None => check(Verdict::Ok, "no transparent huge pages in this kernel", None),
    }
}

/// Whether sdt can tell where the files behind shared memory and deleted files hold data
/// (`/proc/PID/map_files`, which takes `CAP_CHECKPOINT_RESTORE`): tried on sdt's own
/// first mapping of a file.
fn shared_memory() -> Check {
    let me = sdt_sys::Tid::new(std::process::id() as i32).expect("a process id is positive");
    let tried = std::fs::read_to_string("/proc/self/maps").ok().and_then(|maps| {
        let m = maps.lines().filter_map(sdt_procfs::parse_maps_line).find(|m| m.inode != 0)?;
        sdt_sys::backing::mapped_file_extents(me, m.start, m.end)
    });
    match tried {
        Some(_) => Check {
            name: "shared memory",
            verdict: Verdict::Ok,
            found: "captures read shared memory and deleted files' mappings where they hold data".into(),
            fix: None,
        },
        None => Check {
            name: "shared memory",
            verdict: Verdict::Optional,
            found: "sdt cannot open /proc/PID/map_files (it takes CAP_CHECKPOINT_RESTORE): captures read \
                    shared memory (memfds, MAP_SHARED|MAP_ANONYMOUS, System V segments) and deleted \
                    files' mappings whole, and each hole they read takes a page of the program's memory"
                .into(),
            fix: Some("for programs with large, sparse shared memory, run sdt as root"),
        },
    }
}

/// How much a capture may copy into memory here before the rest goes through the page
/// cache (slower): what the machine, and sdt's cgroup, can spare.
fn memory() -> Check {
    use sdt_daemon::human::bytes;
    let room = sdt_daemon::MemoryRoom::now();
    let check = |verdict, found: String| Check { name: "memory", verdict, found, fix: MEMORY_FIX };
    let Some(for_captures) = room.for_captures() else {
        return check(
            Verdict::Optional,
            "neither /proc/meminfo nor a cgroup says how much memory is free".into(),
        );
    };
    let available = room
        .available
        .map_or_else(|| "MemAvailable unknown".to_owned(), |a| format!("{} available", bytes(a)));
    let cgroup = room.cgroup.map_or_else(
        || "no cgroup memory limit".to_owned(),
        |c| format!("{} left under sdt's cgroup memory limit", bytes(c)),
    );
    let found = format!(
        "a capture copies up to {} into memory ({available}, {cgroup}, 256 MiB kept for the program); past that, through the page cache, with longer pauses",
        bytes(for_captures)
    );
    check(if for_captures < 1 << 30 { Verdict::Optional } else { Verdict::Ok }, found)
}

/// What lets captures copy more into memory.
const MEMORY_FIX: Option<&str> = Some(
    "free memory, or raise the memory limit of the cgroup sdt runs in (a container's, a systemd unit's)",
);

/// The kernel's transparent huge page setting: `always [madvise] never`, the chosen one in
/// brackets.
const THP_SETTING: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// The bracketed word of a kernel setting such as [`THP_SETTING`]'s.
fn chosen(setting: &str) -> Option<&str> {
    let start = setting.find('[')? + 1;
    let len = setting[start..].find(']')?;
    Some(&setting[start..start + len])
}

/// gdb: `sdt gdb`, the evaluations of `sdt refine`, `compare` and `history`, and the cores
/// `sdt export core` writes.
fn gdb() -> Check {
    match version_line("gdb", "--version") {
        Some(line) if major_version(&line).is_some_and(|v| v >= MIN_GDB) => {
            Check { name: "gdb", verdict: Verdict::Ok, found: line, fix: None }
        }
        Some(line) => Check {
            name: "gdb",
            verdict: Verdict::Missing,
            found: format!("{line}: older than gdb {MIN_GDB}, which reads the XSAVE notes of SDT's cores"),
            fix: Some("a newer gdb (apt-get install gdb)"),
        },
        None => Check {
            name: "gdb",
            verdict: Verdict::Missing,
            found: "not found: `sdt gdb` and `sdt refine` need it".into(),
            fix: Some("apt-get install gdb"),
        },
    }
}

/// The oldest gdb SDT's cores are tested with.
const MIN_GDB: u32 = 10;

/// CRIU restores the images `sdt export criu` writes.
fn criu() -> Check {
    match version_line("criu", "--version") {
        Some(line) => Check { name: "criu", verdict: Verdict::Ok, found: line, fix: None },
        None => Check {
            name: "criu",
            verdict: Verdict::Optional,
            found: "not found: only `criu restore` of `sdt export criu` images needs it".into(),
            fix: Some("apt-get install criu"),
        },
    }
}

/// SDT's kernel module, for `sdt run --backend kmod`.
fn kernel_module() -> Check {
    if Path::new("/dev/sdt").exists() {
        Check { name: "kernel module", verdict: Verdict::Ok, found: "/dev/sdt is there".into(), fix: None }
    } else {
        Check {
            name: "kernel module",
            verdict: Verdict::Optional,
            found: "not loaded: `sdt run` stops threads with ptrace (the default)".into(),
            fix: Some(
                "for `--backend kmod`: apt install ./sdt-dkms_*.deb (scripts/deb), or sudo kmod/install.sh",
            ),
        }
    }
}

/// The first line `program flag` prints, if it runs.
fn version_line(program: &str, flag: &str) -> Option<String> {
    let out = Command::new(program).arg(flag).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(sdt_daemon::human::escape(line).into_owned())
}

/// The major version in a line such as `GNU gdb (Debian 13.1-3) 13.1`: the last word's
/// first number.
fn major_version(line: &str) -> Option<u32> {
    line.split_whitespace().last()?.split('.').next()?.parse().ok()
}

/// What the running kernel offers SDT, each found by trying it.
struct KernelFeatures {
    release: String,
    uffd_wp: bool,
    pagemap_scan: bool,
}

impl KernelFeatures {
    fn probe() -> KernelFeatures {
        KernelFeatures {
            release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "(unknown)".into(), |r| r.trim().to_owned()),
            uffd_wp: sdt_sys::probe::userfaultfd_wp_async().is_ok(),
            pagemap_scan: sdt_sys::probe::pagemap_scan().is_ok(),
        }
    }

    fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if !self.uffd_wp {
            missing.push("userfaultfd async write-protect");
        }
        if !self.pagemap_scan {
            missing.push("PAGEMAP_SCAN");
        }
        missing
    }
}

/// `sdt --version`: the version, the store format, and what the kernel offers.
pub fn long_version() -> String {
    let f = KernelFeatures::probe();
    let yes = |b: bool| if b { "yes" } else { "no" };
    format!(
        "{}\nstore format {} (reads {} to {})\nLinux {}: uffd-wp {}, PAGEMAP_SCAN {}, /dev/sdt {}",
        env!("CARGO_PKG_VERSION"),
        sdt_store::FORMAT_VERSION,
        sdt_store::OLDEST_FORMAT_VERSION,
        sdt_store::FORMAT_VERSION,
        f.release,
        yes(f.uffd_wp),
        yes(f.pagemap_scan),
        yes(Path::new("/dev/sdt").exists()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_versions_are_read_from_their_last_word() {
        assert_eq!(major_version("GNU gdb (Debian 13.1-3) 13.1"), Some(13));
        assert_eq!(major_version("GNU gdb (GDB) 9.2"), Some(9));
        assert_eq!(major_version("GNU gdb (GDB)"), None);
        assert_eq!(major_version(""), None);
    }

    #[test]
    fn kernel_settings_are_read_from_their_brackets() {
        assert_eq!(chosen("always [madvise] never\n"), Some("madvise"));
        assert_eq!(chosen("[always] madvise never"), Some("always"));
        assert_eq!(chosen("always madvise never"), None);
        assert_eq!(chosen("[always"), None);
    }
}
