//! The QEMU guest harness (`scripts/guest/`): Debian's 6.1 kernel boots, runs our programs,
//! loads an out-of-tree module, and CRIU dumps and restores a process in it; and the
//! harness fails loudly when the kernel warns, the guest hangs or the script kills it.
//!
//! Reported ignored where `qemu-system-x86_64` is not installed; `scripts/guest/prepare`
//! installs it.

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sdt_test_harness::Skip;

use crate::harness::{describe, program, stderr, stdout, wait_within};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// `Ok` if `qemu-system-x86_64` is on PATH; otherwise the [`Skip`] saying so.
pub fn have_qemu() -> Result<(), Skip> {
    let found = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join("qemu-system-x86_64").is_file()))
        .unwrap_or(false);
    if !found {
        let why = "qemu-system-x86_64 is not installed";
        return Err(Skip::new("qemu-system-x86_64", why, "scripts/guest/prepare installs it"));
    }
    Ok(())
}

/// Runs `scripts/guest/prepare` and returns the variables it prints.
pub fn prepare() -> HashMap<String, String> {
    let out = Command::new(workspace().join("scripts/guest/prepare"))
        .output()
        .expect("running scripts/guest/prepare");
    assert!(out.status.success(), "scripts/guest/prepare failed: {}", describe(&out));
    stdout(&out)
        .lines()
        .filter_map(|l| l.split_once('='))
        // printf %q quoting: only backslash escapes for our paths.
        .map(|(k, v)| (k.to_owned(), v.replace('\\', "")))
        .collect()
}

/// `scripts/guest/run ARGS -- SCRIPT` with SCRIPT's text written to a temporary file,
/// given as long as its own `--timeout` (120 s unless ARGS say) and time to say so: the
/// emulated guest runs several times slower while other tests keep the CPUs busy.
pub fn guest(args: &[&str], script: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guest.sh");
    std::fs::write(&path, script).unwrap();
    let limit = args.windows(2).find(|w| w[0] == "--timeout").map_or(120, |w| w[1].parse().unwrap());
    // Its own process group, which a timeout kills whole: QEMU with it.
    let child = Command::new(workspace().join("scripts/guest/run"))
        .args(args)
        .arg("--")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawning scripts/guest/run");
    wait_within(child, Duration::from_secs(limit + 30), "(the guest's run)")
}

/// The text after `GUEST <key> ` in the guest's output.
pub fn field<'a>(out: &'a str, key: &str) -> &'a str {
    let prefix = format!("GUEST {key} ");
    out.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no '{prefix}' line in the guest's output:\n{out}"))
}

/// `key=value` pairs of a result line, as numbers.
pub fn numbers(line: &str) -> HashMap<&str, u64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k, v.parse().unwrap_or_else(|_| panic!("{k}={v} is not a number in '{line}'"))))
        .collect()
}

const SMOKE_SCRIPT: &str = r#"
echo "GUEST uname $(uname -r)"

states; echo "GUEST states rc=$?"

echo "GUEST module loaded=$(cat /sys/module/sdt_guest_hello/initstate)"
echo "GUEST module-log $(dmesg | grep -o 'sdt_guest_hello: loaded.*')"

criu check >/tmp/check.out 2>&1; rc=$?
echo "GUEST criu-check rc=$rc verdict: $(tail -n 1 /tmp/check.out)"
[ $rc = 0 ] || cat /tmp/check.out

setsid counter /tmp/counter.out </dev/null >/dev/null 2>&1 &
sleep 2
pid=$(sed -n 's/.* pid=//p' /tmp/counter.out)
mkdir /tmp/img
criu dump -t "$pid" -D /tmp/img -o dump.log; rc=$?
echo "GUEST criu-dump rc=$rc"
[ $rc = 0 ] || grep -E 'Error|Warn' /tmp/img/dump.log | tail -n 20
dumped=$(cut -d' ' -f1 /tmp/counter.out)
alive=0; [ -d "/proc/$pid" ] && alive=1
sleep 0.5
frozen=$(cut -d' ' -f1 /tmp/counter.out)
criu restore -d -D /tmp/img -o restore.log; rc=$?
echo "GUEST criu-restore rc=$rc"
[ $rc = 0 ] || grep -E 'Error|Warn' /tmp/img/restore.log | tail -n 20
restored=$(cut -d' ' -f1 /tmp/counter.out)
sleep 1
later=$(cut -d' ' -f1 /tmp/counter.out)
echo "GUEST counter pid=$pid dumped=$dumped alive_after_dump=$alive frozen=$frozen restored=$restored later=$later restored_pid=$(sed -n 's/.* pid=//p' /tmp/counter.out)"
kill "$pid"
exit 7
"#;

fn guest_boots_6_1_runs_programs_loads_module_and_criu_restores() -> Result<(), Skip> {
    have_qemu()?;
    let states = program("states");
    let counter = program("counter");
    let vars = prepare();
    let hello = &vars["GUEST_HELLO_KO"];
    let kver = &vars["GUEST_KVER"];
    let started = std::time::Instant::now();
    let out = guest(
        &[
            "--timeout",
            "100",
            "--module",
            hello,
            "--file",
            states.to_str().unwrap(),
            "--file",
            counter.to_str().unwrap(),
        ],
        SMOKE_SCRIPT,
    );
    let text = stdout(&out);
    let all = describe(&out);
    eprintln!("guest run took {:.1}s", started.elapsed().as_secs_f64());

    // The harness hands back the script's own exit status.
    assert_eq!(out.status.code(), Some(7), "{all}");
    assert!(text.contains("SDT-GUEST-EXIT 7\n"), "{all}");

    // (a) Debian's 6.1 kernel, the one prepare fetched.
    let uname = field(&text, "uname");
    assert!(
        uname.starts_with("6.1.0-") && uname.ends_with("-amd64") && uname == kver,
        "{uname} vs {kver}\n{all}"
    );

    // (b) A dynamically linked test program (libsdt.a inside, libc from here) runs.
    assert!(text.contains("bp 1: result -1\n") && text.contains("bp 2: result -1\n"), "{all}");
    assert!(text.contains("done: tls_value=100\n"), "{all}");
    assert_eq!(field(&text, "states"), "rc=0", "{all}");

    // The module built against the unpacked headers loads.
    assert_eq!(field(&text, "module"), "loaded=live", "{all}");
    assert_eq!(field(&text, "module-log"), "sdt_guest_hello: loaded, 4 CPUs online", "{all}");

    // (c) CRIU is content with this kernel.
    let check = field(&text, "criu-check");
    assert!(check.starts_with("rc=0 ") && check.ends_with("Looks good."), "{check}\n{all}");

    // (d) Dump kills the counter; restore brings it back with its count and pid, counting on.
    assert_eq!(field(&text, "criu-dump"), "rc=0", "{all}");
    assert_eq!(field(&text, "criu-restore"), "rc=0", "{all}");
    let n = numbers(field(&text, "counter"));
    assert!(n["dumped"] >= 10, "ran ~2 s before the dump: {n:?}\n{all}");
    assert_eq!(n["alive_after_dump"], 0, "{n:?}");
    assert_eq!(n["frozen"], n["dumped"], "nothing counted between dump and restore: {n:?}");
    assert!(n["restored"] >= n["dumped"], "restored from the dump, not started afresh: {n:?}\n{all}");
    assert!(n["later"] > n["restored"], "the restored process counts on: {n:?}\n{all}");
    assert_eq!(n["restored_pid"], n["pid"], "{n:?}");
    Ok(())
}

fn guest_run_fails_on_a_kernel_warning() -> Result<(), Skip> {
    have_qemu()?;
    let vars = prepare();
    let hello = format!("{}:/root/hello.ko", vars["GUEST_HELLO_KO"]);
    let out = guest(
        &["--timeout", "100", "--cpus", "1", "--file", &hello],
        // (sleep: lets the splat finish on the console before our line, which it could split)
        "insmod /root/hello.ko warn=1; rc=$?; sleep 1; echo \"GUEST insmod rc=$rc\"\nexit 0\n",
    );
    let all = describe(&out);
    // The script succeeded, but the kernel warned: the run fails.
    assert!(stdout(&out).contains("GUEST insmod rc=0\n"), "{all}");
    assert_eq!(out.status.code(), Some(125), "{all}");
    let err = stderr(&out);
    assert!(err.contains("the kernel log shows a problem") && err.contains("WARNING:"), "{all}");
    assert!(err.contains("last 40 lines of the console"), "{all}");
    Ok(())
}

fn guest_run_fails_on_timeout_and_on_a_missing_exit_line() -> Result<(), Skip> {
    have_qemu()?;
    prepare();
    let out = guest(&["--timeout", "2", "--cpus", "1"], "exit 0\n");
    assert_eq!(out.status.code(), Some(124), "{}", describe(&out));
    assert!(stderr(&out).contains("timed out after 2s"), "{}", describe(&out));

    let out = guest(
        &["--timeout", "100", "--cpus", "1"],
        "echo GUEST going down\nsleep 0.5\npoweroff -f\nsleep 10\n",
    );
    assert_eq!(out.status.code(), Some(125), "{}", describe(&out));
    assert!(stdout(&out).contains("GUEST going down\n"), "{}", describe(&out));
    assert!(stderr(&out).contains("without an SDT-GUEST-EXIT line"), "{}", describe(&out));
    Ok(())
}

sdt_test_harness::tests![
    guest_boots_6_1_runs_programs_loads_module_and_criu_restores,
    guest_run_fails_on_a_kernel_warning,
    guest_run_fails_on_timeout_and_on_a_missing_exit_line,
];
