//! gdb opens our cores: every thread, a correct backtrace, the values the program had.

use sdt_test_harness::Skip;

use crate::harness::{
    Sdt, build_versioned, cpp_program, describe, gdb, gdb_values, openmp_program, program, run, stderr,
    stdout, wait_with_timeout,
};

/// What `states` printed before breakpoint `n`: counter, arr[5], message, origin.
fn printed_values(out: &str, n: u32) -> (String, String, String, String) {
    let line = out.lines().find(|l| l.starts_with(&format!("bp {n}: counter_global="))).expect("value line");
    let field = |key: &str| {
        let start = line.find(key).unwrap() + key.len();
        let rest = &line[start..];
        let end = [" arr[5]=", " message=", " origin="]
            .iter()
            .filter_map(|k| rest.find(k))
            .min()
            .unwrap_or(rest.len());
        rest[..end].to_owned()
    };
    (field("counter_global="), field("arr[5]="), field("message="), field("origin="))
}

fn gdb_shows_every_thread_stack_and_value() {
    let sdt = Sdt::new();
    let prog = program("states");
    let out = sdt.ok(&["run", "--verify", "--", prog.to_str().unwrap()]);
    let printed = stdout(&out);
    assert!(printed.contains("bp 1: result 0\n") && printed.contains("bp 2: result 1\n"), "{printed}");
    assert!(printed.ends_with("done: tls_value=100\n"), "blocked threads resumed and finished: {printed}");
    assert_eq!(stderr(&out).matches("matches the live process").count(), 2, "{}", stderr(&out));

    for (n, snap) in [(1, "S0"), (2, "S1")] {
        let core = sdt.core(snap);
        let text = gdb(
            &prog,
            &core,
            &[
                "info threads",
                "thread apply all bt",
                "print counter_global",
                "print arr[5]",
                "print message",
                "print origin",
                "thread apply all print tls_value",
            ],
        );
        assert!(!text.to_lowercase().contains("warning"), "gdb warned on {snap}:\n{text}");
        let threads = text
            .lines()
            .filter(|l| l.contains("(LWP "))
            .filter(|l| l.trim_start().starts_with(|c: char| c == '*' || c.is_ascii_digit()))
            .count();
        assert_eq!(threads, 5, "{snap}: 5 threads in `info threads`:\n{text}");
        for function in
            ["main", "report", "worker_spin", "worker_read", "worker_sleep", "worker_wait", "start_thread"]
        {
            assert!(
                text.contains(&format!(" {function} (")) || text.contains(&format!(" in {function} (")),
                "{snap}: no frame {function}:\n{text}"
            );
        }
        assert!(text.contains("read"), "{snap}: the reader is in read():\n{text}");
        assert!(text.contains("nanosleep"), "{snap}: the sleeper is in nanosleep:\n{text}");
        assert!(text.contains("pthread_cond_wait"), "{snap}: the waiter is in pthread_cond_wait:\n{text}");
        let (counter, arr5, message, origin) = printed_values(&printed, n);
        let values = gdb_values(&text);
        let (x, y) = origin.split_once(',').unwrap();
        assert_eq!(values[0], counter, "{snap}: counter_global\n{text}");
        assert_eq!(values[1], arr5, "{snap}: arr[5]");
        assert!(values[2].starts_with(&format!("\"{message}\"")), "{snap}: message {}", values[2]);
        assert_eq!(values[3], format!("{{x = {x}, y = {y}}}"), "{snap}: origin");
        // Thread-local storage reads through each thread's fs_base.
        let tls: Vec<&String> = values[4..].iter().collect();
        for expected in ["100", "101", "102", "103", "104"] {
            assert!(tls.iter().any(|v| *v == expected), "{snap}: tls_value {expected} in {tls:?}\n{text}");
        }
    }
}

fn the_breaking_thread_is_current_in_gdb() {
    let sdt = Sdt::new();
    let prog = program("breakpoints");
    sdt.ok(&["run", "--", prog.to_str().unwrap(), "3", "1", "1/1/7/0"]);
    let tid = sdt.snapshots()[0]["tid"].as_i64().unwrap();
    let text = gdb(&prog, &sdt.core("S0"), &["info threads", "bt"]);
    let current = text.lines().find(|l| l.trim_start().starts_with('*')).expect("a current thread");
    assert!(current.contains(&format!("LWP {tid}")), "current thread is the breaking one ({tid}):\n{text}");
    assert!(text.contains(" run ("), "its backtrace reaches run():\n{text}");
}

fn sdt_gdb_opens_a_snapshot() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let out =
        sdt.ok(&["gdb", "S1", "--", "-batch", "-nx", "-ex", "print counter_global", "-ex", "print origin.y"]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(gdb_values(&text), ["4242", "40"], "{text}");
    // A bare number names a snapshot too; gdb reads the store through the server: no core.
    let out = sdt.ok(&["gdb", "0", "--", "-batch", "-nx", "-ex", "print counter_global"]);
    assert_eq!(gdb_values(&stdout(&out)), ["42"]);
    assert!(!sdt.store().join("runs/1/cores").exists());
}

/// gdb's commands for comparing the server with the core: threads, the breaking
/// thread's stack, a global, SSE and AVX registers, thread-local storage.
const COMPARED: [&str; 8] = [
    "info threads",
    "bt",
    "print counter_global",
    "print origin",
    "print arr",
    "print/x $xmm1.v4_int32",
    "print/x $ymm0.v8_int32",
    "thread apply all print tls_value",
];

/// The output of `sdt gdb SNAP` running `commands` in batch mode.
fn sdt_gdb(sdt: &Sdt, snap: &str, commands: &[&str]) -> String {
    let mut args =
        vec!["gdb", snap, "--", "-batch", "-nx", "-ex", "set pagination off", "-ex", "set width 0"];
    for c in commands {
        args.extend(["-ex", c]);
    }
    let out = sdt.ok(&args);
    format!("{}{}", stdout(&out), stderr(&out))
}

fn threads_in(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.contains("Thread ") && l.trim_start().starts_with(|c: char| c == '*' || c.is_ascii_digit())
        })
        .count()
}

fn the_server_shows_what_the_core_shows() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    for snap in ["S0", "S1"] {
        let served = sdt_gdb(&sdt, snap, &COMPARED);
        let core = gdb(&prog, &sdt.core(snap), &COMPARED);
        assert!(!served.contains("warning:"), "gdb warned on {snap} through the server:\n{served}");
        assert_eq!(threads_in(&served), 5, "{snap}: 5 threads:\n{served}");
        assert_eq!(served.matches(" \"states\" ").count(), 5, "{snap}: thread names:\n{served}");
        assert!(
            served.contains(" report (snapshot_id="),
            "{snap}: the breaking thread is in report():\n{served}"
        );
        assert!(served.contains("states.c:"), "{snap}: with its line:\n{served}");
        let (mut served_values, mut core_values) = (gdb_values(&served), gdb_values(&core));
        assert_eq!(served_values.len(), 10, "{snap}:\n{served}");
        // Threads may be listed in another order.
        served_values[5..].sort();
        core_values[5..].sort();
        assert_eq!(served_values, core_values, "{snap}: server\n{served}\ncore\n{core}");
        let frame = |text: &str| text.lines().find(|l| l.starts_with("#1 ")).map(str::to_owned);
        assert_eq!(frame(&served), frame(&core), "{snap}: the same caller");
    }
}

fn sdt_goto_moves_the_session_between_snapshots() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let text = sdt_gdb(
        &sdt,
        "S0",
        &[
            "display counter_global",
            "print counter_global",
            "sdt goto S1",
            "print counter_global",
            "print origin.y",
            "sdt prev",
            "print counter_global",
            "sdt next",
            "sdt list",
            "sdt history counter_global",
            "sdt last counter_global",
            "print counter_global",
        ],
    );
    assert!(!text.contains("warning:"), "{text}");
    assert_eq!(gdb_values(&text), ["42", "4242", "40", "42", "42"], "{text}");
    assert!(text.contains("1: counter_global = 4242"), "the display is shown again:\n{text}");
    assert!(text.contains("* S1 thread "), "sdt list marks S1:\n{text}");
    let history: Vec<&str> = text.lines().filter(|l| l.starts_with("S0 ") || l.starts_with("S1 ")).collect();
    assert!(history.len() == 2 && history[0].ends_with(" 42") && history[1].ends_with(" 4242"), "{text}");
    assert!(text.contains("[sdt] counter_global was 42 (now 4242)"), "{text}");
    let out = sdt.output(&[
        "gdb",
        "S1",
        "--",
        "-batch",
        "-nx",
        "-ex",
        "sdt goto S9",
        "-ex",
        "print counter_global",
    ]);
    let err = stderr(&out);
    assert!(err.contains("no snapshot S9"), "a missing snapshot is named:\n{}", describe(&out));
}

/// Every command that resumes ends at once on the same stop, in the thread the user chose:
/// a `next` or `step` used to resume again and again until the test's timeout.
fn commands_that_resume_end_at_once_in_the_chosen_thread() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let resumes = ["next", "step", "stepi", "until", "advance report", "continue"];
    let mut commands = vec!["thread 2"];
    commands.extend(resumes);
    commands.extend(["thread", "print counter_global"]);
    let text = sdt_gdb(&sdt, "S1", &commands);
    assert_eq!(text.matches("a snapshot does not run").count(), resumes.len(), "{text}");
    assert_eq!(text.matches("No more reverse-execution history").count(), resumes.len(), "{text}");
    assert!(!text.contains("received signal"), "{text}");
    assert!(text.contains("[Current thread is 2 "), "{text}");
    assert_eq!(gdb_values(&text), ["4242"], "{text}");
    // A function call is refused, and gdb goes back to where it was, not into the call.
    let text =
        sdt_gdb(&sdt, "S1", &["print (int) getpid()", "bt 1", "next", "print counter_global", "sdt goto S0"]);
    assert!(text.contains("a snapshot does not run, nor call functions"), "{text}");
    assert!(text.contains("GDB has restored the context"), "{text}");
    let top = text.lines().find(|l| l.starts_with("#0 ")).unwrap_or_else(|| panic!("{text}"));
    assert!(top.contains(" SetBreakpoint (") && !text.contains("<function called from gdb>"), "{text}");
    assert!(text.contains("No more reverse-execution history"), "{text}");
    assert_eq!(gdb_values(&text), ["4242"], "{text}");
    // What gdb set for the call and put back is no edit to drop.
    assert!(text.contains("[sdt] S0 ") && !text.contains("are dropped"), "{text}");
}

/// `sdt history` goes through 300 snapshots with 128 descriptors: the server keeps the
/// last few snapshots open, not every one it visited (each holds its files).
fn history_through_many_snapshots_keeps_few_files_open() {
    let sdt = Sdt::new();
    let prog = program("dirty");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "1", "1", "300"]);
    let out =
        run(sdt.command_with_files(128, &["history", "*(long *)$sp"]).stdin(std::process::Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().filter(|l| l.starts_with('S')).count(), 300, "{text}");
    assert!(!text.contains("Cannot access memory"), "{text}");
}

fn gdbserver_serves_gdb_on_a_tcp_port() {
    use std::io::BufRead;
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let mut server = sdt
        .command(&["gdbserver", "S1", "--listen", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::BufReader::new(server.stderr.take().unwrap()).read_line(&mut said).unwrap();
    let addr = said.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{said}");
    let text = gdb_remote(&prog, &addr, &["info threads", "print counter_global"]);
    assert!(!text.contains("warning:"), "{text}");
    assert_eq!(threads_in(&text), 5, "{text}");
    assert_eq!(gdb_values(&text), ["4242"], "{text}");
    // gdb detached: the server ends.
    let out = wait_with_timeout(server);
    assert!(out.status.success(), "{}", describe(&out));
}

fn sdt_commit_stores_the_values_set_as_a_new_snapshot() {
    let sdt = Sdt::new();
    let prog = program("globals");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let text = sdt_gdb(
        &sdt,
        "S0",
        &[
            // A breakpoint and a resume write nothing, and stop at once.
            "break main",
            "continue",
            "sdt goto S1",
            "sdt goto S0",
            "set var unchanged_long = 5",
            "print unchanged_long",
            "sdt goto S1",
            "print unchanged_long",
            "sdt goto S0",
            "print unchanged_long",
            "set var unchanged_long = 99",
            "set $r12 = 7",
            "sdt commit",
            "print unchanged_long",
            "print $r12",
        ],
    );
    assert_eq!(gdb_values(&text), ["5", "77", "77", "99", "7"], "{text}");
    assert_eq!(text.matches("[sdt] the values set in the snapshot left are dropped").count(), 1, "{text}");
    assert_eq!(text.matches("a snapshot does not run").count(), 1, "{text}");
    assert!(text.contains("[sdt] committed as S0.e1"), "{text}");
    // The edit reads back as a snapshot of its own, in a new session and as a core; S0 is
    // as captured.
    let out =
        sdt.ok(&["gdb", "S0.e1", "--", "-batch", "-nx", "-ex", "print unchanged_long", "-ex", "print $r12"]);
    assert_eq!(gdb_values(&stdout(&out)), ["99", "7"], "{}", describe(&out));
    let edited = gdb(&prog, &sdt.core("S0.e1"), &["print unchanged_long", "print $r12"]);
    assert_eq!(gdb_values(&edited), ["99", "7"], "{edited}");
    let original = gdb(&prog, &sdt.core("S0"), &["print unchanged_long", "print counter"]);
    assert_eq!(gdb_values(&original), ["77", "1"], "{original}");
    // The next edit of S0 is S0.e2; nothing set, nothing committed.
    let text = sdt_gdb(&sdt, "S0", &["sdt commit", "set var counter = 3", "sdt commit"]);
    assert!(text.contains("nothing was set in this snapshot"), "{text}");
    assert!(text.contains("[sdt] committed as S0.e2"), "{text}");
    let listed = stdout(&sdt.ok(&["ls"]));
    assert!(listed.contains("  run 2: edits S0 of run 1") && listed.contains("  S0.e1 "), "{listed}");
    assert!(listed.contains("  run 3: edits S0 of run 1") && listed.contains("  S0.e2 "), "{listed}");
}

fn a_committed_edit_changes_what_the_restored_program_prints() -> Result<(), Skip> {
    crate::restore::may_restore()?;
    let sdt = Sdt::new();
    let prog = program("counter");
    let file = sdt.dir.path().join("count");
    let out = sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), file.to_str().unwrap(), "12"]);
    assert_eq!(stdout(&out), "counted to 12 (snapshot 0)\n");
    sdt_gdb(&sdt, "S0", &["set var count = 99", "sdt commit"]);
    let out = sdt.ok(&["restore", "-q", "S0.e1"]);
    assert_eq!(stdout(&out), "counted to 99 (snapshot 0)\n", "{}", describe(&out));
    let out = sdt.ok(&["restore", "-q", "S0"]);
    assert_eq!(stdout(&out), "counted to 12 (snapshot 0)\n", "{}", describe(&out));
    Ok(())
}

/// `sdt history` on the states run: S0 and S1, in the order printed, as `(name, value)`.
fn history_rows(out: &std::process::Output) -> Vec<(String, String)> {
    stdout(out)
        .lines()
        .map(|l| {
            let name = l.split(' ').next().unwrap().to_owned();
            let value = l.split_once("\"test=states\"").map(|(_, v)| v.trim().to_owned()).unwrap_or_default();
            (name, value)
        })
        .collect()
}

fn sdt_history_prints_the_values_the_program_printed() {
    let sdt = Sdt::new();
    let prog = program("states");
    let printed = stdout(&sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]));
    let out = sdt.ok(&["history", "counter_global"]);
    let expected: Vec<_> =
        [(1, "S0"), (2, "S1")].map(|(n, snap)| (snap.to_owned(), printed_values(&printed, n).0)).into();
    assert_eq!(history_rows(&out), expected, "{}", describe(&out));
    assert!(stdout(&out).contains(" thread "), "{}", describe(&out));
    // The same value in both: --changes keeps the first only.
    let out = sdt.ok(&["history", "--changes", "sizeof(arr)"]);
    assert_eq!(history_rows(&out).len(), 1, "{}", describe(&out));
    let out = sdt.ok(&["history", "--changes", "counter_global"]);
    assert_eq!(history_rows(&out).len(), 2, "{}", describe(&out));
}

fn sdt_history_writes_json_and_a_plot() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let svg = sdt.dir.path().join("counter.svg");
    let out = sdt.ok(&["history", "counter_global", "--json", "--plot", svg.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let rows = json.as_array().expect("an array");
    let names: Vec<_> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let values: Vec<_> = rows.iter().map(|r| r["value"].as_str().unwrap()).collect();
    assert_eq!((names, values), (vec!["S0", "S1"], vec!["42", "4242"]), "{json}");
    assert!(rows.iter().all(|r| r["run"] == 1 && r["thread"].as_i64() > Some(0) && r.get("error").is_none()));
    let text = std::fs::read_to_string(&svg).expect("the plot was written");
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"), "{text}");
}

fn sdt_history_gives_an_error_per_snapshot_and_fails() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    let out = sdt.output(&["history", "no_such_variable"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let rows = history_rows(&out);
    assert_eq!(rows.len(), 2, "{}", describe(&out));
    assert!(
        rows.iter().all(|(_, v)| v == "<No symbol \"no_such_variable\" in current context.>"),
        "{rows:?}"
    );
    assert!(stderr(&out).contains("in 2 of 2 snapshots"), "{}", describe(&out));
    let out = sdt.output(&["history", "no_such_variable", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert!(
        json.as_array().unwrap().iter().all(|r| r["error"].as_str().is_some_and(|e| e.contains("No symbol"))
            && r.get("value").is_none()),
        "{json}"
    );
}

/// An OpenMP region's threads have no frame of `main`, whose locals the user asks for:
/// `sdt history` evaluates them in main's frame, on the thread that runs it, and says so;
/// a local of a caller further up is found in the caller's frame.
fn sdt_history_finds_locals_of_main_from_an_openmp_region() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let prog = openmp_program("openmp")?;
    let printed = stdout(&sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]));
    // The total main had before round R, from what it printed after each.
    let mut before = vec![0];
    for line in printed.lines().filter(|l| l.starts_with("round ")) {
        before.push(line.rsplit(' ').next().unwrap().parse::<i64>().unwrap());
    }
    assert_eq!(before, [0, 10, 30, 60], "{printed}");
    let out = sdt.ok(&["history", "total", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let rows = json.as_array().expect("an array");
    let region: Vec<_> =
        rows.iter().filter(|r| r["trigger"].as_str().unwrap().contains("at=region")).collect();
    assert_eq!(region.len(), 9, "three threads in three rounds:\n{json:#}");
    let main = region.iter().find(|r| r["trigger"].as_str().unwrap().starts_with("breakpoint 1/1/0 "));
    let main = main.expect("main's thread breaks")["thread"].as_i64().unwrap();
    for row in &region {
        let trigger = row["trigger"].as_str().unwrap();
        let hit: usize = trigger.split(" hit ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert_eq!(row["value"].as_str(), Some(before[hit - 1].to_string().as_str()), "{row}");
        let place = row.get("evaluated_in");
        match row["thread"].as_i64() == Some(main) {
            true => assert_eq!(place, None, "main's own thread: {row}"),
            false => assert!(
                place.is_some_and(|p| p["function"] == "main"
                    && p["frame"].as_u64().is_some()
                    && p["thread"].as_i64() == Some(main)),
                "{row}"
            ),
        }
    }
    let out = sdt.output(&["history", "weight"]);
    let mark = stdout(&out).lines().find(|l| l.contains("at=mark")).map(str::to_owned);
    let mark = mark.unwrap_or_else(|| panic!("{}", describe(&out)));
    assert!(mark.ends_with(&format!(" 300  [in settle, frame #2 of thread {main}]")), "{}", describe(&out));
    // In gdb, `sdt history` does the same, and the threads gdb reads stay their own.
    let text = sdt_gdb(&sdt, "S0", &["sdt history total", "sdt goto S9", "info threads"]);
    assert!(text.contains("  [in main, frame #"), "{text}");
    assert!(!text.contains("Python Exception") && !text.contains("Error occurred"), "{text}");
    Ok(())
}

/// A C++ reference (a lambda's capture, a `const &` parameter) is given as what it
/// refers to: gdb's machine interface prints its address alone.
fn sdt_history_gives_what_a_reference_refers_to() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let prog = cpp_program("lambdas")?;
    let printed = stdout(&sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]));
    assert!(printed.contains("total 39\n"), "{printed}");
    let out = sdt.output(&["history", "total"]);
    let rows = stdout(&out);
    let lambda: Vec<&str> = rows.lines().filter(|l| l.contains("at=lambda")).collect();
    assert!(lambda.len() == 2 && lambda.iter().all(|l| l.ends_with(" 7")), "{}", describe(&out));
    let out = sdt.output(&["history", "limit", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let below = json.as_array().unwrap().iter().find(|r| r["trigger"].as_str().unwrap().contains("at=below"));
    assert_eq!(below.map(|r| &r["value"]), Some(&serde_json::json!("40")), "{json:#}");
    let text = sdt_gdb(&sdt, "S2", &["sdt history total"]);
    assert!(text.lines().filter(|l| l.contains("at=lambda")).all(|l| l.ends_with(" 7")), "{text}");
    // A local of main no lambda captured: from main's frame on the main thread, the one
    // thread with such a frame.
    let main = below.unwrap()["thread"].as_i64().unwrap();
    let out = sdt.ok(&["history", "workers"]);
    let rows = stdout(&out);
    let lambda: Vec<&str> = rows.lines().filter(|l| l.contains("at=lambda")).collect();
    let elsewhere =
        |l: &&str| l.contains(" 2  [in main, frame #") && l.ends_with(&format!(" of thread {main}]"));
    assert!(lambda.len() == 2 && lambda.iter().all(elsewhere), "{}", describe(&out));
    Ok(())
}

/// A thread the user chose in gdb stays that thread after `sdt goto`: gdb names a thread
/// to the server only when it selects another, and the server used to go back to the
/// breaking thread at each move, so gdb showed that thread's registers for the one chosen.
fn threads_keep_their_own_registers_across_sdt_goto() {
    let sdt = Sdt::new();
    let prog = program("states");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    // Each thread's top frame, as `thread apply all bt 1` lists it under the thread.
    let tops = |text: &str| {
        let lines: Vec<&str> = text.lines().collect();
        let mut tops: Vec<String> = lines
            .windows(2)
            .filter(|w| w[0].starts_with("Thread ") && w[1].starts_with("#0 "))
            .map(|w| w[1].split(" in ").nth(1).unwrap_or(w[1]).to_owned())
            .collect();
        tops.sort();
        tops
    };
    let core = gdb(&prog, &sdt.core("S0"), &["thread apply all bt 1"]);
    for thread in 2..=5 {
        let chosen = format!("thread {thread}");
        let served = sdt_gdb(&sdt, "S1", &[&chosen, "bt 1", "sdt goto S0", "thread apply all bt 1"]);
        let after = served.split("[sdt] S0 ").nth(1).unwrap_or_else(|| panic!("{served}"));
        assert_eq!(tops(after), tops(&core), "after `{chosen}`, S0's threads:\n{served}\ncore:\n{core}");
    }
}

/// gdb in batch mode on `program`, connected to the server at `addr`.
fn gdb_remote(program: &std::path::Path, addr: &str, commands: &[&str]) -> String {
    let mut cmd = std::process::Command::new("gdb");
    cmd.args(["-batch", "-nx", "-iex", "set sysroot"]).arg(program);
    cmd.args(["-ex", &format!("target remote {addr}")]);
    for c in commands {
        cmd.args(["-ex", c]);
    }
    let out = run(&mut cmd);
    format!("{}{}", stdout(&out), stderr(&out))
}

fn sdt_gdb_shows_a_rust_programs_own_line_without_warnings() {
    let sdt = Sdt::new();
    let example = crate::harness::target_dir().join("examples/rust_threads");
    assert!(example.exists(), "{} missing: build with `cargo build --release --examples`", example.display());
    sdt.ok(&["run", "-q", "--", example.to_str().unwrap()]);
    let out = sdt.ok(&["gdb", "S1", "--", "-batch", "-ex", "frame"]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!text.contains("warning:"), "{text}");
    // The selected frame is the `breakpoint!` line, not SDT's trap under it.
    let selected = text.lines().rfind(|l| l.starts_with('#')).unwrap_or_default();
    assert!(selected.contains("rust_threads.rs:"), "{text}");
}

fn a_rebuilt_program_keeps_its_snapshots_symbols() {
    let sdt = Sdt::new();
    let prog = build_versioned(&sdt, 1, "before_rebuild");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap()]);
    build_versioned(&sdt, 2, "after_rebuild");
    // gdb gets the program as it ran, kept with the run, and says nothing of a change.
    let out = sdt.ok(&["gdb", "S0", "--", "-batch", "-nx", "-ex", "bt 2", "-ex", "print version"]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("before_rebuild ()"), "{text}");
    assert_eq!(gdb_values(&text), ["1"], "{text}");
    assert!(!text.contains("changed since") && !text.contains("not used"), "{text}");
    // `sdt show` says which mappings the kept copy provides.
    let shown = stdout(&sdt.ok(&["show", "S0"]));
    let prog_maps: Vec<&str> =
        shown.lines().filter(|l| l.starts_with("  ") && l.ends_with("/prog")).collect();
    assert!(!prog_maps.is_empty() && prog_maps.iter().all(|l| l.contains(" file,kept ")), "{shown}");
    // What gdb read lies in the run's folder.
    let kept: Vec<_> = std::fs::read_dir(sdt.store().join("runs/1/files")).unwrap().flatten().collect();
    let kept = kept.iter().find(|e| e.file_name().to_string_lossy().ends_with("-prog")).expect("kept");
    // An exported core names the program to open it with: the kept one.
    let core = sdt.dir.path().join("S0.core");
    let out = sdt.ok(&["export", "core", "S0", "-o", core.to_str().unwrap()]);
    let told = format!("open it with: gdb {} {}", kept.path().display(), core.display());
    assert!(stderr(&out).contains(&told), "{}", describe(&out));
    assert_eq!(gdb_values(&gdb(&kept.path(), &core, &["print version"])), ["1"]);
    // Its NT_FILE names the copy, where the pages of the mappings it lists lie.
    let named = format!("{}\0", kept.path().display());
    let core = std::fs::read(&core).unwrap();
    assert!(core.windows(named.len()).any(|w| w == named.as_bytes()));
}

sdt_test_harness::tests![
    sdt_gdb_shows_a_rust_programs_own_line_without_warnings,
    gdb_shows_every_thread_stack_and_value,
    the_breaking_thread_is_current_in_gdb,
    sdt_gdb_opens_a_snapshot,
    the_server_shows_what_the_core_shows,
    sdt_goto_moves_the_session_between_snapshots,
    commands_that_resume_end_at_once_in_the_chosen_thread,
    history_through_many_snapshots_keeps_few_files_open,
    gdbserver_serves_gdb_on_a_tcp_port,
    sdt_history_prints_the_values_the_program_printed,
    sdt_history_writes_json_and_a_plot,
    sdt_history_gives_an_error_per_snapshot_and_fails,
    sdt_history_finds_locals_of_main_from_an_openmp_region,
    sdt_history_gives_what_a_reference_refers_to,
    threads_keep_their_own_registers_across_sdt_goto,
    sdt_commit_stores_the_values_set_as_a_new_snapshot,
    a_committed_edit_changes_what_the_restored_program_prints,
    a_rebuilt_program_keeps_its_snapshots_symbols,
];
