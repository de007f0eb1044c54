//! Bad input: a one-line error naming the problem, and a non-zero exit.

use crate::harness::{Sdt, config, program, stderr};

/// Runs `sdt ARGS`, expects failure with one error line containing `needle`.
fn fails_with(sdt: &Sdt, args: &[&str], needle: &str) {
    let out = sdt.output(args);
    assert_eq!(out.status.code(), Some(1), "sdt {args:?}: {}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line for sdt {args:?}:\n{err}");
    assert!(
        lines[0].starts_with("sdt: error: ") && lines[0].contains(needle),
        "sdt {args:?}: want {needle:?} in\n{err}"
    );
}

#[test]
fn missing_program() {
    let sdt = Sdt::new();
    fails_with(&sdt, &["run", "--", "./no-such-program"], "program not found: ./no-such-program");
    fails_with(
        &sdt,
        &["run", "--", "no-such-program-in-path"],
        "program not found: no-such-program-in-path (looked in PATH)",
    );
    assert!(!sdt.store().join("runs").exists(), "no run is created for a program that cannot start");
}

#[test]
fn program_not_executable() {
    let sdt = Sdt::new();
    let file = sdt.dir.path().join("data.txt");
    std::fs::write(&file, "not a program").unwrap();
    fails_with(&sdt, &["run", "--", file.to_str().unwrap()], "is not executable");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fails_with(&sdt, &["run", "--", file.to_str().unwrap()], "cannot execute");
}

#[test]
fn bad_config() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let cfg = config(&sdt, "max_level = 2\nclasses = [1, \"two\"]\n");
    fails_with(
        &sdt,
        &["run", "-c", &cfg, "--", prog.to_str().unwrap(), "exit", "0"],
        "line 2, key `classes[1]`",
    );
    let cfg = config(&sdt, "max_levle = 2\n");
    fails_with(
        &sdt,
        &["run", "-c", &cfg, "--", prog.to_str().unwrap(), "exit", "0"],
        "line 1, key `max_levle`: unknown field `max_levle`",
    );
    fails_with(
        &sdt,
        &["run", "-c", "/no/such/config.toml", "--", prog.to_str().unwrap()],
        "cannot read capture config /no/such/config.toml",
    );
}

#[test]
fn empty_or_missing_store_and_unknown_names() {
    let sdt = Sdt::new();
    fails_with(&sdt, &["ls"], "no SDT store at");
    std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
        .create(sdt.store())
        .unwrap();
    fails_with(&sdt, &["ls"], "holds no runs yet");
    let prog = program("behave");
    sdt.ok(&["run", "-q", "--", prog.to_str().unwrap(), "exit", "0"]);
    fails_with(&sdt, &["show", "S9"], "no snapshot S9 in run 1 (snapshots: S0)");
    fails_with(&sdt, &["export", "core", "S3", "-o", "x.core"], "no snapshot S3");
    fails_with(&sdt, &["ls", "--run", "7"], "no run 7");
}
