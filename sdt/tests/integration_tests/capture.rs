//! What gets captured: filters, hits, multiple_mark, timers, limits, memory read back.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sdt_test_harness::Skip;

use crate::harness::{Sdt, config, describe, int, program, run, stderr, stdout};

/// `(level, class, id)` of every snapshot, in order.
fn triggers(sdt: &Sdt) -> Vec<(i64, i64, i64)> {
    sdt.snapshots()
        .iter()
        .map(|s| (int(s, "level").unwrap(), int(s, "class").unwrap(), int(s, "id").unwrap()))
        .collect()
}

fn config_filters_by_level_class_id_and_attrs() {
    let sdt = Sdt::new();
    let cfg =
        config(&sdt, "max_level = 2\nclasses = [1, 2]\nids = [1, \"10-12\"]\n[attrs]\nphase = \"solve*\"\n");
    let prog = program("breakpoints");
    let out = sdt.ok(&[
        "run",
        "--config",
        &cfg,
        "--",
        prog.to_str().unwrap(),
        "1",
        "1",
        "1/1/1/1/phase=solve",          // passes
        "3/1/1/1/phase=solve",          // level 3 > 2
        "1/3/1/1/phase=solve",          // class 3
        "1/1/5/1/phase=solve",          // id 5
        "2/2/11/1/iter=3,phase=solver", // passes
        "1/1/12/1/phase=setup",         // attr value
        "2/1/10/1",                     // attr missing
    ]);
    assert_eq!(triggers(&sdt), [(1, 1, 1), (2, 2, 11)], "{}", describe(&out));
    let s = sdt.snapshots();
    assert_eq!(s[1]["attrs"], "iter=3,phase=solver");
    assert_eq!(s[0]["name"], "S0");
    assert_eq!(s[1]["name"], "S1");
    let printed = stdout(&out);
    assert!(
        printed.contains("captured 1/1/1 -> S0\n") && printed.contains("captured 2/2/11 -> S1\n"),
        "{printed}"
    );
    assert_eq!(printed.matches("captured").count(), 2, "{printed}");
}

fn filtered_breakpoints_make_no_system_call() {
    // The program runs a million filtered breakpoints in seccomp strict mode, where any
    // system call but read/write/_exit kills it.
    let sdt = Sdt::new();
    let cfg = config(&sdt, "max_level = 1\n");
    let prog = program("filtered");
    let out = sdt.output(&["run", "-c", &cfg, "--", prog.to_str().unwrap(), "1000000"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), "first 0\nfiltered 1000000\n");
    assert_eq!(sdt.snapshots().len(), 1);
}

fn hits_select_arrivals() {
    let sdt = Sdt::new();
    let cfg = config(&sdt, "hits = [2, \"4-5\"]\n");
    let prog = program("breakpoints");
    sdt.ok(&["run", "-c", &cfg, "--", prog.to_str().unwrap(), "1", "6", "1/1/1/1", "1/1/2/1"]);
    let hits: Vec<(i64, i64)> =
        sdt.snapshots().iter().map(|s| (int(s, "id").unwrap(), int(s, "hit").unwrap())).collect();
    assert_eq!(hits, [(1, 2), (2, 2), (1, 4), (2, 4), (1, 5), (2, 5)]);
}

fn multiple_mark_zero_captures_once_across_threads() {
    let sdt = Sdt::new();
    let prog = program("breakpoints");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "4", "3", "1/1/1/0", "1/1/2/1"]);
    let t = triggers(&sdt);
    assert_eq!(t.iter().filter(|t| t.2 == 1).count(), 1, "multiple_mark 0: {t:?}");
    assert_eq!(
        t.iter().filter(|t| t.2 == 2).count(),
        12,
        "multiple_mark 1, 4 threads x 3: {t:?}\n{}",
        describe(&out)
    );
    // Every snapshot holds the breaking thread and the main thread, at least; threads
    // that finished their rounds may be gone.
    for s in sdt.snapshots() {
        let threads = int(&s, "threads").unwrap();
        assert!((2..=5).contains(&threads), "{s}");
        assert!(int(&s, "tid").unwrap() > 0);
    }
}

fn timed_snapshots() {
    let sdt = Sdt::new();
    let prog = program("spin");
    // 20 intervals; at least 4 snapshots even when the other tests keep the disk busy
    // (the interval counts from the commit of the snapshot before).
    let out = sdt.ok(&["run", "--every", "50", "--", prog.to_str().unwrap(), "1000"]);
    let snaps = sdt.snapshots();
    assert!(snaps.len() >= 4, "expected a snapshot every 50 ms over 1000 ms: {}", describe(&out));
    let mut last = -1.0;
    for s in &snaps {
        assert_eq!(s["trigger"], "timer");
        assert!(s["level"].is_null() && s["tid"].is_null());
        let t = s["since_start_ms"].as_f64().unwrap();
        assert!(t > last, "times increase: {snaps:?}");
        last = t;
    }
}

/// The largest resident size (`VmHWM`, KiB) `sdt` reached over `args`, read from its
/// status until it exits, with its output.
fn peak_of_sdt(sdt: &Sdt, args: &[&str]) -> (u64, Output) {
    let child = sdt.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let watcher = std::thread::spawn(move || {
        let mut peak = 0;
        // Until the process is gone (a zombie's status has no VmHWM).
        while let Ok(text) = std::fs::read_to_string(&status) {
            let Some(kib) = text.lines().find_map(|l| l.strip_prefix("VmHWM:")) else { break };
            peak = kib.trim().trim_end_matches(" kB").parse().unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    });
    let out = crate::harness::wait_with_timeout(child);
    (watcher.join().unwrap(), out)
}

/// A program that cannot break (no libsdt, no `--break`, no `--every`) gets no capture
/// buffer grown beside it: it held 256 MiB, and sdt grew as much, urgently, on the CPUs the
/// program wanted (a JVM without breakpoints took twice as long under `sdt run`). With
/// timed snapshots asked for, sdt still has the buffer ready for the first.
fn a_program_that_cannot_break_gets_no_capture_buffer() {
    let sdt = Sdt::new();
    let prog = program("spin");
    let prog = prog.to_str().unwrap();
    let (peak, out) = peak_of_sdt(&sdt, &["run", "-q", "--", prog, "600", "256"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(peak < 128 << 10, "sdt peaked at {peak} KiB: {}", describe(&out));
    let (peak, out) = peak_of_sdt(&sdt, &["run", "-q", "--every", "60000", "--", prog, "600", "256"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(peak > 200 << 10, "sdt peaked at {peak} KiB: {}", describe(&out));
}

fn max_snapshots_stops_capturing_and_the_program_runs_on() {
    let sdt = Sdt::new();
    let cfg = config(&sdt, "max_snapshots = 3\n");
    let prog = program("breakpoints");
    let out = sdt.ok(&["run", "-c", &cfg, "--", prog.to_str().unwrap(), "2", "5", "1/1/1/1"]);
    assert_eq!(sdt.snapshots().len(), 3);
    assert_eq!(stdout(&out).matches("captured").count(), 3, "{}", describe(&out));
    assert!(stdout(&out).ends_with("done\n"));
}

fn past_max_snapshots_breakpoints_that_pass_are_declined_without_stopping() {
    let sdt = Sdt::new();
    let cfg = config(&sdt, "max_snapshots = 2\nmax_level = 1\n");
    let prog = program("breakpoints");
    // Five arrivals at a breakpoint that passes, and five at one max_level filters out.
    let out = sdt.ok(&["run", "-c", &cfg, "--", prog.to_str().unwrap(), "1", "5", "1/1/1/1", "2/1/1/1"]);
    assert_eq!(
        stdout(&out),
        "captured 1/1/1 -> S0\ncaptured 1/1/1 -> S1\ndeclined 1/1/1\ndeclined 1/1/1\ndeclined 1/1/1\n\
         declining inline\ndone\n",
        "SDT_DECLINED after the second snapshot, answered in the program: {}",
        describe(&out)
    );
    assert_eq!(sdt.snapshots().len(), 2);

    let sdt = Sdt::new();
    let cfg = config(&sdt, "max_snapshots = 0\n");
    let out = sdt.ok(&["run", "-c", &cfg, "--", prog.to_str().unwrap(), "1", "5", "1/1/1/1"]);
    assert_eq!(
        stdout(&out),
        format!("{}declining inline\ndone\n", "declined 1/1/1\n".repeat(5)),
        "{}",
        describe(&out)
    );
    assert_eq!(sdt.snapshots().len(), 0, "max_snapshots = 0 captures nothing");
}

fn stored_memory_equals_live_memory_through_thread_churn() {
    let sdt = Sdt::new();
    let prog = program("churn");
    // Each verified capture copies the whole address space twice: 40 of them suffice.
    let cfg = config(&sdt, "max_snapshots = 40\n");
    let out = sdt.ok(&["run", "--verify", "-c", &cfg, "--", prog.to_str().unwrap(), "20"]);
    let err = stderr(&out);
    let snaps = sdt.snapshots();
    assert!(!snaps.is_empty(), "{}", describe(&out));
    assert_eq!(err.matches("matches the live process").count(), snaps.len(), "{err}");
    assert!(!err.contains("MISMATCH"), "{err}");
    // Threads come and go between snapshots: every capture holds the main thread and the
    // breaking one, and some caught short-lived threads besides the three permanent ones.
    let counts: Vec<i64> = snaps.iter().map(|s| int(s, "threads").unwrap()).collect();
    assert!(counts.iter().all(|&c| c >= 2), "{counts:?}");
    assert!(counts.iter().any(|&c| c > 3), "{counts:?}");
    assert!(stdout(&out).contains("churn done: 20 rounds"));
}

fn incremental_snapshots_store_only_changes() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "--", prog.to_str().unwrap()]);
    let s = sdt.compacted_snapshots();
    assert_eq!(s.len(), 2);
    let stored = |i: usize, key: &str| int(&s[i], key).unwrap();
    assert_eq!(stored(0, "pages_stored"), stored(0, "pages"), "S0 stores every page");
    assert!(stored(1, "pages_stored") * 4 < stored(1, "pages"), "S1 stores only what changed: {:?}", s[1]);
    assert!(stored(1, "stored_bytes") * 2 < stored(0, "stored_bytes"));
    for snap in &s {
        assert!(
            int(snap, "pause_us").unwrap() > 0
                && int(snap, "deviation_us").unwrap() <= int(snap, "pause_us").unwrap()
        );
        assert!(snap["mode"] == "uffd-wp" || snap["mode"] == "page-hash", "{snap}");
        assert!(snap["time"].as_str().unwrap().ends_with('Z'));
    }
}

fn show_says_what_each_thread_was_doing() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "--", prog.to_str().unwrap()]);
    let shown = stdout(&sdt.ok(&["show", "S0"]));
    let threads = shown.split("threads (").nth(1).and_then(|t| t.split("mappings (").next()).unwrap();
    // The main thread breaks; one worker reads a pipe, one sleeps, one waits on a
    // condition variable; one spins, just past its barrier's futex on a busy machine.
    for state in ["at the breakpoint", "waiting in read", "waiting in clock_nanosleep", "waiting in futex"] {
        assert_eq!(threads.matches(state).count(), 1, "{state}: {shown}");
    }
    let spinning = threads.matches("running").count() + threads.matches("back from futex").count();
    assert_eq!(spinning, 1, "{shown}");
}

/// A run that reaches no breakpoint in a program with nothing of libsdt says why: the
/// shell `sdt run -- sh -c 'PROG; …'` traces is not PROG, which runs untraced (its
/// breakpoint is off); a program without SetBreakpoint is told to try --break. A program
/// that has breakpoints but whose config filters them all is not.
fn a_run_that_reaches_no_breakpoint_says_why() {
    let sdt = Sdt::new();
    let prog = program("breakpoints");
    let script = format!("{} 1 1 1/0/1/1; true", prog.display());
    let out = sdt.ok(&["run", "--", "sh", "-c", &script]);
    assert!(stdout(&out).contains("done"), "{}", describe(&out));
    assert!(sdt.snapshots().is_empty());
    let note =
        "shows no sign of libsdt: nothing in it calls SetBreakpoint. sdt run traces the process it starts";
    assert!(stderr(&out).contains(note), "{}", describe(&out));
    assert!(stderr(&out).contains("--break FUNC"), "{}", describe(&out));

    // Through the shell's exec, the program is the one traced.
    let out = sdt.ok(&["run", "--", "sh", "-c", &format!("exec {script}")]);
    assert_eq!(sdt.snapshots().len(), 1, "{}", describe(&out));
    assert!(!stderr(&out).contains("no sign of libsdt"), "{}", describe(&out));

    let nothing = program("symbols");
    let out = sdt.ok(&["run", "--", nothing.to_str().unwrap()]);
    assert!(
        stderr(&out).contains(&format!("{} shows no sign of libsdt", nothing.display())),
        "{}",
        describe(&out)
    );

    // Its breakpoints filtered out, stripped of its symbols: still libsdt's.
    let stripped = sdt.dir.path().join("stripped");
    let status = std::process::Command::new("strip").arg("-o").arg(&stripped).arg(&prog).status().unwrap();
    assert!(status.success());
    let cfg = config(&sdt, "max_level = 0\n");
    let out = sdt.ok(&["run", "-c", &cfg, "--", stripped.to_str().unwrap(), "1", "1", "1/0/1/1"]);
    assert!(!stderr(&out).contains("no sign of libsdt"), "{}", describe(&out));
}

/// A Python program marks its breakpoints through ctypes: `sdt_breakpoint` of libsdt.so
/// (loaded with `dlopen`, as the README shows) captures every thread, the attributes
/// given, and returns the snapshot's number to the script.
fn python_programs_break_through_ctypes() -> Result<(), Skip> {
    let found = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        return Err(Skip::new("python3", "python3 is not installed", "apt-get install python3"));
    }
    let sdt = Sdt::new();
    let lib = crate::harness::target_dir().join("libsdt.so");
    let script = sdt.dir.path().join("marked.py");
    std::fs::write(
        &script,
        format!(
            r#"import ctypes, threading
sdt = ctypes.CDLL({lib:?})
ready = threading.Barrier(3)
done = threading.Event()
def worker():
    ready.wait()
    done.wait()
threads = [threading.Thread(target=worker) for _ in range(2)]
for t in threads: t.start()
ready.wait()
print("breakpoint returned", sdt.sdt_breakpoint(1, 4, 2, 0, b"phase=python"))
done.set()
for t in threads: t.join()
"#
        ),
    )
    .unwrap();
    let out = sdt.ok(&["run", "-q", "--", "python3", script.to_str().unwrap()]);
    assert_eq!(stdout(&out), "breakpoint returned 0\n", "{}", describe(&out));
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 1, "{}", describe(&out));
    assert_eq!(triggers(&sdt), [(1, 4, 2)]);
    assert_eq!(snaps[0]["attrs"], "phase=python", "{}", snaps[0]);
    assert!(int(&snaps[0], "threads").unwrap() >= 3, "{}", snaps[0]);
    Ok(())
}

fn rust_programs_use_the_macro() {
    let sdt = Sdt::new();
    let example = crate::harness::target_dir().join("examples/rust_threads");
    assert!(example.exists(), "{} missing: build with `cargo build --release --examples`", example.display());
    let out = sdt.ok(&["run", "--", example.to_str().unwrap()]);
    let t = triggers(&sdt);
    assert_eq!(t, [(1, 1, 1), (2, 1, 2)], "{}", describe(&out));
    assert_eq!(int(&sdt.snapshots()[1], "threads"), Some(4));
    assert!(
        stdout(&out).contains("Captured(0)") && stdout(&out).contains("Captured(1)"),
        "{}",
        describe(&out)
    );
}

/// A memory cgroup of its own (v1's `memory` hierarchy, or v2 with the controller on),
/// removed when dropped.
struct MemoryCgroup {
    dir: PathBuf,
    /// The file whose `oom_kill N` line counts the kernel's kills in it.
    events: &'static str,
}

impl MemoryCgroup {
    /// A cgroup that may use `limit` bytes.
    fn new(limit: u64) -> Result<MemoryCgroup, Skip> {
        sdt_test_harness::root("a memory cgroup is made for the test")?;
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("sdt-test-{}-{n}", std::process::id());
        let v2_memory = std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
        let (dir, limit_file, events) = if PathBuf::from("/sys/fs/cgroup/memory/memory.limit_in_bytes")
            .exists()
        {
            (PathBuf::from("/sys/fs/cgroup/memory").join(name), "memory.limit_in_bytes", "memory.oom_control")
        } else if v2_memory {
            (PathBuf::from("/sys/fs/cgroup").join(name), "memory.max", "memory.events")
        } else {
            let why = "no cgroup memory controller is mounted at /sys/fs/cgroup/memory or enabled at /sys/fs/cgroup";
            return Err(Skip::new("a memory cgroup", why, "boot with cgroup memory accounting on"));
        };
        std::fs::create_dir(&dir).unwrap();
        let cgroup = MemoryCgroup { dir, events };
        std::fs::write(cgroup.dir.join(limit_file), limit.to_string()).unwrap();
        Ok(cgroup)
    }

    /// A wrapper for [`Sdt::command_via`] that runs its command in the cgroup.
    fn wrapper(&self) -> Vec<String> {
        let procs = self.dir.join("cgroup.procs");
        let script = format!("echo $$ > {} && exec \"$0\" \"$@\"", procs.display());
        vec!["sh".into(), "-c".into(), script]
    }

    /// Processes the kernel killed in the cgroup for want of memory.
    fn oom_kills(&self) -> u64 {
        let events = std::fs::read_to_string(self.dir.join(self.events)).unwrap();
        events.lines().find_map(|l| l.strip_prefix("oom_kill ")).map_or(0, |n| n.trim().parse().unwrap())
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // What still runs there (a background compaction) goes to the root cgroup first.
        let root = self.dir.parent().unwrap().join("cgroup.procs");
        for pid in std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default().lines() {
            std::fs::write(&root, pid).ok();
        }
        std::fs::remove_dir(&self.dir).ok();
    }
}

fn a_program_too_large_for_a_second_copy_in_memory_is_captured_not_killed() -> Result<(), Skip> {
    // 1000 MiB of heap in a cgroup of 1500: the program and a capture buffer holding all of
    // it do not fit together, and the kernel would kill the largest process, the program.
    // (The spare made ahead while the program fills its heap, sized by the memory free
    // then, must not hold the program's later pages.)
    let cgroup = MemoryCgroup::new(1500 << 20)?;
    let sdt = Sdt::new();
    let prog = program("behave");
    let alone = run(Command::new(&prog).args(["tight", "1000"]));
    let sum = stdout(&alone).lines().find(|l| l.starts_with("sum ")).unwrap().to_owned();
    let wrapper = cgroup.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let out = run(&mut sdt.command_via(&wrapper, &["run", "--", prog.to_str().unwrap(), "tight", "1000"]));
    assert_eq!(cgroup.oom_kills(), 0, "{}", describe(&out));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), format!("first 0\nsecond 1\n{sum}\n"), "{}", describe(&out));
    assert!(stderr(&out).contains("goes to disk as it is copied"), "{}", describe(&out));
    // `sdt doctor` in the cgroup says how much a capture copies into memory there.
    let doctor = stdout(&run(&mut sdt.command_via(&wrapper, &["doctor"])));
    assert!(doctor.contains("left under sdt's cgroup memory limit"), "{doctor}");
    // The snapshot holds every page as it was: resumed, the program computes the same sum.
    let restored = sdt.ok(&["restore", "S0"]);
    assert_eq!(stdout(&restored), format!("first 0\nsecond -1\n{sum}\n"), "{}", describe(&restored));
    Ok(())
}

fn a_program_that_grows_after_its_first_snapshot_gets_the_memory_that_capture_took() -> Result<(), Skip> {
    // 300 MiB, then 450 more, in a cgroup of 900: the capture buffer grown for the first
    // snapshot's 300 MiB, held whole, would leave the program too little.
    let cgroup = MemoryCgroup::new(900 << 20)?;
    let sdt = Sdt::new();
    let prog = program("behave");
    let wrapper = cgroup.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let out =
        run(&mut sdt.command_via(&wrapper, &["run", "--", prog.to_str().unwrap(), "grow", "300", "450"]));
    assert_eq!(cgroup.oom_kills(), 0, "{}", describe(&out));
    assert!(out.status.success(), "{}", describe(&out));
    let sum = (300 << 8) + 3 * (450 << 8);
    assert_eq!(stdout(&out), format!("first 0\nsecond 1\nthird 2\nsum {sum}\n"), "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 3);
    Ok(())
}

fn shared_memory_is_read_where_it_holds_data_and_gets_no_pages_from_the_capture() -> Result<(), Skip> {
    // 256 MiB of shared memory and a private mapping of a 256 MiB memfd, a page or two of
    // data each. Read whole, every hole got a page: 512 MiB more memory for the program
    // and 0.8 s of pause per snapshot. Their files' extents say where the data is.
    if !nix::unistd::geteuid().is_root() {
        return Err(Skip::needs_root("the files behind shared mappings open through /proc/PID/map_files"));
    }
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "shared"]);
    let printed = stdout(&out);
    let grew = printed.strip_prefix("shared memory grew ").and_then(|s| s.split_once(" KiB, holds acpf\n"));
    assert!(
        grew.is_some_and(|(kib, _)| kib.parse::<u64>().is_ok_and(|kib| kib < 1024)),
        "{}",
        describe(&out)
    );
    let copied = int(&sdt.snapshots()[0], "copied_bytes").unwrap();
    assert!(copied < 16 << 20, "copied {copied} bytes: {}", describe(&out));
    // The page only the child wrote and the one only the file holds are in the snapshot.
    let expr = "{shared_anon[0], shared_anon[100 << 20], shared_memfd[0], shared_memfd[200 << 20]}";
    let shown = sdt.ok(&["history", expr]);
    assert!(stdout(&shown).contains("\"acpf\""), "{}", describe(&shown));
    // The memfd is kept by its pages of data (the one written, and the one its private
    // mapping's write read in), not refused for its 256 MiB: resumed, the program reads
    // it through its descriptor.
    let shown = stdout(&sdt.ok(&["show", "S0"]));
    assert!(shown.contains("(deleted): its 8.0 KiB of data kept (a sparse file of 256.0 MiB)"), "{shown}");
    let restored = sdt.ok(&["restore", "S0"]);
    assert!(stdout(&restored).ends_with(", holds acpf\n"), "{}", describe(&restored));
    Ok(())
}

/// Huge pages added to the machine's pool for a test, and given back.
struct HugePagePool {
    before: String,
}

impl HugePagePool {
    const SETTING: &str = "/proc/sys/vm/nr_hugepages";

    /// `pages` more huge pages in the pool, or the [`Skip`] where that cannot be.
    fn grow(pages: u64) -> Result<HugePagePool, Skip> {
        let before = std::fs::read_to_string(Self::SETTING)
            .map_err(|e| Skip::new("huge pages", e.to_string(), "a kernel with hugetlbfs"))?;
        let more = before.trim().parse::<u64>().unwrap_or(0) + pages;
        std::fs::write(Self::SETTING, more.to_string())
            .map_err(|e| Skip::needs_root(format!("{}: {e}", Self::SETTING)))?;
        Ok(HugePagePool { before })
    }
}

impl Drop for HugePagePool {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::SETTING, self.before.trim());
    }
}

fn private_huge_pages_are_read_where_the_program_has_them_and_tracked() -> Result<(), Skip> {
    // 16 MiB of MAP_HUGETLB memory, 8 of it used: read whole, the capture gave the program
    // every other page from the machine's pool. Then one huge page is written: the next
    // snapshot copies that one, not the four the program holds.
    let _pool = HugePagePool::grow(16)?;
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "huge"]);
    if stdout(&out) == "no huge pages\n" {
        let why = "the pool did not grow (memory too fragmented)";
        return Err(Skip::new("huge pages", why, "echo 16 > /proc/sys/vm/nr_hugepages"));
    }
    assert_eq!(stdout(&out), "huge pages taken 0\n", "{}", describe(&out));
    let copied: Vec<i64> = sdt.snapshots().iter().map(|s| int(s, "copied_bytes").unwrap()).collect();
    assert!(
        copied.len() == 2 && copied[0] < 12 << 20 && copied[1] < 4 << 20,
        "copied {copied:?}: {}",
        describe(&out)
    );
    let shown = stdout(&sdt.ok(&["history", "{huge[5 << 20], huge[11 << 20]}"]));
    let values: Vec<&str> = shown.lines().filter_map(|l| l.rsplit_once(' ').map(|(_, v)| v)).collect();
    assert_eq!(values, ["\"x\"", "\"xi\""], "{shown}");
    Ok(())
}

sdt_test_harness::tests![
    a_run_that_reaches_no_breakpoint_says_why,
    private_huge_pages_are_read_where_the_program_has_them_and_tracked,
    shared_memory_is_read_where_it_holds_data_and_gets_no_pages_from_the_capture,
    a_program_that_grows_after_its_first_snapshot_gets_the_memory_that_capture_took,
    a_program_too_large_for_a_second_copy_in_memory_is_captured_not_killed,
    show_says_what_each_thread_was_doing,
    config_filters_by_level_class_id_and_attrs,
    filtered_breakpoints_make_no_system_call,
    hits_select_arrivals,
    multiple_mark_zero_captures_once_across_threads,
    timed_snapshots,
    a_program_that_cannot_break_gets_no_capture_buffer,
    max_snapshots_stops_capturing_and_the_program_runs_on,
    past_max_snapshots_breakpoints_that_pass_are_declined_without_stopping,
    stored_memory_equals_live_memory_through_thread_churn,
    incremental_snapshots_store_only_changes,
    rust_programs_use_the_macro,
    python_programs_break_through_ctypes,
];
