//! Programs that sandbox themselves with seccomp: sdt's captures must never make the
//! system call that the sandbox kills the program for. With `CAP_SYS_ADMIN` sdt suspends
//! the filter for its own calls; without it, it makes none and says what that costs.

use std::process::Stdio;

use serde_json::Value;

use crate::harness::{Sdt, describe, program, run, stderr, stdout};

/// What `sandboxed 4` prints: each of its 8192 pages has a word raised by 1+2+3+4.
const SANDBOXED_OUTPUT: &str = "handled SIGUSR1 sum 81920\n";

/// `sdt show --raw NAME` as JSON.
fn raw_meta(sdt: &Sdt, name: &str) -> Value {
    serde_json::from_slice(&sdt.ok(&["show", "--raw", name]).stdout).unwrap()
}

/// The handler `meta` recorded for signal `signo`.
fn handler(meta: &Value, signo: i64) -> Option<u64> {
    let signals = meta["signals"].as_array()?;
    signals.iter().find(|a| a["signo"] == signo)?["handler"].as_u64()
}

fn with_cap_sys_admin_a_sandboxed_program_is_tracked_and_its_handlers_read()
-> Result<(), sdt_test_harness::Skip> {
    sdt_test_harness::root("suspending a program's seccomp filter needs CAP_SYS_ADMIN")?;
    let sdt = Sdt::new();
    let prog = program("sandboxed");
    let out = sdt.ok(&["run", "--verify", "--", prog.to_str().unwrap(), "4"]);
    assert_eq!(stdout(&out), SANDBOXED_OUTPUT, "{}", describe(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("matches the live process").count(), 4, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 4, "{}", describe(&out));
    assert!(snaps.iter().all(|s| s["mode"] == "uffd-wp"), "{snaps:?}");
    let meta = raw_meta(&sdt, "S1");
    assert!(handler(&meta, libc::SIGUSR1 as i64).is_some_and(|h| h > 1), "{}", meta["signals"]);
    assert!(meta.get("unread_handlers").is_none(), "{meta}");

    // CRIU images could not hold the filter: `criu restore` would run it unconfined.
    let out = sdt.output(&["export", "criu", "S1", "-o", "img"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("ran under seccomp"), "{}", describe(&out));
    Ok(())
}

/// A thread sandboxed against `sigaltstack` (alone: the breaking thread is not) stays
/// alive while its signal stack, which a handler runs on, is read: with `CAP_SYS_ADMIN`
/// its filter is suspended for the call; without, nothing is injected into it, and the
/// handlers that run on a signal stack go unrecorded, so the snapshot is not resumed
/// without the stack.
fn a_sandboxed_threads_signal_stack_is_read_only_with_its_filter_suspended()
-> Result<(), sdt_test_harness::Skip> {
    sdt_test_harness::root("suspending a thread's seccomp filter needs CAP_SYS_ADMIN")?;
    let prog = program("behave");
    let args = ["run", "--", prog.to_str().unwrap(), "altstack-sandboxed"];
    let sdt = Sdt::new();
    let out = sdt.ok(&args);
    assert_eq!(stdout(&out), "done\n", "{}", describe(&out));
    let meta = raw_meta(&sdt, "S0");
    let sizes: Vec<u64> =
        meta["threads"].as_array().unwrap().iter().filter_map(|t| t["altstack"]["size"].as_u64()).collect();
    assert_eq!(sizes, [65536], "{meta}");
    assert!(meta.get("unread_handlers").is_none(), "{meta}");

    let sdt = Sdt::new();
    let out = run(sdt.command_without_sys_admin(&args).stdin(Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), "done\n", "{}", describe(&out));
    assert_eq!(stderr(&out).matches("signal handlers go unrecorded").count(), 1, "{}", describe(&out));
    let meta = raw_meta(&sdt, "S0");
    let unread = meta["unread_handlers"].as_u64().unwrap_or(0);
    assert_ne!(unread & (1 << (libc::SIGUSR1 - 1)), 0, "{}", meta["unread_handlers"]);
    assert_eq!(handler(&meta, libc::SIGUSR1 as i64), None, "{}", meta["signals"]);
    let out = sdt.output(&["restore", "S0"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("handlers of SIGUSR1"), "{}", describe(&out));
    Ok(())
}

fn without_cap_sys_admin_nothing_is_injected_into_a_sandboxed_program() {
    let sdt = Sdt::new();
    let prog = program("sandboxed");
    let out =
        run(sdt.command_without_sys_admin(&["run", "--", prog.to_str().unwrap(), "4"]).stdin(Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), SANDBOXED_OUTPUT, "{}", describe(&out));
    let err = stderr(&out);
    let refusal = "runs under a seccomp filter, which could kill the program for a system call sdt makes in \
                   it; suspending it for those calls needs CAP_SYS_ADMIN";
    assert!(err.contains("sdt: warning: dirty-page tracking is off (thread "), "{err}");
    assert!(err.contains(refusal), "{err}");
    assert_eq!(err.matches("signal handlers go unrecorded").count(), 1, "{err}");
    let snaps = sdt.snapshots();
    assert_eq!(snaps.len(), 4, "{}", describe(&out));
    assert!(snaps.iter().all(|s| s["mode"] == "page-hash"), "{snaps:?}");
    let meta = raw_meta(&sdt, "S1");
    let unread = meta["unread_handlers"].as_u64().unwrap_or(0);
    assert_ne!(unread & (1 << (libc::SIGUSR1 - 1)), 0, "{meta}");
    assert_eq!(handler(&meta, libc::SIGUSR1 as i64), None, "{}", meta["signals"]);
    let show = stdout(&sdt.ok(&["show", "S1"]));
    assert!(show.contains("signals:  handlers of SIGUSR1, SIGRTMIN+1 not recorded"), "{show}");

    // A resume would lose the handlers: refused, naming them.
    let out = sdt.output(&["export", "criu", "S1", "-o", "img"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("the handlers of SIGUSR1"), "{}", describe(&out));
    // gdb reads the snapshot as any other.
    let out = sdt.ok(&["gdb", "S3", "--", "-batch", "-nx", "-ex", "print rounds"]);
    assert!(stdout(&out).contains("$1 = 4"), "{}", describe(&out));
}

fn a_snapshot_without_its_signal_handlers_is_not_resumed() -> Result<(), sdt_test_harness::Skip> {
    crate::restore::may_restore()?;
    let sdt = Sdt::new();
    let prog = program("sandboxed");
    let out = run(sdt
        .command_without_sys_admin(&["run", "-q", "--", prog.to_str().unwrap(), "2"])
        .stdin(Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    // Even going on without the seccomp filter, the handlers are missing.
    let out = sdt.output(&["restore", "-q", "--without-seccomp", "S1"]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out)
            .contains("cannot restore a program whose handlers of SIGUSR1, SIGRTMIN+1 were not recorded"),
        "{}",
        describe(&out)
    );
    Ok(())
}

sdt_test_harness::tests![
    with_cap_sys_admin_a_sandboxed_program_is_tracked_and_its_handlers_read,
    without_cap_sys_admin_nothing_is_injected_into_a_sandboxed_program,
    a_snapshot_without_its_signal_handlers_is_not_resumed,
    a_sandboxed_threads_signal_stack_is_read_only_with_its_filter_suspended,
];
