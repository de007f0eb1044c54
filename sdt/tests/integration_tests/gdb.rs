//! gdb opens our cores: every thread, a correct backtrace, the values the program had.

use crate::harness::{Sdt, gdb, gdb_values, program, stderr, stdout};

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
    // A bare number names a snapshot too; cores are cached beside the run.
    let out = sdt.ok(&["gdb", "0", "--", "-batch", "-nx", "-ex", "print counter_global"]);
    assert_eq!(gdb_values(&stdout(&out)), ["42"]);
    let cores = sdt.store().join("runs/1/cores");
    assert!(cores.join("S0.core").exists() && cores.join("S1.core").exists());
}

sdt_test_harness::tests![
    gdb_shows_every_thread_stack_and_value,
    the_breaking_thread_is_current_in_gdb,
    sdt_gdb_opens_a_snapshot,
];
