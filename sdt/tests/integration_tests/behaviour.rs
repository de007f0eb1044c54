//! The program behaves under `sdt run` as without it: stdio, exit codes, signals, forks.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use sdt_test_harness::Skip;

use crate::harness::{
    Sdt, cpp_program, describe, gdb, gdb_values, program, run, shared_library, stderr, stdout,
    wait_with_timeout,
};

fn exit_code_is_the_programs() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.output(&["run", "--", prog.to_str().unwrap(), "exit", "7"]);
    assert_eq!(out.status.code(), Some(7), "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 1);
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().contains("exited 7"), "{ls}");
}

/// `--timeout`: a program still running when it runs out (two threads deadlocked) is
/// snapshotted where it hangs and killed; sdt exits 124 and names the snapshot, in which
/// gdb shows both threads waiting for a lock.
fn a_program_past_its_timeout_is_snapshotted_and_stopped() {
    let sdt = Sdt::new();
    let prog = program("hangs");
    std::fs::write(sdt.dir.path().join("hang"), "").unwrap();
    let started = std::time::Instant::now();
    let out = sdt.output(&["run", "--timeout", "2", "--", prog.to_str().unwrap()]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(124), "{}", describe(&out));
    let said = "sdt: the program was still running after 2.00 s (--timeout): it was stopped; S1 is where it \
                was then: `sdt gdb S1`";
    assert!(stderr(&out).contains(said), "{}", describe(&out));
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().contains("stopped"), "{ls}");
    let text = stdout(&sdt.ok(&["gdb", "S1", "--", "-batch", "-ex", "thread apply all bt"]));
    assert_eq!(text.matches(" in worker (").count(), 2, "{text}");
    assert_eq!(text.matches("_lll_lock_wait (").count(), 2, "both wait for a lock: {text}");
    // sdt says which threads deadlocked, on which mutexes, and that main waits behind them.
    let deadlock = stderr(&out).lines().find(|l| l.starts_with("sdt: deadlock in S1: ")).map(str::to_owned);
    let deadlock = deadlock.unwrap_or_else(|| panic!("no deadlock named: {}", describe(&out)));
    let show = stdout(&sdt.ok(&["show", "S1"]));
    let (a, b) = (thread_tids(&show)[1], thread_tids(&show)[2]);
    let holder = |t: i32| if t == a { b } else { a };
    let step = |t: i32, lock: &str| format!("{t} for mutex `{lock}`, held by {}", holder(t));
    let (wants_first, wants_second) = if deadlock.contains(&step(a, "first")) { (a, b) } else { (b, a) };
    assert!(deadlock.contains(&step(wants_first, "first")), "{deadlock}");
    assert!(deadlock.contains(&step(wants_second, "second")), "{deadlock}");
    assert!(deadlock.ends_with("waits behind them (`sdt show S1`)"), "{deadlock}");
    assert!(show.contains(&format!("for thread {a} to end (joining it)")), "{show}");
    let deadlock_in_show = format!("deadlock: threads {} and {} wait for each other: ", a.min(b), a.max(b));
    assert!(show.contains(&format!("  {deadlock_in_show}")), "{show}");
    // `sdt diff` names where main was at the breakpoint by the program's symbols, which
    // it reads after the program's DWARF (each read from the file's start).
    let diff: serde_json::Value =
        serde_json::from_str(&stdout(&sdt.ok(&["diff", "S0", "S1", "--json"]))).unwrap();
    let main = thread_tids(&show)[0];
    let moved = diff["threads"].as_array().unwrap().iter().find(|t| t["tid"] == main).cloned();
    let function = moved.as_ref().and_then(|t| t["old"]["function"].as_str()).map(str::to_owned);
    let function = function.unwrap_or_else(|| panic!("{diff:#}"));
    assert!(function.starts_with("SetBreakpoint+") || function.starts_with("main+"), "{diff:#}");
    // And in gdb, `sdt waits` lists them for the snapshot it is at.
    let text = stdout(&sdt.ok(&[
        "gdb",
        "S1",
        "--",
        "-batch",
        "-ex",
        "sdt waits",
        "-ex",
        "sdt goto S0",
        "-ex",
        "sdt waits",
    ]));
    assert!(text.contains(&format!("for thread {a} to end (joining it)\n")), "{text}");
    // Named, though `sdt gdb` read the program once already for the deadlock it said.
    assert!(text.contains("[sdt] deadlock: ") && text.contains("  for mutex `first` (0x"), "{text}");
    assert!(text.lines().any(|l| l.starts_with(&deadlock_in_show)), "{text}");
    assert!(
        text.contains("\nno thread waits for a lock, a thread, a descriptor or a child\n"),
        "S0 is before the threads start: {text}"
    );
}

/// A hang without a holder to name (a condition variable's lost wake-up, main joining
/// its thread): every thread waits in futex for ever, and sdt says so.
fn a_hang_where_every_thread_waits_for_ever_is_named() {
    let sdt = Sdt::new();
    let prog = program("hangs");
    let out = sdt.output(&["run", "--timeout", "2", "--", prog.to_str().unwrap(), "lost"]);
    assert_eq!(out.status.code(), Some(124), "{}", describe(&out));
    let said = "sdt: hang in S1: every thread waits in futex with no time limit: nothing in the program can \
                wake them";
    assert!(stderr(&out).contains(said), "{}", describe(&out));
    let show = stdout(&sdt.ok(&["show", "S1"]));
    let sleeper = thread_tids(&show)[1];
    assert!(show.contains(&format!("for thread {sleeper} to end (joining it)")), "{show}");
    assert!(show.contains(&format!("{sleeper}  on futex word `wake` (0x")), "{show}");
    assert!(!show.contains("  deadlock: "), "{show}");
}

/// The tids of the threads `sdt show` lists, main's first.
fn thread_tids(show: &str) -> Vec<i32> {
    let table = show.split("\nthreads (").nth(1).expect("a thread table");
    let rows = table.lines().skip(2).take_while(|l| !l.is_empty());
    rows.map(|l| l.split_whitespace().next().unwrap().parse().unwrap()).collect()
}

/// `sdt show` says what each thread asleep in futex waits for: a std::mutex in an array
/// of structs and its holder, a condition variable, a priority-inheriting mutex, a mutex
/// its own holder locks again; and names each deadlock with the threads behind it. And
/// what a thread reads from, which child a thread waits for, and a library's mutex by its
/// symbol.
fn sdt_show_says_what_each_blocked_thread_waits_for() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let prog = cpp_program("blocked")?;
    let lib = shared_library("loaded");
    let out =
        sdt.output(&["run", "-q", "--timeout", "3", "--", prog.to_str().unwrap(), lib.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(124), "{}", describe(&out));
    assert_eq!(stdout(&out), "blocked\n");
    let show = stdout(&sdt.ok(&["show", "S0"]));
    let (main, t) = (thread_tids(&show)[0], thread_tids(&show)[1..].to_vec());
    let expected = [
        format!("{:>7}  for mutex `accounts[2].m` (0x", t[0]),
        format!("{:>7}  for mutex `accounts[1].m` (0x", t[1]),
        format!("{:>7}  on futex word `never` (0x", t[2]),
        format!("{:>7}  for mutex `twice` (0x", t[3]),
        format!("{:>7}  for mutex `inherited` (0x", t[4]),
        format!("{:>7}  in read on fd ", t[5]),
        format!("{:>7}  in wait4 for child process ", t[6]),
        format!("{:>7}  for mutex `plugin_lock` (0x", t[7]),
    ];
    let waits: Vec<&str> = show.split("\nwaits (8):\n").nth(1).expect("waits").lines().take(8).collect();
    for (line, start) in waits.iter().zip(&expected) {
        assert!(line.trim_start().starts_with(start.trim_start()), "{line:?} is not {start:?}: {show}");
    }
    assert!(waits[0].ends_with(&format!("held by thread {}", t[1])), "{show}");
    assert!(waits[3].ends_with("which it holds itself"), "{show}");
    assert!(waits[4].ends_with(&format!("held by thread {}", t[3])), "{show}");
    assert!(waits[5].contains(" (pipe:[") && waits[5].ends_with("])"), "{show}");
    // The library's lock, by its symbol: the program's DWARF does not have it.
    let in_lib = format!(" in {}), held by thread {main}", lib.display());
    assert!(waits[7].ends_with(&in_lib), "{show}");
    let deadlocks: Vec<&str> = show.lines().filter(|l| l.starts_with("  deadlock: ")).collect();
    assert_eq!(deadlocks.len(), 2, "{show}");
    assert!(
        deadlocks[0].starts_with(&format!("  deadlock: threads {} and {} wait for each other: ", t[0], t[1]))
    );
    assert!(!deadlocks[0].contains("behind"), "main is at its breakpoint in S0: {show}");
    assert!(deadlocks[1].ends_with(&format!("; thread {} waits behind it", t[4])), "{show}");
    // At the timeout, main joins the first account's thread: behind that deadlock.
    let said = stderr(&out);
    let at_timeout: Vec<&str> = said.lines().filter(|l| l.starts_with("sdt: deadlock in S1: ")).collect();
    assert_eq!(at_timeout.len(), 2, "{said}");
    let behind = format!("; threads {main} and {} wait behind them (`sdt show S1`)", t[7]);
    assert!(at_timeout[0].ends_with(&behind), "{said}");
    Ok(())
}

fn stdin_and_stdout_pass_through() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let mut child = sdt
        .command(&["run", "-q", "--", prog.to_str().unwrap(), "echo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello, snapshots\n").unwrap();
    let out = wait_with_timeout(child);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), "HELLO, SNAPSHOTS\n");
}

fn signals_reach_the_program() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "signals"]);
    assert_eq!(stdout(&out), "usr1=1 rt=2\n", "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 1);
}

/// The program's own `SIGTRAP`s reach it, an `int3` that comes with the registers of a
/// breakpoint already answered included; the breakpoint is captured once.
fn the_programs_own_sigtraps_reach_it() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "traps"]);
    assert_eq!(stdout(&out), "traps=3 result=0\n", "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 1);
}

/// Threads waiting in read, poll, nanosleep and sem_timedwait wait on through 20
/// snapshots; epoll_wait, which Linux ends when its thread is stopped (README: Limits), is
/// left out.
fn blocking_waits_go_on_through_snapshots() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "waits"]);
    let text = stdout(&out);
    assert!(text.starts_with("read=0 poll=0 sleep=0 sem=0 epoll="), "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 20);
}

fn a_fatal_signal_ends_sdt_the_same_way_and_keeps_snapshots() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.output(&["run", "--", prog.to_str().unwrap(), "segv"]);
    assert_eq!(out.status.signal(), Some(libc_sigsegv()), "{}", describe(&out));
    // The breakpoint's, then the program as the signal found it, on the thread it hit.
    let snapshots = sdt.snapshots();
    assert_eq!(snapshots.len(), 2, "{snapshots:?}");
    let at_signal = &snapshots[1];
    assert_eq!(at_signal["trigger"], "signal", "{at_signal}");
    assert_eq!(at_signal["signal"], "SIGSEGV", "{at_signal}");
    assert_eq!(at_signal["fault_addr"], 0, "{at_signal}");
    assert_eq!(at_signal["tid"], snapshots[0]["tid"], "{at_signal}");
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.contains("killed by signal 11"), "{ls}");
    assert!(
        ls.lines().any(|l| l.starts_with("S1 ") && l.contains("SIGSEGV") && l.contains("addr=0x0")),
        "{ls}"
    );
}

fn a_thread_that_aborts_is_captured_at_its_signal() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.output(&["run", "--", prog.to_str().unwrap(), "abort-thread"]);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    assert!(
        stderr(&out).contains("sdt: S1 is the program as the signal found it: `sdt gdb S1`"),
        "{}",
        describe(&out)
    );
    let snapshots = sdt.snapshots();
    assert_eq!(snapshots.len(), 2, "{snapshots:?}");
    let at_signal = &snapshots[1];
    assert_eq!(at_signal["signal"], "SIGABRT", "{at_signal}");
    // The worker's, not the breakpoint's main thread: it is first in the core.
    assert_ne!(at_signal["tid"], snapshots[0]["tid"], "{at_signal}");
    let core = sdt.dir.path().join("s1.core");
    sdt.ok(&["export", "core", "S1", "-o", core.to_str().unwrap()]);
    let text = gdb(&prog, &core, &["bt", "print progress", "info threads", "thread 2", "bt"]);
    assert!(text.contains("Program terminated with signal SIGABRT"), "{text}");
    assert!(text.contains("give_up"), "{text}");
    assert_eq!(gdb_values(&text), ["3"], "{text}");
    // Main is the other thread, with its whole stack (on a loaded machine it may not
    // have reached pthread_join yet).
    assert!(
        text.lines().any(|l| l.starts_with('#') && l.contains(" main (argc=") && l.contains("behave.c:")),
        "main's stack: {text}"
    );
    // Served from the store: the signal's thread current, `$_siginfo` the signal's.
    let mut args = vec!["gdb", "S1", "--", "-batch", "-nx"];
    for command in ["bt", "print progress", "print $_siginfo.si_signo"] {
        args.extend(["-ex", command]);
    }
    let served = stdout(&sdt.ok(&args));
    assert!(served.contains("give_up"), "{served}");
    assert_eq!(gdb_values(&served), ["3", "6"], "{served}");
    let show = stdout(&sdt.ok(&["show", "S1"]));
    assert!(show.contains("trigger:  signal SIGABRT"), "{show}");
    assert!(show.contains("got SIGABRT"), "{show}");

    // Not wanted: the breakpoint's snapshot alone, and the same end.
    let sdt = Sdt::new();
    let out = sdt.output(&["run", "--no-signal-snapshot", "--", prog.to_str().unwrap(), "abort-thread"]);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 1);
}

fn libc_sigsegv() -> i32 {
    11
}

fn sigterm_sent_to_sdt_is_forwarded() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let (child, mut lines, first) = sdt.start(&["run", "-q", "--", prog.to_str().unwrap(), "wait-term"]);
    assert_eq!(first, "ready\n");
    let status = run(std::process::Command::new("kill").args(["-TERM", &child.id().to_string()])).status;
    assert!(status.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut lines, &mut rest).unwrap();
    let out = wait_with_timeout(child);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(rest, "got SIGTERM\n");
}

fn forked_and_execed_children_do_not_trap() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "fork"]);
    assert_eq!(stdout(&out), "parent 0\nforked child -1\nchild exit 5\n", "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 1);
}

fn a_child_forked_while_the_library_sets_up_does_not_wait_for_it() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&["run", "--", prog.to_str().unwrap(), "fork-setting-up"]);
    assert_eq!(stdout(&out), "forked child off\nworker 0\n", "{}", describe(&out));
    assert_eq!(sdt.snapshots().len(), 1);
}

fn the_main_thread_may_exit_first() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.output(&["run", "--verify", "--", prog.to_str().unwrap(), "leader-exits"]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert_eq!(stdout(&out), "worker done\n");
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 3, "{}", describe(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("MISMATCH"), "{}", describe(&out));
    // The zombie leader does not run and is not a thread of the snapshot.
    assert!(snaps.iter().all(|s| s["threads"] == 1), "{snaps:?}");
}

fn a_program_that_execs_keeps_being_captured() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.output(&["run", "--verify", "--", prog.to_str().unwrap(), "exec"]);
    assert_eq!(out.status.code(), Some(6), "{}", describe(&out));
    assert_eq!(stdout(&out), "before exec 0\n");
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 2, "one snapshot before the exec, one after: {}", describe(&out));
    assert_eq!(snaps[1]["attrs"], "mode=exit");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).matches("matches the live process").count(),
        2,
        "{}",
        describe(&out)
    );
}

fn without_sdt_breakpoints_do_nothing() {
    let out = run(&mut std::process::Command::new(program("states")));
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains("bp 1: result -1\n") && text.contains("bp 2: result -1\n"),
        "SDT_OFF is -1: {text}"
    );
    let out = run(std::process::Command::new(program("breakpoints")).args(["2", "2", "1/1/1/0"]));
    assert_eq!(stdout(&out), "done\n");
}

fn a_thread_that_cannot_stop_costs_a_snapshot_not_a_hang() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let mut child = sdt
        .command(&["run", "--", prog.to_str().unwrap(), "vfork-stuck"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The worker waits for its vfork child, which waits for stdin: the capture of main's
    // breakpoint gives up on it, and main goes on.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("did not stop") {
                tx.send(line.clone()).ok();
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        seen
    });
    let warning = rx.recv_timeout(std::time::Duration::from_secs(60));
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    let out = wait_with_timeout(child);
    let warning = warning.unwrap_or_else(|_| panic!("the capture waited on: {}", describe(&out)));
    assert!(warning.contains("waiting in"), "{warning}");
    assert!(out.status.success(), "{}\n{}", describe(&out), reader.join().unwrap());
    assert_eq!(stdout(&out), "bp -3\ndone\n", "SDT_DECLINED is -3");
    assert_eq!(sdt.snapshots().len(), 0);
}

fn doctor_checks_the_machine_and_names_what_is_missing() {
    let sdt = Sdt::new();
    let out = sdt.ok(&["doctor"]);
    let text = stdout(&out);
    let lines = [
        "ok       ptrace",
        "ok       attach",
        "ok       write tracking",
        "ok       shared memory",
        "ok       restore",
        "ok       gdb",
        "memory          a capture copies up to",
        "everything `sdt run`",
    ];
    for line in lines {
        assert!(text.contains(line), "{line}: {text}");
    }
    // Without gdb on the PATH: named, with the fix, and exit 1.
    let empty = tempfile::tempdir().unwrap();
    let out = run(sdt.command(&["doctor"]).env("PATH", empty.path()));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.contains("MISSING  gdb") && text.contains("fix: apt-get install gdb"), "{text}");
    assert!(text.contains("missing: gdb"), "{text}");
}

fn version_names_the_store_format_and_the_kernel_features() {
    let sdt = Sdt::new();
    let text = stdout(&sdt.ok(&["--version"]));
    assert!(text.starts_with("sdt 0."), "{text}");
    assert!(text.contains("store format 3 (reads 1 to 3)"), "{text}");
    // This machine's kernel has both (Linux 6.7 and later).
    assert!(text.contains("uffd-wp yes, PAGEMAP_SCAN yes"), "{text}");
    assert_eq!(stdout(&sdt.ok(&["-V"])).lines().count(), 1);
}

sdt_test_harness::tests![
    doctor_checks_the_machine_and_names_what_is_missing,
    version_names_the_store_format_and_the_kernel_features,
    exit_code_is_the_programs,
    a_program_past_its_timeout_is_snapshotted_and_stopped,
    sdt_show_says_what_each_blocked_thread_waits_for,
    a_hang_where_every_thread_waits_for_ever_is_named,
    stdin_and_stdout_pass_through,
    signals_reach_the_program,
    the_programs_own_sigtraps_reach_it,
    blocking_waits_go_on_through_snapshots,
    a_fatal_signal_ends_sdt_the_same_way_and_keeps_snapshots,
    a_thread_that_aborts_is_captured_at_its_signal,
    sigterm_sent_to_sdt_is_forwarded,
    forked_and_execed_children_do_not_trap,
    a_child_forked_while_the_library_sets_up_does_not_wait_for_it,
    the_main_thread_may_exit_first,
    a_program_that_execs_keeps_being_captured,
    without_sdt_breakpoints_do_nothing,
    a_thread_that_cannot_stop_costs_a_snapshot_not_a_hang,
];
