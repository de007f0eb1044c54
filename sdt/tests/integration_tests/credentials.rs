//! `sdt restore` run by root on the snapshot of another user's program: the program
//! resumes with the credentials it had, thread by thread, and opens its files with them;
//! `--keep-root` opts out, loudly. A seccomp filter, which snapshots do not hold, is
//! refused unless `--without-seccomp` says to go on without it. A program that makes
//! itself non-dumpable closes its memory to an `sdt run` without `CAP_SYS_PTRACE`, which
//! says so once. A user other than root restores their own program in a user namespace
//! of its own, as themselves, and is refused a snapshot of other groups.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sdt_test_harness::Skip;
use serde_json::Value;

use crate::harness::{Sdt, User, describe, int, program, run, stderr, stdout};
use crate::restore::may_restore;

/// A directory anyone may enter, with `secret` (root's, 0600) and `kept` (0644) in it.
fn files() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = |name: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("the {name} file\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    let (secret, kept) = (file("secret", 0o600), file("kept", 0o644));
    (dir, secret, kept)
}

/// Runs `credentials drop SECRET KEPT` under `sdt run` as root: it drops to uid 1001
/// (real 1003) and takes snapshot S0.
fn run_as_user(sdt: &Sdt, secret: &Path, kept: &Path) -> String {
    let prog = program("credentials");
    let args = [prog.to_str().unwrap(), "drop", secret.to_str().unwrap(), kept.to_str().unwrap()];
    let out = sdt.ok(&[&["run", "-q", "--"], &args[..]].concat());
    stdout(&out)
}

fn a_program_restored_by_root_resumes_as_the_user_it_ran_as() -> Result<(), Skip> {
    may_restore()?;
    let (_dir, secret, kept) = files();
    let sdt = Sdt::new();
    let original = run_as_user(&sdt, &secret, &kept);
    // What the program had, so what the restored one must print again.
    for line in [
        "main: uid 1003 1001 1001 1001 gid 1001 1001 1001 1001 groups 1002 1004\n",
        "main: CapEff:\t0000000000000400\n",
        "main: CapAmb:\t0000000000000400\n",
        "main: NoNewPrivs:\t0\n",
        "threads in seccomp strict mode: 1\n",
        "worker: uid 1003 1003 1001 1003 gid 1001 1001 1001 1001 groups 1002 1004\n",
        "worker: NoNewPrivs:\t1\n",
        "dumpable 1\n",
        "kept: the kept file\n",
        "secret: EACCES\n",
    ] {
        assert!(original.contains(line), "{line:?} not in:\n{original}");
    }
    let bounding = original.lines().find_map(|l| l.strip_prefix("main: CapBnd:")).unwrap();
    let bounding = u64::from_str_radix(bounding.trim(), 16).unwrap();
    assert_eq!(bounding & 1 << 13, 0, "CAP_NET_RAW dropped: {bounding:#x}");

    // The snapshot recorded them: the process's, and the worker's that differ.
    let raw = sdt.ok(&["show", "--raw", "S0"]);
    let meta: Value = serde_json::from_slice(&raw.stdout).unwrap();
    let process = &meta["process"];
    let uids = &process["creds"]["uids"];
    assert_eq!((uids["real"].as_u64(), uids["effective"].as_u64()), (Some(1003), Some(1001)), "{process}");
    assert_eq!(process["creds"]["groups"], serde_json::json!([1002, 1004]), "{process}");
    assert_eq!(process["dumpable"], true, "{process}");
    let threads = process["thread_creds"].as_array().unwrap();
    assert_eq!(threads.len(), 2, "the worker and the strict thread: {process}");
    assert!(threads.iter().any(|t| t["creds"]["no_new_privs"] == true), "{process}");
    assert!(threads.iter().any(|t| t["creds"]["seccomp"] == "strict"), "{process}");

    let out = sdt.output(&["restore", "-q", "S0"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), original, "{}", describe(&out));
    // Capturing again (as `sdt refine` does, through the same code) changes nothing.
    let out = sdt.output(&["restore", "-q", "--every", "1000", "S0"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), original, "{}", describe(&out));

    // The kept file is opened again with the user's rights, not root's: once the user
    // may no longer read it, the restore says so rather than hand root's descriptor over.
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = sdt.output(&["restore", "-q", "S0"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains(&format!("opening file descriptor 3 ({})", kept.display()))
            && said.contains("Permission denied"),
        "{}",
        describe(&out)
    );
    Ok(())
}

fn keep_root_resumes_as_root_and_says_so() -> Result<(), Skip> {
    may_restore()?;
    let (_dir, secret, kept) = files();
    let sdt = Sdt::new();
    run_as_user(&sdt, &secret, &kept);
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = sdt.output(&["restore", "-q", "--keep-root", "S0"]);
    assert!(out.status.success(), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains("WARNING: --keep-root: S0 resumes with sdt's own credentials")
            && said.contains("not as the uid 1001 and gid 1001 it ran as"),
        "{}",
        describe(&out)
    );
    let printed = stdout(&out);
    for line in ["main: uid 0 0 0 0 gid 0 0 0 0 groups", "kept: the kept file\n", "secret: opened\n"] {
        assert!(printed.contains(line), "{line:?} not in:\n{}", describe(&out));
    }

    // Not with capturing restores, which always take the recorded credentials.
    let out = sdt.output(&["restore", "-q", "--keep-root", "--every", "100", "S0"]);
    assert!(
        !out.status.success() && stderr(&out).contains("not with --config or --every"),
        "{}",
        describe(&out)
    );
    Ok(())
}

fn a_seccomp_filter_is_refused_unless_the_restore_goes_on_without_it() -> Result<(), Skip> {
    may_restore()?;
    // noufd runs dirty under a seccomp filter (and no_new_privs, which filters need).
    let sdt = Sdt::new();
    let (noufd, dirty) = (program("noufd"), program("dirty"));
    sdt.ok(&["run", "-q", "--", noufd.to_str().unwrap(), dirty.to_str().unwrap(), "4", "10", "2"]);
    let out = sdt.output(&["restore", "-q", "S0"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains("seccomp filter: snapshots do not hold the filter")
            && said.contains("hint: `sdt restore --without-seccomp S0`"),
        "{}",
        describe(&out)
    );
    assert_eq!(stdout(&out), "", "nothing of the program ran: {}", describe(&out));

    let out = sdt.output(&["restore", "-q", "--without-seccomp", "S0"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("resume without it"), "{}", describe(&out));
    assert_eq!(stdout(&out), "dirty done\n", "{}", describe(&out));
    Ok(())
}

/// `undumpable` turns itself non-dumpable after breakpoint 1. Without `CAP_SYS_PTRACE`
/// nothing of it can be read after that: breakpoint 2 and the timed captures meanwhile
/// are refused, said once each, naming the cause and the way out, and the retries of the
/// timed captures wait their interval (they once came back to back, hundreds of times).
/// With it (root), both breakpoints are captured.
fn a_program_that_makes_itself_non_dumpable_is_said_to_be_closed() {
    let prog = program("undumpable");
    let sdt = Sdt::new();
    let args = ["run", "--every", "50", "--", prog.to_str().unwrap()];
    let out = run(sdt.command_without("sys_ptrace", &args).stdin(std::process::Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stdout(&out), "value grew result -3\n", "{}", describe(&out));
    let said = stderr(&out);
    let closed = said.matches("the program's memory is closed to sdt: it made itself non-dumpable").count();
    assert_eq!(closed, 1, "{}", describe(&out));
    let failed = said.matches("failed: process_vm_readv").count();
    assert!(failed <= 1, "{}", describe(&out));
    assert!(said.contains("run sdt as root, or give it CAP_SYS_PTRACE"), "{}", describe(&out));
    let ids: Vec<Option<i64>> = sdt.snapshots().iter().map(|s| int(s, "id")).collect();
    assert_eq!(ids.first(), Some(&Some(1)), "{}", describe(&out));
    assert!(!ids.contains(&Some(2)), "{ids:?}: {}", describe(&out));

    if sdt_test_harness::root("").is_ok() {
        let sdt = Sdt::new();
        let out = sdt.ok(&["run", "--", prog.to_str().unwrap()]);
        assert_eq!(stdout(&out), "value grew result 1\n", "{}", describe(&out));
        let ids: Vec<Option<i64>> = sdt.snapshots().iter().map(|s| int(s, "id")).collect();
        assert_eq!(ids, [Some(1), Some(2)]);
    }
}

/// uid 1001, in group 1001, as its supplementary group too: all the store's owner has
/// where uid 1001 has no account (the group of the directory it owns).
const USER: User = User { uid: 1001, gid: 1001, groups: &[1001] };

/// `Ok` if `user` may create a user namespace, and a PID namespace in it.
fn user_namespaces(sdt: &Sdt, user: &User) -> Result<(), Skip> {
    let probe =
        ["setpriv", &format!("--reuid={}", user.uid), &format!("--regid={}", user.gid), "--clear-groups"];
    let out = run(std::process::Command::new(probe[0])
        .args(&probe[1..])
        .args(["unshare", "--user", "--pid", "--fork", "true"])
        .current_dir(sdt.dir.path()));
    if out.status.success() {
        return Ok(());
    }
    Err(Skip::new(
        "user namespaces",
        format!("this system refuses users a user namespace: {}", stderr(&out).trim()),
        "allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone)",
    ))
}

/// A user restores their own program's snapshot without root: it resumes as that user,
/// with no capability, in a user namespace of its own that maps only the user's ids (so
/// root's files read as `nobody`'s there). Capturing it again works the same. A snapshot
/// of other supplementary groups than the restorer's is refused, naming both: the
/// namespace could neither give nor drop them.
fn a_user_restores_their_own_program_without_root() -> Result<(), Skip> {
    sdt_test_harness::root("becoming a user other than root for the test (setpriv) takes root")?;
    let sdt = Sdt::owned_by(&USER);
    user_namespaces(&sdt, &USER)?;
    let prog = sdt.copy_in(&program("behave"));
    let out =
        run(sdt.command_as(&USER, &["run", "-q", "--", prog.to_str().unwrap(), "ids"]).stdin(Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    let ids = "uid 1001 1001 1001 gid 1001 1001 1001 groups";
    assert_eq!(
        stdout(&out),
        format!("{ids} 1001 CapEff 0000000000000000 / owned by 0\n"),
        "{}",
        describe(&out)
    );

    let resumed = format!("{ids} 1001 CapEff 0000000000000000 / owned by 65534\n");
    let said = "it ran in a user namespace of its own (sdt had no CAP_SYS_ADMIN) with its breakpoints off";
    for args in [&["restore", "S0"][..], &["restore", "-q", "--every", "1000", "S0"]] {
        let out = run(sdt.command_as(&USER, args).stdin(Stdio::null()));
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
        assert_eq!(stdout(&out), resumed, "{args:?}: {}", describe(&out));
        assert_eq!(stderr(&out).contains(said), args.len() == 2, "{args:?}: {}", describe(&out));
    }

    // CRIU's images would need root to restore: the user is pointed at `sdt restore`.
    let out = run(sdt.command_as(&USER, &["export", "criu", "S0", "-o", "img"]).stdin(Stdio::null()));
    let said = "criu restore needs root (or CAP_CHECKPOINT_RESTORE); `sdt restore S0` resumes it without";
    assert!(out.status.success() && stderr(&out).contains(said), "{}", describe(&out));

    let out = run(sdt.command_as(&USER, &["restore", "--keep-root", "S0"]).stdin(Stdio::null()));
    let said = stderr(&out);
    assert!(
        !out.status.success()
            && said.contains("--keep-root resumes the program as root, and sdt runs as uid 1001")
            && !said.contains("WARNING"),
        "{}",
        describe(&out)
    );

    let other = User { groups: &[], ..USER };
    let out = run(sdt.command_as(&other, &["restore", "S0"]).stdin(Stdio::null()));
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains(
            "supplementary groups are [1001]: restoring without root gives a program only the restorer's own \
             (uid 1001, gid 1001, groups []); restore it as root"
        ),
        "{}",
        describe(&out)
    );
    Ok(())
}

/// A user's program whose stdout is a file in root's private directory (a redirection
/// made by root) is refused by the CRIU export, which names that descriptor and the permission error,
/// and nothing else: the store is the user's and readable (no hint to pass another).
fn a_descriptor_the_user_cannot_reach_is_named_without_a_store_hint() -> Result<(), Skip> {
    sdt_test_harness::root("becoming a user other than root for the test (setpriv) takes root")?;
    let sdt = Sdt::owned_by(&USER);
    let prog = sdt.copy_in(&program("behave"));
    let roots = tempfile::tempdir().unwrap();
    std::fs::set_permissions(roots.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let output = roots.path().join("output");
    // Root's shell makes it stdout, then becomes the user running sdt.
    let script = "exec >>\"$SDT_TEST_OUTPUT\" && exec setpriv --reuid=1001 --regid=1001 --groups=1001 -- \"$0\" \"$@\"";
    let args = ["run", "-q", "--", prog.to_str().unwrap(), "exit", "0"];
    let mut cmd = sdt.command_via_sdt(&["sh", "-c", script], &sdt.dir.path().join("sdt"), &args);
    let out = run(cmd.env("SDT_TEST_OUTPUT", &output).stdin(Stdio::null()));
    assert!(out.status.success(), "{}", describe(&out));
    let out = run(sdt.command_as(&USER, &["export", "criu", "S0", "-o", "img"]).stdin(Stdio::null()));
    let said = stderr(&out);
    let refused = format!("fd 1 ({}) is refused: `criu restore` would open it as root", output.display());
    assert!(
        !out.status.success() && said.contains(&refused) && said.contains("Permission denied"),
        "{}",
        describe(&out)
    );
    assert!(!said.contains("hint"), "{}", describe(&out));
    Ok(())
}

/// A user's sdt cannot open the files behind shared memory: `sdt doctor` says what that
/// costs.
fn doctor_tells_a_user_that_shared_memory_is_read_whole() -> Result<(), Skip> {
    sdt_test_harness::root("becoming a user other than root for the test (setpriv) takes root")?;
    let sdt = Sdt::owned_by(&USER);
    let out = run(&mut sdt.command_as(&USER, &["doctor"]));
    let text = stdout(&out);
    assert!(
        text.contains("--       shared memory   sdt cannot open /proc/PID/map_files")
            && text.contains("fix: for programs with large, sparse shared memory, run sdt as root"),
        "{}",
        describe(&out)
    );
    Ok(())
}

/// Where the system refuses user namespaces, a restore without `CAP_SYS_ADMIN` says so
/// and what decides it, and `sdt doctor` says restores cannot run.
fn a_restore_refused_a_user_namespace_says_so() -> Result<(), Skip> {
    let sdt = Sdt::new();
    let probe = run(std::process::Command::new("unshare").args(["--user", "--map-root-user", "true"]));
    if !probe.status.success() {
        let why = format!("this system refuses a user namespace: {}", stderr(&probe).trim());
        return Err(Skip::new(
            "user namespaces",
            why,
            "allow user namespaces (sysctl user.max_user_namespaces)",
        ));
    }
    let prog = program("behave");
    let ran = run(sdt
        .command_without_user_namespaces(&["run", "-q", "--", prog.to_str().unwrap(), "ids"])
        .stdin(Stdio::null()));
    assert!(ran.status.success() && stdout(&ran).contains("CapEff 0000000000000000"), "{}", describe(&ran));
    let out = run(sdt.command_without_user_namespaces(&["restore", "S0"]).stdin(Stdio::null()));
    assert!(!out.status.success(), "{}", describe(&out));
    let said = stderr(&out);
    assert!(
        said.contains(
            "restoring without root needs a user namespace of its own, which this system refused (`sysctl \
             user.max_user_namespaces`"
        ) && said.contains("No space left on device"),
        "{}",
        describe(&out)
    );
    let out = run(&mut sdt.command_without_user_namespaces(&["doctor"]));
    assert!(
        stdout(&out).contains("--       restore         sdt restore and sdt refine cannot run here"),
        "{}",
        describe(&out)
    );
    Ok(())
}

sdt_test_harness::tests![
    a_program_restored_by_root_resumes_as_the_user_it_ran_as,
    a_user_restores_their_own_program_without_root,
    a_restore_refused_a_user_namespace_says_so,
    doctor_tells_a_user_that_shared_memory_is_read_whole,
    a_descriptor_the_user_cannot_reach_is_named_without_a_store_hint,
    keep_root_resumes_as_root_and_says_so,
    a_seccomp_filter_is_refused_unless_the_restore_goes_on_without_it,
    a_program_that_makes_itself_non_dumpable_is_said_to_be_closed,
];
