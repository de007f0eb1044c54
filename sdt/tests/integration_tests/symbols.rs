//! `sdt run --break FUNC[@HIT,…]`: breakpoints at function entries of a program that
//! never calls SetBreakpoint, with every arrival counted, none lost, and the program's
//! results unchanged.

use std::path::Path;

use sdt_test_harness::Skip;

use crate::harness::{
    Sdt, cpp_program, describe, fortran_program, gdb, int, program, run, shared_library, stderr, stdout,
};

fn function_entries_capture_the_arrivals_asked_for() {
    let sdt = Sdt::new();
    let prog = program("symbols");
    let plain = run(&mut std::process::Command::new(&prog));
    let out =
        sdt.ok(&["run", "--break", "step@1-3", "--break", "twice@2,500,4000", "--", prog.to_str().unwrap()]);
    // Stepping over the int3s (emulated for step's push, for real for twice) changed
    // nothing the program computed.
    assert_eq!(stdout(&out), stdout(&plain), "{}", describe(&out));
    let snaps = sdt.snapshots();
    let mut got: Vec<(String, i64)> =
        snaps.iter().map(|s| (s["attrs"].as_str().unwrap().to_owned(), int(s, "hit").unwrap())).collect();
    // Threads race to the entries: the order of step's third and twice's second varies.
    got.sort();
    let want: Vec<(String, i64)> =
        [("step", 1), ("step", 2), ("step", 3), ("twice", 2), ("twice", 500), ("twice", 4000)]
            .iter()
            .map(|(f, h)| (format!("symbol={f}"), *h))
            .collect();
    // The 4000th call of twice is its last: no arrival was missed or counted twice.
    assert_eq!(got, want, "{}", describe(&out));
    for s in &snaps {
        assert_eq!((int(s, "level"), int(s, "class")), (Some(1), Some(0)), "{s}");
    }

    // The snapshot holds the program's own code (no int3) and the thread at the entry.
    let at_500 = snaps.iter().find(|s| s["attrs"] == "symbol=twice" && int(s, "hit") == Some(500)).unwrap();
    let core = sdt.core(at_500["name"].as_str().unwrap());
    let shown = gdb(&prog, &core, &["bt 1", "x/1i $pc", "print $pc == &twice"]);
    assert!(shown.contains("twice (x="), "{shown}");
    assert!(!shown.contains("int3"), "{shown}");
    assert!(shown.contains("= 1\n"), "{shown}");
}

fn break_errors_name_the_problem() {
    let sdt = Sdt::new();
    let prog = program("symbols");
    let prog = prog.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--break", "no_such_function"],
            "libraries it loads at its start define it (stripped? a library it loads later is named as \
             --break LIB:no_such_function)",
        ),
        (vec!["--break", ":step"], "--break :step: no library before the `:`"),
        (vec!["--break", "step@x"], "--break step@x: `x` is not a number"),
        (vec!["--break", "step", "--break", "step@2"], "--break step is given twice"),
        (vec!["--break", "step", "--backend", "kmod"], "--break needs the ptrace backend"),
    ] {
        let mut full = vec!["run"];
        full.extend(&args);
        full.extend(["--", prog]);
        let out = sdt.output(&full);
        assert_eq!(out.status.code(), Some(1), "{full:?}: {}", describe(&out));
        assert!(stderr(&out).contains(says), "{full:?}: {}", describe(&out));
        if args[1] == "no_such_function" {
            assert!(
                stderr(&out).contains(&format!("neither the program {prog} nor the")),
                "{}",
                describe(&out)
            );
        }
    }
    // Refused before the program ran: no run was recorded.
    assert!(stderr(&sdt.output(&["ls"])).contains("holds no runs yet"));
}

/// Functions of libraries: libm's, which the program loads at its start, and one of a
/// library it loads, unloads and loads again (`LIB:FUNC`), counted across the reload. A
/// child the program forks calls the function too, without the int3s.
fn library_functions_by_name_and_through_a_reload() {
    let sdt = Sdt::new();
    let prog = program("loads");
    let plugin = shared_library("loaded");
    let plugin = plugin.to_str().unwrap();
    let plain = run(std::process::Command::new(&prog).arg(plugin));
    let out = sdt.ok(&[
        "run",
        "--break",
        "cbrt@2,100",
        "--break",
        "libloaded:plugin_step@1,3",
        "--",
        prog.to_str().unwrap(),
        plugin,
    ]);
    // The child exited as it does alone (it died of SIGTRAP when it kept the int3s).
    assert!(stdout(&plain).ends_with("child exited 4\n"), "{}", stdout(&plain));
    assert_eq!(stdout(&out), stdout(&plain), "{}", describe(&out));
    let snaps = sdt.snapshots();
    let got: Vec<(String, i64, i64)> = snaps
        .iter()
        .map(|s| (s["attrs"].as_str().unwrap().to_owned(), int(s, "id").unwrap(), int(s, "hit").unwrap()))
        .collect();
    let want = [("cbrt", 1, 2), ("cbrt", 1, 100), ("plugin_step", 2, 1), ("plugin_step", 2, 3)]
        .map(|(f, id, hit)| (format!("symbol={f}"), id, hit));
    // cbrt's 100th call is the program's last: every arrival was counted, in both
    // threads, and the child's call is not the program's.
    assert_eq!(got, want, "{}", describe(&out));

    // The third step is the first after the reload: gdb finds the library again in the
    // snapshot, the thread at its entry, x in rdi (3 * (3 * 1 + 1) + 1).
    let core = sdt.core(snaps[3]["name"].as_str().unwrap());
    let shown = gdb(&prog, &core, &["bt 2", "x/1i $pc", "print $rdi"]);
    assert!(shown.contains("#0  plugin_step (x="), "{shown}");
    assert!(shown.contains("in steps (path="), "{shown}");
    assert!(shown.contains("$1 = 13\n"), "{shown}");
    assert!(!shown.contains("int3"), "{shown}");

    // A library the program never loads: nothing placed, the run untouched, and said.
    let out = sdt.ok(&["run", "--break", "libnothing:f", "--", prog.to_str().unwrap(), plugin]);
    assert_eq!(stdout(&out), stdout(&plain), "{}", describe(&out));
    assert!(
        stderr(&out).contains("--break libnothing:f: the program never loaded a library libnothing"),
        "{}",
        describe(&out)
    );
    // A function the library lacks: said when it loads.
    let out = sdt.ok(&["run", "--break", "libloaded.so:no_step", "--", prog.to_str().unwrap(), plugin]);
    assert!(
        stderr(&out).contains(&format!(
            "--break libloaded.so:no_step: {plugin} was loaded but defines no such function"
        )),
        "{}",
        describe(&out)
    );
    // Without `LIB:`, a function of a library loaded later is not looked for.
    let out = sdt.output(&["run", "--break", "plugin_step", "--", prog.to_str().unwrap(), plugin]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("--break LIB:plugin_step"), "{}", describe(&out));
}

/// `sdt run --break B …` of `prog`, which prints what it prints alone: the run's
/// snapshots, and their (attrs, hit) sorted.
fn run_with_breaks(sdt: &Sdt, prog: &Path, breaks: &[&str]) -> (Vec<serde_json::Value>, Vec<(String, i64)>) {
    let plain = run(&mut std::process::Command::new(prog));
    let mut args = vec!["run"];
    breaks.iter().for_each(|b| args.extend(["--break", b]));
    args.extend(["--", prog.to_str().unwrap()]);
    let out = sdt.ok(&args);
    assert_eq!(stdout(&out), stdout(&plain), "{}", describe(&out));
    let snaps = sdt.snapshots();
    let mut got: Vec<(String, i64)> =
        snaps.iter().map(|s| (s["attrs"].as_str().unwrap().to_owned(), int(s, "hit").unwrap())).collect();
    got.sort();
    (snaps, got)
}

/// C++ functions named as the source names them: `Klass::method` (demangled, without
/// parameters), an overload with its parameters, and an ambiguous name refused with the
/// candidates.
fn cpp_functions_by_their_source_names() -> Result<(), Skip> {
    let prog = cpp_program("klass")?;
    let sdt = Sdt::new();
    let (snaps, got) = run_with_breaks(&sdt, &prog, &["Klass::method@3", "Klass::scale(double)@1"]);
    assert_eq!(got, [("symbol=Klass::method".to_owned(), 3), ("symbol=Klass::scale(double)".to_owned(), 1)]);

    // gdb shows the thread in the method, its third call, where its body starts: past the
    // prologue that stores x (in rsi at the entry), so that gdb shows x as 2 and not what
    // the stack held before.
    let at_method = snaps.iter().find(|s| s["attrs"] == "symbol=Klass::method").unwrap();
    let core = sdt.core(at_method["name"].as_str().unwrap());
    let shown = gdb(&prog, &core, &["bt 1", "print x", "print $pc > (long)&'Klass::method(long)'"]);
    assert!(shown.contains("#0  Klass::method (this=") && shown.contains(", x=2) at "), "{shown}");
    assert!(shown.contains("$1 = 2\n"), "{shown}");
    assert!(shown.contains("$2 = true\n"), "{shown}");

    let refused = sdt.output(&["run", "--break", "Klass::scale", "--", prog.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1), "{}", describe(&refused));
    assert!(
        stderr(&refused).contains(
            "--break Klass::scale is ambiguous: the program has 2 functions of that name: \
             Klass::scale(double), Klass::scale(int); name one as listed"
        ),
        "{}",
        describe(&refused)
    );
    let unknown = sdt.output(&["run", "--break", "method", "--", prog.to_str().unwrap()]);
    assert!(stderr(&unknown).contains("(did you mean Klass::method?)"), "{}", describe(&unknown));
    Ok(())
}

/// Fortran procedures named as the source names them, in any case: a module procedure
/// (`solver::relax`, gfortran's `__solver_MOD_relax`) and an external one (`Report`,
/// gfortran's `report_`); gdb shows the thread in the module procedure, its second
/// call, with its arguments.
fn fortran_procedures_by_their_source_names() -> Result<(), Skip> {
    let prog = fortran_program("heat")?;
    let sdt = Sdt::new();
    let (snaps, got) = run_with_breaks(&sdt, &prog, &["solver::relax@2", "Report@3"]);
    assert_eq!(got, [("symbol=Report".to_owned(), 3), ("symbol=solver::relax".to_owned(), 2)]);
    let at_relax = snaps.iter().find(|s| s["attrs"] == "symbol=solver::relax").unwrap();
    let core = sdt.core(at_relax["name"].as_str().unwrap());
    let shown = gdb(&prog, &core, &["bt 1", "print n", "print sweeps"]);
    assert!(shown.contains("#0  solver::relax ("), "{shown}");
    assert!(shown.contains("$1 = 100\n"), "{shown}");
    assert!(shown.contains("$2 = 100\n"), "{shown}");
    Ok(())
}

sdt_test_harness::tests![
    fortran_procedures_by_their_source_names,
    function_entries_capture_the_arrivals_asked_for,
    break_errors_name_the_problem,
    library_functions_by_name_and_through_a_reload,
    cpp_functions_by_their_source_names,
];
