//! Bad input: a one-line error naming the problem, and a non-zero exit.

use sdt_test_harness::Skip;

use crate::harness::{Sdt, config, program, stderr, stdout};

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

fn program_not_executable() {
    let sdt = Sdt::new();
    let file = sdt.dir.path().join("data.txt");
    std::fs::write(&file, "not a program").unwrap();
    fails_with(&sdt, &["run", "--", file.to_str().unwrap()], "is not executable");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    fails_with(&sdt, &["run", "--", file.to_str().unwrap()], "neither a program nor a script with a #! line");
    // execve says "No such file or directory" of a file that is there: the error names
    // what is missing.
    std::fs::write(&file, "#!/no/such/interpreter -x\necho hi\n").unwrap();
    fails_with(&sdt, &["run", "--", file.to_str().unwrap()], "its #! line names \"/no/such/interpreter\"");
    let mut elf = std::fs::read("/bin/true").unwrap();
    let loader = elf.windows(10).position(|w| w == b"/lib64/ld-").expect("/bin/true names its loader");
    elf[loader + 1..loader + 6].copy_from_slice(b"nope/");
    std::fs::write(&file, elf).unwrap();
    fails_with(&sdt, &["run", "--", file.to_str().unwrap()], "its dynamic loader \"/nope/");
}

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

fn configs_that_cannot_mean_anything_are_refused() {
    let sdt = Sdt::new();
    let prog = program("behave");
    let run = |cfg: &str, needle: &str| {
        fails_with(&sdt, &["run", "-c", cfg, "--", prog.to_str().unwrap(), "exit", "0"], needle)
    };
    for (text, needle) in [
        ("max_level = -1\n", "line 1, key `max_level`: `-1`: levels are 0 to 2147483647"),
        ("# classes\nclasses = [-1]\n", "line 2, key `classes[0]`: `-1`: classes are 0 to 2147483647"),
        ("[attrs]\nphase = \"[x\"\n", "line 2, key `attrs.phase`: `[x` is not a usable glob"),
        ("[attrs]\n\"\" = \"x\"\n", "line 2, key `attrs.\"\"`: `` cannot name an attribute"),
        ("hits = [0]\n", "line 1, key `hits[0]`: `0`: hits count from 1"),
    ] {
        run(&config(&sdt, text), needle);
    }
    // Reading them would never end.
    run("/dev/zero", "capture config /dev/zero is a character device, not a regular file");
    let fifo = sdt.dir.path().join("fifo.toml");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    run(fifo.to_str().unwrap(), "is a FIFO, not a regular file");
    let big = sdt.dir.path().join("big.toml");
    std::fs::File::create(&big).unwrap().set_len(2 << 20).unwrap();
    run(big.to_str().unwrap(), "is too large (2097152 bytes; a capture config is at most 1 MiB)");
    fails_with(
        &sdt,
        &["run", "--break", "main@0", "--", prog.to_str().unwrap(), "exit", "0"],
        "--break main@0: `0`: hits count from 1",
    );
    assert!(!sdt.store().join("runs").exists(), "no run is created for a refused config");
}

fn a_store_we_may_not_write_is_named_not_blamed_on_ptrace() -> Result<(), Skip> {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    sdt_test_harness::root("running sdt as uid 1001 needs root")?;
    let sdt = Sdt::new();
    std::fs::set_permissions(sdt.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Root's, so not writable by uid 1001 (root would bypass the check).
    let store = sdt.dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = program("behave");
    // The store, and a store to be made in it.
    let new = store.join("new");
    for at in [&store, &new] {
        let args = ["run", "--store", at.to_str().unwrap(), "--", prog.to_str().unwrap(), "exit", "0"];
        let mut cmd = sdt.command(&args);
        cmd.uid(1001).gid(1001);
        let out = crate::harness::run(cmd.stdin(std::process::Stdio::null()));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("sdt: hint: permission denied on {}:", store.display())),
            "{args:?}: {err}"
        );
        assert!(!err.contains("ptrace"), "{args:?}: {err}");
    }
    Ok(())
}

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
    // A run's number alone names it, as `sdt runs` lists it.
    sdt.output(&["run", "-q", "--", prog.to_str().unwrap(), "exit", "3"]);
    fails_with(&sdt, &["ls", "7"], "no run 7");
    let first = stdout(&sdt.ok(&["ls", "1"]));
    assert!(first.starts_with("run 1: ") && first.contains("behave exit 0 — exited 0"), "{first}");
    assert!(stdout(&sdt.ok(&["ls"])).starts_with("run 2: "));
}

sdt_test_harness::tests![
    missing_program,
    program_not_executable,
    bad_config,
    configs_that_cannot_mean_anything_are_refused,
    a_store_we_may_not_write_is_named_not_blamed_on_ptrace,
    empty_or_missing_store_and_unknown_names,
];
