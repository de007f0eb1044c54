//! `sdt restore` and `sdt refine`: a snapshot's process resumed, checked by what it
//! prints and by gdb on the snapshots the resumed run takes.
//!
//! These tests restore as root (as in CI), where a restore makes the PID namespace
//! itself; without root each is reported ignored. Restores by other users (in a user
//! namespace of their own) are tested in `credentials`, through `setpriv`.

use std::process::{Output, Stdio};
use std::time::Duration;

use sdt_test_harness::Skip;
use serde_json::Value;

use crate::harness::{
    Sdt, build_versioned, config, describe, example, gdb, gdb_values, program, run, stderr, stdout,
    wait_within, workspace,
};

/// `Ok` if this process restores as root; otherwise the [`Skip`].
pub(crate) fn may_restore() -> Result<(), Skip> {
    sdt_test_harness::root(
        "these restores run as root (a PID namespace of the restore's own, no user namespace)",
    )
}

fn names(sdt: &Sdt) -> Vec<String> {
    sdt.snapshots().iter().map(|s| s["name"].as_str().unwrap().to_owned()).collect()
}

/// Runs `race MODE ROUNDS` under `sdt run` with only the round breakpoints (level 1).
fn race_run(sdt: &Sdt, mode: &str, rounds: &str) -> Output {
    let prog = program("race");
    let coarse = config(sdt, "max_level = 1\n");
    let out = sdt.ok(&["run", "-q", "--config", &coarse, "--", prog.to_str().unwrap(), mode, rounds]);
    assert_eq!(names(sdt).len(), rounds.parse::<usize>().unwrap(), "{}", describe(&out));
    out
}

fn every_snapshot_of_mutate_resumes_to_the_same_end() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = program("mutate");
    let original = sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "3"]);
    let snapshots = names(&sdt);
    assert_eq!(snapshots.len(), 1 + 3 * 5);
    for name in &snapshots {
        let out = sdt.output(&["restore", "-q", name]);
        assert!(out.status.success(), "restore {name}: {}", describe(&out));
        // writes, brk, mmap, munmap, MADV_DONTNEED, mremap, mprotect, threads: all of it
        // adds up to the same checksum only if the memory came back exactly.
        assert_eq!(stdout(&out), stdout(&original), "restore {name}: {}", describe(&out));
    }
    Ok(())
}

fn every_snapshot_of_the_rounds_and_dirty_programs_resumes_to_the_same_end() -> Result<(), Skip> {
    may_restore()?;
    // rounds: workers in lockstep with a sleeper, two breakpoints and timed snapshots
    // between; each restored run prints the original's lines from its snapshot's round on.
    // (Breakpoints are off in a resumed run: one reached after the snapshot answers
    // "not captured", so the "(snapshot N)" the original printed is left out.)
    let answers = |text: &str| -> String {
        text.lines()
            .map(|l| match l.find(" (snapshot ") {
                Some(at) => format!("{}{}\n", &l[..at], &l[at + l[at..].find(')').unwrap() + 1..]),
                None => format!("{l}\n"),
            })
            .collect()
    };
    let sdt = Sdt::new();
    let prog = program("rounds");
    let original = sdt.ok(&["run", "-q", "--every", "30", "--", prog.to_str().unwrap(), "12", "4", "60"]);
    let printed = answers(&stdout(&original));
    let snapshots = names(&sdt);
    assert!(snapshots.len() >= 3, "two breakpoints and a timed snapshot: {snapshots:?}");
    for name in &snapshots {
        let out = sdt.output(&["restore", "-q", name]);
        assert!(out.status.success(), "restore {name}: {}", describe(&out));
        let resumed = answers(&stdout(&out));
        assert!(
            resumed.ends_with("done\n") && printed.ends_with(&format!("\n{resumed}")),
            "restore {name}: not the rest of the original's output\n{printed}\n---\n{}",
            describe(&out)
        );
    }

    // dirty: a heap rewritten a little between snapshots, one thread.
    let sdt = Sdt::new();
    let prog = program("dirty");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "8", "10", "4"]);
    let snapshots = names(&sdt);
    assert_eq!(snapshots.len(), 4);
    for name in &snapshots {
        let out = sdt.output(&["restore", "-q", name]);
        assert!(out.status.success(), "restore {name}: {}", describe(&out));
        assert_eq!(stdout(&out), "dirty done\n", "restore {name}: {}", describe(&out));
    }
    Ok(())
}

fn snapshots_taken_while_threads_are_born_and_die_resume_to_the_same_end() -> Result<(), Skip> {
    may_restore()?;
    // A ticker traps every millisecond while the main thread creates and joins threads:
    // snapshots catch it inside clone3 (a restored clone that "failed" would run a second
    // copy of the thread) and threads on their way out (whose id word a join waits on).
    let sdt = Sdt::new();
    let prog = program("spawn");
    let limit = config(&sdt, "max_snapshots = 40\n");
    let original = sdt.ok(&["run", "-q", "--config", &limit, "--", prog.to_str().unwrap(), "200"]);
    assert!(stdout(&original).starts_with("spawned 200 threads, sum "), "{}", describe(&original));
    for name in names(&sdt) {
        let out = sdt.output(&["restore", "-q", &name]);
        assert!(out.status.success(), "restore {name}: {}", describe(&out));
        assert_eq!(stdout(&out), stdout(&original), "restore {name}: {}", describe(&out));
    }
    Ok(())
}

fn threads_caught_on_their_way_to_a_trap_are_declined_not_killed() -> Result<(), Skip> {
    may_restore()?;
    // Every breakpoint captures: the workers reach theirs together, so snapshots catch
    // some of them past the filter check, before or at their int3. Resumed with the
    // breakpoints off, those still trap, and must go on.
    let sdt = Sdt::new();
    let original = sdt.ok(&["run", "-q", "--", program("race").to_str().unwrap(), "locked", "3"]);
    let last = stdout(&original).lines().last().unwrap().to_owned();
    for name in names(&sdt) {
        let out = sdt.output(&["restore", "-q", &name]);
        assert!(out.status.success(), "restore {name}: {}", describe(&out));
        assert!(stdout(&out).ends_with(&format!("{last}\n")), "restore {name}: {}", describe(&out));
    }
    Ok(())
}

fn a_restored_program_prints_what_the_original_printed_from_there_on() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let original = race_run(&sdt, "locked", "5");
    let printed = stdout(&original);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    for k in 0..5 {
        // S<k> was taken right after "round k+1" was printed.
        let out = sdt.output(&["restore", &format!("S{k}")]);
        assert!(out.status.success(), "restore S{k}: {}", describe(&out));
        let expected: String = lines[k + 1..].iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(stdout(&out), expected, "restore S{k}: {}", describe(&out));
        assert!(stderr(&out).contains(&format!("restored S{k} of run 1 in")), "{}", describe(&out));
    }
    Ok(())
}

/// `behave ARGS` run under `sdt run -q` with a store of its own, for tests that restore
/// its snapshots: the store, and how the run went.
fn behave_run(args: &[&str]) -> Result<(Sdt, Output), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = program("behave");
    let out = sdt.ok(&[&["run", "-q", "--", prog.to_str().unwrap()][..], args].concat());
    Ok((sdt, out))
}

/// A program holding descriptor 200 resumes under an open-files limit of 64: the
/// restore raises it as far as the hard limit lets it.
fn a_program_with_high_descriptors_resumes_under_a_low_limit() -> Result<(), Skip> {
    let (sdt, out) = behave_run(&["highfd", "200"])?;
    assert_eq!(stdout(&out), "fd 200 open\n", "{}", describe(&out));
    let out = run(sdt.command_with_files(64, &["restore", "S0"]).stdin(std::process::Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), "fd 200 open\n", "{}", describe(&out));
    Ok(())
}

/// A program holding 600 descriptors (read on the capture threads) has every one in
/// both of its snapshots, ascending, each the file it opened (the second capture takes
/// `/dev/null`'s from the first); each snapshot resumes.
fn a_program_with_hundreds_of_descriptors_has_each_in_every_snapshot() -> Result<(), Skip> {
    let (sdt, out) = behave_run(&["fds", "600"])?;
    assert_eq!(stdout(&out), "done\n", "{}", describe(&out));
    let prog = program("behave");
    for snap in ["S0", "S1"] {
        let raw = sdt.ok(&["show", "--raw", snap]);
        let meta: serde_json::Value = serde_json::from_slice(&raw.stdout).unwrap();
        let opened: Vec<&serde_json::Value> =
            meta["files"].as_array().unwrap().iter().filter(|f| f["fd"].as_i64() >= Some(3)).collect();
        assert_eq!(opened.len(), 600, "{snap}");
        for (i, f) in opened.iter().enumerate() {
            let (fd, target) = (f["fd"].as_i64().unwrap(), f["target"].as_str().unwrap());
            assert_eq!(fd, 3 + i as i64, "{snap}: {f}");
            match i % 2 {
                0 => {
                    assert!(target == prog.to_str().unwrap() && f["file"]["inode"].as_u64() > Some(0), "{f}")
                }
                _ => assert_eq!(target, "/dev/null", "{snap}: {f}"),
            }
        }
        let out = sdt.ok(&["restore", "-q", snap]);
        assert_eq!(stdout(&out), "done\n", "{snap}: {}", describe(&out));
    }
    Ok(())
}

/// A program waiting for its alarm (`setitimer`) across a breakpoint gets it after a
/// resume, whether it catches `SIGALRM` or `sigwait`s for it; one that held a POSIX timer
/// is refused, naming it, unless `--without-timers`.
fn a_resumed_program_gets_the_alarm_it_was_waiting_for() -> Result<(), Skip> {
    may_restore()?;
    let prog = program("behave");
    for how in ["handler", "sigwait", "posix"] {
        let sdt = Sdt::new();
        let out = sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "alarm", how]);
        assert_eq!(stdout(&out), "alarm\n", "{how}: {}", describe(&out));
        let shown = stdout(&sdt.ok(&["show", "S0"]));
        let timer = shown.lines().find(|l| l.starts_with("timer:    ITIMER_REAL (SIGALRM) due in "));
        assert!(timer.is_some(), "{how}: the alarm is recorded:\n{shown}");
        let mut restore = vec!["restore", "S0"];
        if how == "posix" {
            assert!(shown.contains("timer:    POSIX timer 0: no signal (clock 1)"), "{shown}");
            let out = sdt.output(&restore);
            assert!(!out.status.success(), "{}", describe(&out));
            let said = stderr(&out);
            assert!(
                said.contains("cannot restore the program's POSIX timers (timer 0: no signal)")
                    && said.contains("hint: `sdt restore --without-timers S0`"),
                "{said}"
            );
            restore.insert(1, "--without-timers");
        }
        // Without its alarm it would wait for ever.
        let child =
            sdt.command(&restore).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let out = wait_within(child.expect("spawning sdt restore"), Duration::from_secs(30), "for the alarm");
        assert!(out.status.success(), "{how}: {}", describe(&out));
        assert_eq!(stdout(&out), "alarm\n", "{how}: {}", describe(&out));
    }
    Ok(())
}

/// Limits the program set itself (lowered here: the restorer may raise none beyond its
/// own hard limits) are its own again after a resume, not the restorer's.
fn a_resumed_program_keeps_its_resource_limits() -> Result<(), Skip> {
    let expected = "nofile 200/300 stack 4194304\n";
    let (sdt, out) = behave_run(&["limits"])?;
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    resumes_printing(&sdt, "S0", expected);
    Ok(())
}

/// Each thread's alternate signal stack (one with `SS_AUTODISARM`, one without) is its
/// own again after a resume, and a handler that asks for it (`SA_ONSTACK`) runs on it: a
/// resumed thread had none, and Go's runtime dies of the first signal taken without one.
fn resumed_threads_keep_their_signal_stacks() -> Result<(), Skip> {
    let expected =
        "worker: stack same, flags same, handler on it\nmain: stack same, flags same, handler on it\n";
    let (sdt, out) = behave_run(&["altstack"])?;
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    let shown = stdout(&sdt.ok(&["show", "S0"]));
    assert!(shown.contains("\nsignal stacks (2):\n"), "{shown}");
    assert_eq!(shown.matches(" (64.0 KiB)").count(), 2, "{shown}");
    assert_eq!(shown.matches(" (64.0 KiB), off while a handler runs on it\n").count(), 1, "{shown}");
    resumes_printing(&sdt, "S0", expected);
    Ok(())
}

/// A thread asleep on a stack with no room below it (256 bytes above an inaccessible
/// page, as a goroutine near the bottom of its stack has none) has its signal stack read
/// all the same, and nothing written below its stack: the injected calls' answers go
/// below the breaking thread's. The snapshot resumes.
fn a_thread_on_a_stack_without_room_has_its_signal_stack_read() -> Result<(), Skip> {
    let (sdt, out) = behave_run(&["tight-stack"])?;
    assert_eq!(stdout(&out), "done\n", "{}", describe(&out));
    assert!(!stderr(&out).contains("failed: errno"), "{}", describe(&out));
    let meta: Value = serde_json::from_slice(&sdt.ok(&["show", "--raw", "S0"]).stdout).unwrap();
    let sizes: Vec<u64> =
        meta["threads"].as_array().unwrap().iter().filter_map(|t| t["altstack"]["size"].as_u64()).collect();
    assert_eq!(sizes, [65536], "{}", meta["threads"]);
    resumes_printing(&sdt, "S0", "done\n");
    Ok(())
}

/// A resumed program keeps the umask it had set (not the restorer's): the files it
/// creates after get the permissions they would have.
fn a_resumed_program_keeps_its_umask() -> Result<(), Skip> {
    let (sdt, out) = behave_run(&["umask"])?;
    let expected = "umask 027 created 640\n";
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    let shown = stdout(&sdt.ok(&["show", "S0"]));
    assert!(shown.contains(", umask 0027, args "), "{shown}");
    // A restorer's umask the program's must not leak into.
    let out = run(sdt.command_with_umask(0o002, &["restore", "S0"]).stdin(Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    Ok(())
}

/// A resumed program's threads keep their scheduling: main pinned to CPU 0, the worker
/// at nice 7 in SCHED_BATCH (a restorer's would be all CPUs, nice 0, SCHED_OTHER).
/// `sdt show` lists each thread's.
fn resumed_threads_keep_their_cpus_policy_and_nice_value() -> Result<(), Skip> {
    let (sdt, out) = behave_run(&["sched"])?;
    let printed = stdout(&out);
    assert!(
        printed.contains("policy 3 nice 7\n") && printed.ends_with("main cpus 0 policy 0 nice 0\n"),
        "{}",
        describe(&out)
    );
    let shown = stdout(&sdt.ok(&["show", "S0"]));
    assert!(shown.contains("cpus 0\n") && shown.contains(", batch, nice 7\n"), "{shown}");
    resumes_printing(&sdt, "S0", &printed);
    Ok(())
}

/// A program run without address randomization (`setarch -R`) resumes with that
/// personality, from a restorer that has randomization on: what it executes later runs
/// without it too.
fn a_resumed_program_keeps_its_personality() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = program("behave");
    let out =
        run(&mut sdt
            .command_via(&["setarch", "-R"], &["run", "-q", "--", prog.to_str().unwrap(), "personality"]));
    assert_eq!(stdout(&out), "personality 40000\n", "ADDR_NO_RANDOMIZE: {}", describe(&out));
    resumes_printing(&sdt, "S0", "personality 40000\n");
    Ok(())
}

/// `sdt restore NAME` ends well, and the resumed program prints `expected`.
fn resumes_printing(sdt: &Sdt, name: &str, expected: &str) {
    let out = sdt.output(&["restore", name]);
    assert!(out.status.success(), "{name}: {}", describe(&out));
    assert_eq!(stdout(&out), expected, "{name}: {}", describe(&out));
}

/// Deleted files the program held (a `tmpfile()`, a file made with `O_TMPFILE` and opened
/// again read-only) are made again with their bytes, each descriptor at its position with
/// its access mode.
fn deleted_files_resume_with_what_they_held() -> Result<(), Skip> {
    let (sdt, out) = behave_run(&["tmpfile"])?;
    let expected = "rest \"deleted file\" all \"hello deleted file!\" other \"second\" write refused\n";
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    let shown = stdout(&sdt.ok(&["show", "S0"]));
    assert!(
        shown.contains("(deleted): its 18 B kept") && shown.contains("(deleted): its 6 B kept"),
        "{shown}"
    );
    resumes_printing(&sdt, "S0", expected);
    Ok(())
}

/// Two shared views of one memfd page show the same memory, and so does the memfd's
/// descriptor: resumed, they still do. (Made again as two pieces of anonymous memory, the
/// resumed program printed "view x"; with the descriptor open, the restore refused.)
fn views_of_one_deleted_file_resume_as_views_of_one_file() -> Result<(), Skip> {
    for (args, expected) in [(&["views"][..], "view y file y\n"), (&["views", "closed"], "view y\n")] {
        let (sdt, out) = behave_run(args)?;
        assert_eq!(stdout(&out), expected, "{args:?}: {}", describe(&out));
        resumes_printing(&sdt, "S0", expected);
    }
    Ok(())
}

/// A file the program mapped shared twice and removed as it exited (a JVM's `hsperfdata`
/// file) resumes from the snapshot's pages of it, its two views one memory, with a
/// warning saying so (the restore refused: the file "no longer exists"); in a temporary
/// directory and as POSIX shared memory (`/dev/shm`, refused as "a device's memory").
/// One that is still there is mapped as it is now, as the program would see it.
fn a_shared_file_removed_since_resumes_from_the_snapshots_pages() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = program("behave");
    let prog = prog.to_str().unwrap();
    let tmp = sdt.dir.path().join("gone");
    let shm = format!("/dev/shm/sdt-test-gone-{}", std::process::id());
    let expected = "view 2 other 2 page p\n";
    for path in [tmp.to_str().unwrap(), &shm] {
        let out = sdt.ok(&["run", "-q", "--", prog, "gone", path]);
        assert_eq!(stdout(&out), expected, "{path}: {}", describe(&out));
        let out = sdt.output(&["restore", "S0"]);
        assert!(out.status.success(), "{path}: {}", describe(&out));
        assert_eq!(stdout(&out), expected, "{path}: {}", describe(&out));
        let warning = format!(
            "{path}, which the program mapped shared, no longer exists: its 2 mappings are made again from \
             the snapshot's pages of it"
        );
        assert!(stderr(&out).contains(&warning), "{}", describe(&out));
    }
    let out = sdt.ok(&["run", "-q", "--", prog, "gone", &shm, "keep"]);
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    let out = sdt.output(&["restore", "S0"]);
    std::fs::remove_file(&shm).unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), "view 3 other 3 page p\n", "{}", describe(&out));
    assert!(!stderr(&out).contains("no longer exists"), "{}", describe(&out));
    Ok(())
}

/// A Java program (the JVM: twenty threads, a collector moving its heap, signals for
/// its safepoints, a shared `hsperfdata` file it removes as it exits) resumes from its
/// timed snapshots, its first and one halfway, and prints the total it printed.
fn a_java_program_resumes_from_its_snapshots() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let classes = sdt.dir.path().join("classes");
    crate::harness::java_program("Tally", &classes)?;
    let cp = classes.to_str().unwrap();
    let out = sdt.ok(&["run", "--every", "50", "--", "java", "-cp", cp, "Tally"]);
    let expected = "total 74308280\n";
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    // The hsperfdata file is written in place and removed: nothing to keep of it.
    assert!(!stderr(&out).contains("could not be kept"), "{}", describe(&out));
    let names = names(&sdt);
    assert!(names.len() >= 2, "{names:?}: {}", describe(&out));
    // Not the last: it may come after the total was printed, as the JVM shuts down.
    for name in [&names[0], &names[names.len() / 2]] {
        resumes_printing(&sdt, name, expected);
    }
    Ok(())
}

/// A Go program (its runtime: a thread per CPU and more, goroutines preempted by
/// `SIGURG`, every signal handled on the thread's alternate stack, a collector) resumes
/// from its snapshots, its breakpoint's and a timed one halfway, and prints the total it
/// printed: resumed without their signal stacks, its threads died of the first signal.
fn a_go_program_resumes_from_its_snapshots() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = crate::harness::go_program("tally", sdt.dir.path())?;
    let out = sdt.ok(&["run", "--every", "50", "--", prog.to_str().unwrap()]);
    let expected = "total 107244530\n";
    assert_eq!(stdout(&out), expected, "{}", describe(&out));
    let snapshots = sdt.snapshots();
    let name = |s: &Value| s["name"].as_str().unwrap().to_owned();
    let marked = snapshots.iter().find(|s| s["attrs"] == "phase=tally").map(name);
    let marked = marked.unwrap_or_else(|| panic!("no breakpoint's snapshot: {snapshots:?}"));
    for name in [marked, name(&snapshots[snapshots.len() / 2])] {
        resumes_printing(&sdt, &name, expected);
    }
    Ok(())
}

fn extra_environment_variables_reach_the_resumed_programs_getenv() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = program("environ");
    let names = ["SDT_TEST_GREETING", "SDT_TEST_KEEP", "SDT_TEST_REPLACED"];
    let mut cmd = sdt.command(&["run", "-q", "--", prog.to_str().unwrap()]);
    cmd.args(names)
        .env("SDT_TEST_KEEP", "kept")
        .env("SDT_TEST_REPLACED", "old")
        .env_remove("SDT_TEST_GREETING");
    let original = crate::harness::run(cmd.stdin(std::process::Stdio::null()));
    assert!(original.status.success(), "{}", describe(&original));
    let printed = stdout(&original);
    assert!(
        printed.starts_with("SDT_TEST_GREETING unset\nSDT_TEST_KEEP=kept\nSDT_TEST_REPLACED=old\n"),
        "{printed}"
    );
    let entries = |text: &str| -> i64 {
        text.lines().find_map(|l| l.strip_prefix("entries ")).and_then(|n| n.parse().ok()).expect(text)
    };

    // Without extra variables the resumed program sees what the original saw.
    let out = sdt.output(&["restore", "-q", "S0"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), printed, "{}", describe(&out));

    // One added, one replaced, the rest kept; setenv still works on the new array.
    let out = sdt.output(&[
        "restore",
        "-q",
        "S0",
        "--",
        "SDT_TEST_GREETING=hello world",
        "SDT_TEST_REPLACED=new=1",
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "SDT_TEST_GREETING=hello world\nSDT_TEST_KEEP=kept\nSDT_TEST_REPLACED=new=1\nSDT_TEST_SET=set\n"
        ),
        "{}",
        describe(&out)
    );
    assert_eq!(entries(&text), entries(&printed) + 1, "{text}");

    // And for a run that captures the resumed program.
    let out = sdt.output(&["restore", "-q", "S0", "--every", "1000", "--", "SDT_TEST_GREETING=again"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stdout(&out).starts_with("SDT_TEST_GREETING=again\n"), "{}", describe(&out));

    // A malformed variable is refused before anything is restored.
    for bad in ["NOEQUALS", "=value"] {
        let out = sdt.output(&["restore", "S0", "--", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}: {}", describe(&out));
        assert!(stderr(&out).contains("an extra environment variable is NAME=VALUE"), "{}", describe(&out));
        assert_eq!(stdout(&out), "", "{bad}: nothing ran");
    }
    Ok(())
}

fn refining_a_deterministic_interval_reproduces_its_end() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let original = race_run(&sdt, "locked", "5");
    let fine = config(&sdt, "max_level = 2\n");
    let out = sdt.ok(&[
        "refine",
        "--from",
        "S1",
        "--to",
        "S3",
        "--config",
        &fine,
        "--check",
        "total,acct[3],round_no",
    ]);
    let text = stdout(&out);
    assert!(text.contains("verdict: S3.new reproduced S3 (run 2, attempt 1)"), "{}", describe(&out));
    assert_eq!(text.matches(" yes\n").count(), 3, "{text}");
    // The resumed program printed rounds 3 and 4 as the original did, then stopped at
    // S3's breakpoint (after round 4).
    let round = |n: usize| stdout(&original).lines().nth(n - 1).unwrap().to_owned();
    assert!(text.starts_with(&format!("{}\n{}\n", round(3), round(4))), "{text}");

    // Three workers' breakpoints in each of rounds 3 and 4, round 3's own, and S3.new.
    let all = names(&sdt);
    let refined: Vec<&String> = all.iter().filter(|n| n.starts_with("S1.")).collect();
    assert_eq!(refined.len(), 7, "{all:?}");
    assert!(all.contains(&"S3.new".to_owned()), "{all:?}");

    // A refined snapshot opens in gdb with every thread, under its own thread ids.
    let core = sdt.core("S1.0");
    let shown = gdb(&program("race"), &core, &["info threads", "print round_no", "print total"]);
    assert_eq!(shown.matches(" Thread 0x").count(), 4, "{shown}");
    assert_eq!(gdb_values(&shown)[0], "3", "{shown}");

    // `sdt ls` shows the tree: the refinement indented under its run.
    let ls = stdout(&sdt.ok(&["ls"]));
    assert!(ls.contains("\n  run 2: refines S1..S3 of run 1 — stopped"), "{ls}");
    assert!(ls.contains("\n  S3.new "), "{ls}");

    // Refining a refinement nests.
    let out = sdt.ok(&["refine", "--from", "S1.0", "--to", "S1.3", "--check", "round_no"]);
    assert!(stdout(&out).contains("verdict: S1.3.new reproduced S1.3"), "{}", describe(&out));
    // Its snapshots are S1.0.N and S1.3.new. (How many S1.0.N there are depends on the
    // moment S1.0 caught the other workers: one already inside its breakpoint's trap
    // resumes with SDT_DECLINED and is not captured again.)
    let all = names(&sdt);
    assert!(all.iter().any(|n| n == "S1.3.new"), "{all:?}");
    let nested: Vec<&String> =
        all.iter().filter(|n| n.starts_with("S1.0.") || n.starts_with("S1.3.")).collect();
    assert!(
        nested
            .iter()
            .all(|n| *n == "S1.3.new" || n.strip_prefix("S1.0.").is_some_and(|k| k.parse::<u32>().is_ok())),
        "{all:?}"
    );
    Ok(())
}

fn refine_detects_a_mismatch_and_retries() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    race_run(&sdt, "racy", "4");
    let out =
        sdt.output(&["refine", "--from", "S0", "--to", "S2", "--check", "total", "--retries", "2", "-q"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let (text, err) = (stdout(&out), stderr(&out));
    for attempt in 1..=3 {
        assert!(err.contains(&format!("(attempt {attempt} of 3)")), "{err}");
        assert!(
            text.contains(&format!(
                "verdict: S2.new differs from S2 (run {}, attempt {attempt})",
                attempt + 1
            )),
            "{text}"
        );
    }
    assert!(err.contains("S2 was not reproduced in 3 attempts"), "{err}");
    assert_eq!(text.matches(" NO\n").count(), 3, "{text}");
    Ok(())
}

/// A resumed program that never reaches S2's breakpoint (two threads deadlock) is
/// snapshotted where it hangs when its time runs out, and ended: the attempt counts as
/// not reproduced, sdt names the deadlock, and gdb shows both threads waiting for a lock
/// in that snapshot.
fn a_refinement_that_hangs_is_snapshotted_and_ended_in_time() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = program("hangs");
    assert_eq!(stdout(&sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()])), "done 2\n");
    std::fs::write(sdt.dir.path().join("hang"), "").unwrap();
    let started = std::time::Instant::now();
    let refine = ["refine", "--from", "S0", "--to", "S1", "--check", "count", "--timeout", "2", "-q"];
    let out = sdt.output(&refine);
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    let said = "sdt: the resumed program had not reached the breakpoint of S1 (level 1, class 1, id 2, hit 1) \
                after 2.00 s: it was stopped; where it was then: S0.0 (`sdt gdb S0.0`)";
    assert!(err.contains(said), "{err}");
    assert!(err.contains("S1 was not reproduced in 1 attempt"), "{err}");
    let deadlock = err.lines().find(|l| l.starts_with("sdt: deadlock in S0.0: threads "));
    let deadlock = deadlock.unwrap_or_else(|| panic!("no deadlock named: {err}"));
    assert!(
        deadlock.contains(" for mutex `first`, held by ")
            && deadlock.contains(" for mutex `second`, held by ")
    );
    let text = stdout(&sdt.ok(&["gdb", "S0.0", "--", "-batch", "-ex", "thread apply all bt"]));
    assert_eq!(text.matches(" in worker (").count(), 2, "{text}");
    assert_eq!(text.matches("_lll_lock_wait (").count(), 2, "both wait for a lock: {text}");
    // Without the file, the same interval reproduces within the default time.
    std::fs::remove_file(sdt.dir.path().join("hang")).unwrap();
    let out = sdt.ok(&["refine", "--from", "S0", "--to", "S1", "--check", "count", "-q"]);
    assert!(stdout(&out).contains("verdict: S1.new reproduced S1"), "{}", describe(&out));
    Ok(())
}

fn a_programs_own_pipes_eventfds_epoll_timerfd_and_signalfd_resume() -> Result<(), Skip> {
    may_restore()?;
    let prog = program("selfpipe");
    let resumed = [
        "round 1 snapshot 1 ready 2 (tags 30) read 'ab' count 6 total 411 timer armed every 3600s signal 10 pipe nonblocking",
        "round 2 snapshot -1 ready 2 (tags 30) read 'ab' count 7 total 618 timer armed every 3600s signal 10 pipe nonblocking",
    ];
    // From the first thread, and from another (the pipe is read through that thread).
    for args in [&[][..], &["thread"]] {
        let sdt = Sdt::new();
        let out = sdt.ok(&[&["run", "-q", "--", prog.to_str().unwrap()][..], args].concat());
        let ran = stdout(&out);
        assert!(ran.contains(&format!("{}\n", resumed[0])), "{ran}");
        // The pipe held "ab" and the eventfd 6 at S1; the resumed program finds both ready
        // through its epoll instance, with their tags, and reads them (the eventfd through
        // its dup, so both descriptors are one eventfd again); its timerfd runs on, its
        // signalfd reads SIGUSR1.
        let out = sdt.output(&["restore", "-q", "S1"]);
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
        assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), resumed, "{args:?}: {}", describe(&out));
    }
    Ok(())
}

/// `sdt show` lists the descriptors with what a restore makes each again with (no root:
/// the capture alone).
fn show_lists_the_descriptors_a_restore_makes_again() {
    let sdt = Sdt::new();
    let prog = program("selfpipe");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let show = stdout(&sdt.ok(&["show", "S1"]));
    let line = |fd: &str| show.lines().find(|l| l.trim_start().starts_with(&format!("{fd} "))).unwrap_or("");
    assert!(show.contains("descriptors ("), "{show}");
    assert!(
        line("3").contains("pipe        r,nb   pipe:[") && line("3").ends_with("holds 2 B (of 64.0 KiB)"),
        "{show}"
    );
    assert!(line("5").ends_with("anon_inode:[eventfd]: count 6"), "{show}");
    assert!(line("7").contains("watches fd ") && line("7").contains("data 10"), "{show}");
    assert!(line("8").contains("every 3600.00 s, 0 unread"), "{show}");
    assert!(line("9").ends_with("reads SIGUSR1"), "{show}");
}

fn unsupported_objects_and_bad_intervals_are_named() -> Result<(), Skip> {
    may_restore()?;
    // selfpipe socket holds a socketpair.
    let sdt = Sdt::new();
    let prog = program("selfpipe");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "socket"]);
    let out = sdt.output(&["restore", "S0"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot restore file descriptor")
            && err.contains("(socket:[")
            && err.contains("sockets cannot be restored"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    // A pipe the program got from `sdt run`'s caller is not the program's: the restored
    // program gets /dev/null there, and is told so.
    let sdt = Sdt::new();
    let out = crate::harness::run(
        std::process::Command::new("bash")
            .args(["-c", "exec 7< <(echo leaked); exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_sdt"))
            .args(["run", "-q", "--", program("race").to_str().unwrap(), "locked", "2"])
            .env("SDT_STORE", sdt.store())
            .current_dir(sdt.dir.path()),
    );
    assert!(out.status.success(), "{}", describe(&out));
    let out = sdt.output(&["restore", "S0"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains("file descriptor 7 (pipe:[") && stderr(&out).contains("gets /dev/null there"),
        "{}",
        describe(&out)
    );

    let sdt = Sdt::new();
    race_run(&sdt, "locked", "3");
    for (args, says) in [
        (vec!["--from", "S2", "--to", "S1"], "was taken before --from S2"),
        (vec!["--from", "S0", "--to", "S9"], "no snapshot S9 in run 1"),
        (vec!["--from", "S0", "--to", "S2", "--check", "no_such_thing"], "gdb cannot evaluate it in S2"),
    ] {
        let mut full = vec!["refine"];
        full.extend(&args);
        if !args.contains(&"--check") {
            full.extend(["--check", "total"]);
        }
        let out = sdt.output(&full);
        assert_eq!(out.status.code(), Some(1), "{full:?}: {}", describe(&out));
        assert!(stderr(&out).contains(says), "{full:?}: {}", describe(&out));
    }
    Ok(())
}

fn a_check_gdb_cannot_evaluate_stops_refine_before_anything_runs() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let bank = example("bank");
    let examples = workspace().join("examples/bank");
    let coarse = examples.join("capture.toml");
    // bank exits 1 when its race changed the total.
    let out =
        sdt.output(&["run", "-q", "--config", coarse.to_str().unwrap(), "--", bank.to_str().unwrap(), "4"]);
    assert!(names(&sdt).contains(&"S8".to_owned()), "{}", describe(&out));
    // The README's old example, with a literal `…` (gdb warns about the charset, then
    // finds no such symbol), a syntax error and an unknown name: errors in S8 itself.
    for check in ["balance[0]+…+balance[7]", "balance[0] +", "no_such_total"] {
        let out = sdt.output(&["refine", "--from", "S2", "--to", "S8", "--check", check]);
        assert_eq!(out.status.code(), Some(1), "{check}: {}", describe(&out));
        let err = stderr(&out);
        assert!(err.contains(&format!("--check {check}: gdb cannot evaluate it in S8: ")), "{check}: {err}");
        assert!(
            !err.contains("refining") && !stdout(&out).contains("verdict"),
            "nothing ran: {}",
            describe(&out)
        );
    }
    assert_eq!(stdout(&sdt.ok(&["runs"])).matches("refines").count(), 0, "no refinement run was made");

    // The valid check refines, which restores: without root the test is reported ignored,
    // its refusals above passed.
    may_restore()?;
    // The README's example as it now reads: a sum gdb evaluates, compared in S8 and S8.new
    // (the race makes them differ, most of the time).
    let fine = examples.join("fine.toml");
    let sum = "balance[0]+balance[1]+balance[2]+balance[3]+balance[4]+balance[5]+balance[6]+balance[7]";
    let out = sdt.output(&[
        "refine",
        "--from",
        "S2",
        "--to",
        "S8",
        "--config",
        fine.to_str().unwrap(),
        "--retries",
        "0",
        "-q",
        "--check",
        sum,
    ]);
    let text = stdout(&out);
    let row = text.lines().find(|l| l.starts_with(sum)).unwrap_or_else(|| panic!("{}", describe(&out)));
    let values: Vec<&str> = row[sum.len()..].split_whitespace().collect();
    assert!(values.len() == 3 && values[..2].iter().all(|v| v.parse::<i64>().is_ok()), "{row}");
    let verdict = if values[2] == "yes" { "reproduced" } else { "differs from" };
    assert!(text.contains(&format!("verdict: S8.new {verdict} S8")), "{}", describe(&out));
    Ok(())
}

fn a_rebuilt_program_resumes_as_it_ran() -> Result<(), Skip> {
    may_restore()?;
    let sdt = Sdt::new();
    let prog = build_versioned(&sdt, 1, "work");
    let original = sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    assert_eq!(stdout(&original), "version 1\n");
    build_versioned(&sdt, 2, "work");
    assert_eq!(stdout(&run(&mut std::process::Command::new(&prog))), "version 2\n");
    // The resumed process maps the program the run kept: the code and data it ran.
    let out = sdt.ok(&["restore", "-q", "S0"]);
    assert_eq!(stdout(&out), "version 1\n", "{}", describe(&out));
    Ok(())
}

sdt_test_harness::tests![
    a_rebuilt_program_resumes_as_it_ran,
    every_snapshot_of_mutate_resumes_to_the_same_end,
    every_snapshot_of_the_rounds_and_dirty_programs_resumes_to_the_same_end,
    snapshots_taken_while_threads_are_born_and_die_resume_to_the_same_end,
    threads_caught_on_their_way_to_a_trap_are_declined_not_killed,
    a_restored_program_prints_what_the_original_printed_from_there_on,
    a_program_with_high_descriptors_resumes_under_a_low_limit,
    a_program_with_hundreds_of_descriptors_has_each_in_every_snapshot,
    a_resumed_program_gets_the_alarm_it_was_waiting_for,
    a_resumed_program_keeps_its_resource_limits,
    resumed_threads_keep_their_signal_stacks,
    a_thread_on_a_stack_without_room_has_its_signal_stack_read,
    a_resumed_program_keeps_its_umask,
    a_resumed_program_keeps_its_personality,
    resumed_threads_keep_their_cpus_policy_and_nice_value,
    deleted_files_resume_with_what_they_held,
    views_of_one_deleted_file_resume_as_views_of_one_file,
    a_shared_file_removed_since_resumes_from_the_snapshots_pages,
    a_java_program_resumes_from_its_snapshots,
    a_go_program_resumes_from_its_snapshots,
    extra_environment_variables_reach_the_resumed_programs_getenv,
    refining_a_deterministic_interval_reproduces_its_end,
    refine_detects_a_mismatch_and_retries,
    a_refinement_that_hangs_is_snapshotted_and_ended_in_time,
    a_programs_own_pipes_eventfds_epoll_timerfd_and_signalfd_resume,
    show_lists_the_descriptors_a_restore_makes_again,
    unsupported_objects_and_bad_intervals_are_named,
    a_check_gdb_cannot_evaluate_stops_refine_before_anything_runs,
];
