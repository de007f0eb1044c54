//! `sdt attach`: a running process sdt did not start is captured and let go, and runs on
//! as if nothing had happened; or watched until it ends, crashes, or the user is done.

use std::io::{BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use sdt_test_harness::Skip;

use crate::harness::{
    Sdt, User, describe, only_stdio, program, run, start_reading, stderr, stdout, wait_within,
};

/// Rounds of about 10 ms `attached` runs for in these tests: long enough for sdt to
/// attach while it runs.
const ROUNDS: &str = "150";

/// `attached ROUNDS args…` started in the test's directory, not under sdt, once it says
/// it is ready; its stdout for what it says after.
fn start_attached(sdt: &Sdt, args: &[&str]) -> (Child, BufReader<ChildStdout>) {
    let mut cmd = Command::new(program("attached"));
    let (child, lines, ready) =
        start_reading(only_stdio(&mut cmd).arg(ROUNDS).args(args).current_dir(sdt.dir.path()));
    assert_eq!(ready, "ready\n");
    (child, lines)
}

/// `sdt attach PID --watch` started, its stdout and stderr piped.
fn watch(sdt: &Sdt, pid: u32) -> Child {
    let mut cmd = sdt.command(&["attach", &pid.to_string(), "--watch"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// The rest of what the program prints, and how it ended.
fn finish(child: Child, mut lines: BufReader<ChildStdout>) -> (String, std::process::ExitStatus) {
    let mut rest = String::new();
    lines.read_to_string(&mut rest).unwrap();
    (rest, wait_within(child, Duration::from_secs(60), "(the program)").status)
}

/// Sends `signal` to process `pid`.
fn send(pid: u32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
}

/// What `/proc/PID/status` says of the process: its state and its tracer.
fn status_line(pid: u32, key: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix(key)).unwrap().trim().to_owned()
}

/// One snapshot, with every thread and the program's values in gdb; the process runs on
/// untraced, to the end it would have had, its breakpoints off throughout.
fn attach_takes_a_snapshot_and_the_process_runs_on() {
    let sdt = Sdt::new();
    let (child, lines) = start_attached(&sdt, &[]);
    let pid = child.id();
    let out = sdt.output(&["attach", &pid.to_string()]);
    assert!(out.status.success(), "{}", describe(&out));
    let said = stderr(&out);
    assert!(said.contains(&format!("sdt: process {pid} was let go: it runs on, untraced")), "{said}");
    assert_eq!(status_line(pid, "TracerPid:"), "0");
    let ls = stdout(&sdt.ok(&["ls"]));
    let head = ls.lines().next().unwrap();
    assert!(head.contains(&format!("attached to process {pid}, let go (it ran on), 1 snapshot")), "{ls}");
    let gdb = stdout(&sdt.ok(&["gdb", "S0", "--", "-batch", "-ex", "info threads", "-ex", "print/x magic"]));
    assert_eq!(gdb.matches(" Thread ").count(), 5, "{gdb}");
    assert!(gdb.contains("$1 = 0x5d7"), "{gdb}");
    let (rest, status) = finish(child, lines);
    assert_eq!(rest, format!("done {}, breakpoints off\n", 4 * 150 * 100000));
    assert_eq!(status.code(), Some(0));
}

/// `--every` with `--for`: timed snapshots for the time given, then the process is let
/// go (given a thread's id, sdt takes its process); `--watch` stays until the process
/// ends, whose exit the run records.
fn attach_watches_for_a_while_or_to_the_end() {
    let sdt = Sdt::new();
    let (child, lines) = start_attached(&sdt, &[]);
    let pid = child.id();
    let worker = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|tid| *tid != pid.to_string())
        .unwrap();
    let out = sdt.output(&["attach", &worker, "--every", "100", "--for", "0.6"]);
    assert!(out.status.success(), "{}", describe(&out));
    let note = format!("sdt: {worker} is a thread of process {pid}: attaching to the process\n");
    assert!(stderr(&out).starts_with(&note), "{}", describe(&out));
    let snapshots = sdt.complete_snapshots().len();
    assert!((3..=8).contains(&snapshots), "{snapshots} snapshots: {}", describe(&out));
    let (rest, status) = finish(child, lines);
    assert_eq!((rest.as_str(), status.code()), ("done 60000000, breakpoints off\n", Some(0)));

    let sdt = Sdt::new();
    let (child, lines) = start_attached(&sdt, &[]);
    let pid = child.id();
    let attach = watch(&sdt, pid);
    let (rest, status) = finish(child, lines);
    assert_eq!((rest.as_str(), status.code()), ("done 60000000, breakpoints off\n", Some(0)));
    let out = wait_within(attach, Duration::from_secs(60), "(sdt attach --watch)");
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!("sdt: process {pid} exited 0 while sdt watched it")),
        "{}",
        describe(&out)
    );
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.lines().next().unwrap().contains("exited 0"), "{ls}");
}

/// A process that crashes while watched: a snapshot at its signal, which then ends it as
/// it would have.
fn a_watched_process_that_crashes_is_captured_at_its_signal() {
    let sdt = Sdt::new();
    let (child, lines) = start_attached(&sdt, &["crash"]);
    let pid = child.id();
    let attach = watch(&sdt, pid);
    let (rest, status) = finish(child, lines);
    assert_eq!((rest.as_str(), status.signal()), ("", Some(libc::SIGSEGV)));
    let out = wait_within(attach, Duration::from_secs(60), "(sdt attach --watch)");
    let said = stderr(&out);
    assert!(said.contains(&format!("process {pid} was killed by signal 11 while sdt watched it")), "{said}");
    assert!(said.contains("sdt: S1 is the process as the signal found it: `sdt gdb S1`"), "{said}");
    let gdb = stdout(&sdt.ok(&["gdb", "S1", "--", "-batch", "-ex", "bt 1"]));
    assert!(gdb.contains("main (argc=3"), "{gdb}");
}

/// A deadlocked process: sdt says who waits for whom in it, and lets it go. Its program
/// was deleted since it started: the mutexes are named from the copy kept from it.
fn attach_names_the_deadlock_a_process_hangs_in() {
    let sdt = Sdt::new();
    std::fs::write(sdt.dir.path().join("hang"), "").unwrap();
    let prog = sdt.copy_in(&program("hangs"));
    let mut child = Command::new(&prog).current_dir(sdt.dir.path()).stdout(Stdio::null()).spawn().unwrap();
    // The two threads hold their first locks after 100 ms.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_file(&prog).unwrap();
    let out = sdt.output(&["attach", &child.id().to_string()]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let said = stderr(&out);
    let deadlock =
        said.lines().find(|l| l.starts_with("sdt: deadlock in S0: threads ")).unwrap_or_else(|| {
            panic!("no deadlock named: {said}");
        });
    assert!(
        deadlock.contains("wait for each other") && deadlock.contains("for mutex `first`, held by "),
        "{said}"
    );
}

/// A stopped process (SIGSTOP) is captured and stays stopped; SIGCONT lets it finish.
/// A process another tracer holds is refused with the tracer's name, and so is one that
/// does not exist; Ctrl-C (SIGINT) to a watching sdt lets its process go.
fn attach_leaves_a_stopped_process_stopped_and_refuses_what_it_cannot_trace() {
    let sdt = Sdt::new();
    let (child, lines) = start_attached(&sdt, &[]);
    let pid = child.id();
    let pid_text = pid.to_string();
    send(pid, nix::sys::signal::SIGSTOP);
    while !status_line(pid, "State:").starts_with('T') {
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = sdt.output(&["attach", &pid_text]);
    assert!(out.status.success(), "{}", describe(&out));
    std::thread::sleep(Duration::from_millis(200));
    assert!(status_line(pid, "State:").starts_with('T'), "{}", status_line(pid, "State:"));

    let watching = watch(&sdt, pid);
    let watcher = watching.id();
    while status_line(pid, "TracerPid:") != watcher.to_string() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let refused = sdt.output(&["attach", &pid_text]);
    assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
    let why = format!("sdt: error: process {pid} (attached) is traced already, by process {watcher} (sdt)");
    assert!(stderr(&refused).starts_with(&why), "{}", describe(&refused));
    send(watcher, nix::sys::signal::SIGINT);
    let out = wait_within(watching, Duration::from_secs(60), "(sdt attach --watch)");
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("was let go: it runs on, untraced"), "{}", describe(&out));
    assert_eq!(status_line(pid, "TracerPid:"), "0");

    send(pid, nix::sys::signal::SIGCONT);
    let (rest, status) = finish(child, lines);
    assert_eq!((rest.as_str(), status.code()), ("done 60000000, breakpoints off\n", Some(0)));

    let none = sdt.output(&["attach", "999999999"]);
    assert_eq!(stderr(&none), "sdt: error: there is no process 999999999\n");
}

/// A process whose program was deleted after it started (upgraded under it): the capture
/// keeps the program, read from the process, and gdb has its symbols and its libraries'.
fn a_process_whose_program_was_deleted_keeps_its_symbols() {
    let sdt = Sdt::new();
    let prog = sdt.copy_in(&program("attached"));
    let mut cmd = Command::new(&prog);
    let (child, lines, ready) = start_reading(cmd.arg(ROUNDS).current_dir(sdt.dir.path()));
    assert_eq!(ready, "ready\n");
    std::fs::remove_file(&prog).unwrap();
    // An upgrade puts a new file where the old one was.
    std::fs::write(&prog, b"not the program").unwrap();
    sdt.ok(&["attach", &child.id().to_string()]);
    let (rest, status) = finish(child, lines);
    assert_eq!((rest.as_str(), status.code()), ("done 60000000, breakpoints off\n", Some(0)));
    let out = sdt.ok(&["gdb", "S0", "--", "-batch", "-ex", "print/x magic", "-ex", "thread apply all bt"]);
    let text = stdout(&out);
    assert!(text.contains("$1 = 0x5d7"), "{}", describe(&out));
    assert!(text.contains(" in main (argc=2"), "{}", describe(&out));
    // The workers sleep in usleep between rounds, or count.
    assert!(text.contains(" in usleep (") || text.contains(" work (arg="), "{}", describe(&out));
    assert!(!stderr(&out).contains("gdb gets no symbols"), "{}", describe(&out));
}

/// A snapshot of a process whose program was deleted resumes from the copy the run kept
/// (as its executable): the restored process runs to the end the original had.
fn a_process_whose_program_was_deleted_resumes_from_the_kept_copy() -> Result<(), Skip> {
    crate::restore::may_restore()?;
    let sdt = Sdt::new();
    let prog = sdt.copy_in(&program("attached"));
    let out = sdt.dir.path().join("out.txt");
    let mut cmd = Command::new(&prog);
    let mut child = only_stdio(&mut cmd)
        .arg(ROUNDS)
        .current_dir(sdt.dir.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while std::fs::read_to_string(&out).unwrap() != "ready\n" {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_file(&prog).unwrap();
    sdt.ok(&["attach", "-q", &child.id().to_string()]);
    child.kill().unwrap();
    child.wait().unwrap();
    let restored = sdt.output(&["restore", "S0"]);
    assert!(restored.status.success(), "{}", describe(&restored));
    assert!(!stderr(&restored).contains("warning"), "{}", describe(&restored));
    // Its standard streams are the restorer's.
    assert_eq!(stdout(&restored), "done 60000000, breakpoints off\n", "{}", describe(&restored));
    Ok(())
}

/// Pages a process only read hold the shared zero page: `gcore` reads every page of the
/// workers' 8 MiB stacks, and the snapshot after it must not copy them.
fn pages_gcore_only_read_are_not_copied() {
    let sdt = Sdt::new();
    let (child, lines) = start_attached(&sdt, &[]);
    let pid = child.id().to_string();
    let core = sdt.dir.path().join("core");
    let dumped = run(Command::new("gcore").arg("-o").arg(&core).arg(&pid));
    assert!(dumped.status.success(), "{}", describe(&dumped));
    sdt.ok(&["attach", &pid]);
    let copied = crate::harness::int(&sdt.snapshots()[0], "copied_bytes").unwrap();
    assert!(copied < 16 << 20, "copied {copied} bytes of a process of four threads that gcore read");
    let (rest, status) = finish(child, lines);
    assert_eq!((rest.as_str(), status.code()), ("done 60000000, breakpoints off\n", Some(0)));
}

/// Another user's process is refused with why and what to do; it runs on untouched.
fn another_users_process_is_refused_with_what_to_do() -> Result<(), Skip> {
    sdt_test_harness::root("attaching as a user other than the process's (setpriv) takes root")?;
    let user = User { uid: 1001, gid: 1001, groups: &[1001] };
    let sdt = Sdt::owned_by(&user);
    let (child, lines) = start_attached(&sdt, &[]);
    let pid = child.id();
    let out = run(sdt.command_as(&user, &["attach", &pid.to_string()]).stdin(Stdio::null()));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let why = format!(
        "sdt: error: sdt may not trace process {pid} (attached): it runs as user 0 and sdt as user 1001: run \
         sdt as root (or with CAP_SYS_PTRACE)\n"
    );
    assert_eq!(stderr(&out), why);
    let (rest, status) = finish(child, lines);
    assert_eq!((rest.as_str(), status.code()), ("done 60000000, breakpoints off\n", Some(0)));
    Ok(())
}

sdt_test_harness::tests![
    attach_takes_a_snapshot_and_the_process_runs_on,
    attach_watches_for_a_while_or_to_the_end,
    a_watched_process_that_crashes_is_captured_at_its_signal,
    attach_names_the_deadlock_a_process_hangs_in,
    attach_leaves_a_stopped_process_stopped_and_refuses_what_it_cannot_trace,
    another_users_process_is_refused_with_what_to_do,
    a_process_whose_program_was_deleted_keeps_its_symbols,
    a_process_whose_program_was_deleted_resumes_from_the_kept_copy,
    pages_gcore_only_read_are_not_copied,
];
