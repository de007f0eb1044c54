//! `sdt export criu`, checked by CRIU itself: `crit` decodes every image of a real
//! snapshot and encodes it back to the same bytes; in the QEMU guest (Debian's 6.1 kernel,
//! where Debian's CRIU runs), `criu restore` resumes the exported snapshot of
//! `rounds.c`, and the restored process prints exactly what the original printed from
//! that snapshot on; shared memory resumes holding what it held.
//!
//! The crit test is reported ignored where `crit` is missing, the guest tests where
//! `qemu-system-x86_64` is (or, after the guest's checks, `crit`); `.ci/run` installs both.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};

use sdt_test_harness::Skip;
use serde_json::Value;

use crate::guest::{field, guest, have_qemu};
use crate::harness::{Sdt, describe, program, run, stderr, wait_with_timeout};

/// Rounds of `rounds.c`, and the round whose breakpoint takes S0.
const ROUNDS: u32 = 40;
const BP_ROUND: u32 = 10;

/// `Ok` if `crit` runs; otherwise the [`Skip`] saying so.
pub fn have_crit() -> Result<(), Skip> {
    let found = Command::new("crit").arg("--help").output().is_ok_and(|o| o.status.success());
    if !found {
        return Err(Skip::new("crit", "crit is not installed", "apt-get install criu"));
    }
    Ok(())
}

/// Decodes every image in `dir` with `crit decode`, checks that `crit encode` gives the
/// same bytes back, and returns the decoded images by file name. Raw page images, which
/// crit does not decode, are checked for size against the pagemaps instead `with_pages`.
fn crit_roundtrip(dir: &Path, with_pages: bool) -> HashMap<String, Value> {
    let scratch = tempfile::tempdir().unwrap();
    let mut decoded: HashMap<String, Value> = HashMap::new();
    let mut page_bytes = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if name.starts_with("pages-") {
            page_bytes += std::fs::metadata(&path).unwrap().len();
            continue;
        }
        if !name.ends_with(".img") {
            continue; // logs
        }
        let json = scratch.path().join(format!("{name}.json"));
        let again = scratch.path().join(&name);
        for (what, from, to) in [("decode", &path, &json), ("encode", &json, &again)] {
            let out = run(Command::new("crit").args([what, "-i"]).arg(from).arg("-o").arg(to));
            assert!(out.status.success(), "crit {what} {name}: {}", describe(&out));
        }
        let original = std::fs::read(&path).unwrap();
        assert!(std::fs::read(&again).unwrap() == original, "crit encodes {name} back to other bytes");
        decoded.insert(name, serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap());
    }
    let pages: u64 = decoded
        .iter()
        .filter(|(name, _)| name.starts_with("pagemap-"))
        .flat_map(|(_, image)| image["entries"].as_array().unwrap().iter().skip(1))
        .map(|e| e["nr_pages"].as_u64().unwrap())
        .sum();
    if with_pages {
        assert_eq!(page_bytes, pages * 4096, "pages-1.img holds the pages the pagemap lists");
    }
    decoded
}

/// The one entry of a single-entry image.
fn entry<'a>(images: &'a HashMap<String, Value>, name: &str) -> &'a Value {
    let image = images.get(name).unwrap_or_else(|| panic!("no {name} among {:?}", images.keys()));
    &image["entries"][0]
}

fn crit_decodes_and_reencodes_the_images_of_a_real_snapshot() -> Result<(), Skip> {
    have_crit()?;
    let rounds = program("rounds");
    let sdt = Sdt::new();
    // Its stdout and stderr are files, as `criu restore` wants them.
    let file = |name: &str| std::fs::File::create(sdt.dir.path().join(name)).unwrap();
    let child = sdt
        .command(&["run", "-q", "--", rounds.to_str().unwrap(), "12", "5"])
        .stdin(Stdio::null())
        .stdout(file("out.txt"))
        .stderr(file("err.txt"))
        .spawn()
        .unwrap();
    let out = wait_with_timeout(child);
    assert!(out.status.success(), "{}", describe(&out));
    let dir = sdt.dir.path().join("img");
    let out = sdt.ok(&["export", "criu", "S0", "-o", dir.to_str().unwrap()]);
    let said = stderr(&out);
    assert!(said.contains("6 threads") && said.contains("criu restore -D"), "{said}");

    let images = crit_roundtrip(&dir, true);
    let pstree = entry(&images, "pstree.img");
    let pid = pstree["pid"].as_u64().unwrap();
    assert_eq!(pstree["threads"].as_array().unwrap().len(), 6, "{pstree}");
    assert_eq!(pstree["threads"][0].as_u64(), Some(pid), "the leader first: {pstree}");
    for tid in pstree["threads"].as_array().unwrap() {
        let core = entry(&images, &format!("core-{tid}.img"));
        let regs = &core["thread_info"]["gpregs"];
        assert_eq!(regs["mode"], "NATIVE", "{core}");
        // glibc's thread block, found at fs_base.
        let fs_base = regs["fs_base"].as_u64().unwrap();
        assert_eq!(core["thread_info"]["clear_tid_addr"].as_u64(), Some(fs_base + 0x2d0), "{core}");
        assert_eq!(core["thread_core"]["futex_rla_len"].as_u64(), Some(24), "{core}");
        assert_eq!(core["thread_core"]["creds"]["cap_bnd"].as_array().unwrap().len(), 2, "{core}");
    }
    let leader = entry(&images, &format!("core-{pid}.img"));
    assert_eq!(leader["tc"]["sigactions"].as_array().unwrap().len(), 62, "{leader}");
    let mm = entry(&images, &format!("mm-{pid}.img"));
    let rounds_path = rounds.to_str().unwrap();
    let files = &images["files.img"]["entries"];
    let exe = files.as_array().unwrap().iter().find(|f| f["id"] == mm["exe_file_id"]).unwrap();
    assert_eq!(exe["reg"]["name"].as_str(), Some(rounds_path), "{files}");
    let fds: Vec<u64> = images["fdinfo-2.img"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fd"].as_u64().unwrap())
        .collect();
    assert_eq!(fds, [0, 1, 2], "only stdio: rounds closes the rest");
    Ok(())
}

/// The guest's script: run `rounds` under `sdt run`, export S0, put its output file back
/// as it was at S0, `criu restore` the images, and compare the outputs. The images (but
/// pages) come back base64-encoded between `BEGIN-IMG` and `END-IMG`. Then the same with
/// stdout a pipe, from a timed snapshot, and with stdout the console.
fn restore_script() -> String {
    let lines_at_s0 = 1 + BP_ROUND; // the header and rounds 0 .. BP_ROUND-1
    let after_s0 = lines_at_s0 + 1;
    format!(
        r#"
cd /root
sdt run -q -- rounds {ROUNDS} {BP_ROUND} >/tmp/out.txt 2>/tmp/err.txt </dev/null; echo "GUEST run rc=$?"
cp /tmp/out.txt /tmp/orig.txt
sdt export criu S0 -o /tmp/img 2>/tmp/export.txt; echo "GUEST export rc=$?"
sed 's/^/GUEST said /' /tmp/export.txt
head -n {lines_at_s0} /tmp/orig.txt >/tmp/out.txt
criu restore -D /tmp/img --shell-job -v4 -o restore.log >/tmp/restore.txt 2>&1; echo "GUEST restore rc=$?"
sed 's/^/GUEST criu /' /tmp/restore.txt
grep -E 'Error|Warn' /tmp/img/restore.log | grep -v 'util.c:.*exited, status=1' | tail -n 20
cmp -s /tmp/out.txt /tmp/orig.txt; echo "GUEST same $?"
grep snapshot /tmp/out.txt | sed 's/^/GUEST line /'
diff /tmp/orig.txt /tmp/out.txt | head -n 20
mkdir /tmp/small && cp /tmp/img/*.img /tmp/small/ && rm /tmp/small/pages-*

# Stdout a pipe: criu hands its own stdout over (--inherit-fd).
sdt run -q -- rounds {ROUNDS} {BP_ROUND} 2>/tmp/err2.txt </dev/null | cat >/tmp/orig2.txt
sdt export criu S0 -o /tmp/img2 2>/tmp/export2.txt; echo "GUEST pipe-export rc=$?"
ino=$(sed -n 's/.*fd 1 is pipe:\[\([0-9]*\)\].*/\1/p' /tmp/export2.txt)
{{ criu restore -D /tmp/img2 --shell-job --inherit-fd "fd[1]:pipe:[$ino]" -o restore.log; echo $? >/tmp/rc2; }} | cat >/tmp/rest2.txt
echo "GUEST pipe-restore rc=$(cat /tmp/rc2)"
tail -n +{after_s0} /tmp/orig2.txt | cmp -s - /tmp/rest2.txt; echo "GUEST pipe-same $?"

# A timed snapshot, taken while rounds pauses before its rounds: the state word is found
# by symbol, and the restored process runs past both breakpoints.
printf 'every_ms = 300\nmax_snapshots = 1\n' >/tmp/timer.toml
sdt run -q --config /tmp/timer.toml -- rounds {ROUNDS} {BP_ROUND} 900 >/tmp/out4.txt 2>/tmp/err4.txt </dev/null
echo "GUEST timer-run rc=$?"
sdt ls | grep -c ' timer ' | sed 's/^/GUEST timer-snapshots /'
cp /tmp/out4.txt /tmp/orig4.txt
sdt export criu S0 -o /tmp/img4 2>/tmp/export4.txt; echo "GUEST timer-export rc=$?"
grep -c 'breakpoints are off' /tmp/export4.txt | sed 's/^/GUEST timer-off /'
head -n 1 /tmp/orig4.txt >/tmp/out4.txt
criu restore -D /tmp/img4 --shell-job -o restore.log; echo "GUEST timer-restore rc=$?"
# (The original's breakpoint answered that no snapshot was taken; the restored one is off.)
grep -v '(snapshot' /tmp/orig4.txt >/tmp/a4; grep -v '(snapshot' /tmp/out4.txt >/tmp/b4
cmp -s /tmp/a4 /tmp/b4; echo "GUEST timer-same $?"

# Stdout the console: reopened by path; both runs' lines show on it.
sdt run -q -- rounds {ROUNDS} {BP_ROUND} >/dev/console 2>/tmp/err3.txt </dev/null
sdt export criu S0 -o /tmp/img3 2>/dev/null; echo "GUEST tty-export rc=$?"
criu restore -D /tmp/img3 --shell-job -o restore.log; echo "GUEST tty-restore rc=$?"
echo BEGIN-IMG
tar czf - -C /tmp/small . | base64
echo END-IMG
"#
    )
}

/// Runs the script in a guest with `qemu_args`, checks the restored run, and returns
/// the images as crit decodes them.
fn restore_in_guest(qemu_args: &[&str]) -> Result<HashMap<String, Value>, Skip> {
    let rounds = program("rounds");
    let sdt_bin = env!("CARGO_BIN_EXE_sdt");
    let mut args = vec!["--timeout", "150", "--file", sdt_bin, "--file", rounds.to_str().unwrap()];
    for a in qemu_args {
        args.extend(["--qemu", a]);
    }
    let out = guest(&args, &restore_script());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert_eq!(field(&text, "run"), "rc=0", "{all}");
    assert_eq!(field(&text, "export"), "rc=0", "{all}");
    assert!(text.contains("GUEST said sdt: resume it with: criu restore -D /tmp/img --shell-job"), "{all}");
    assert_eq!(field(&text, "restore"), "rc=0", "{all}");
    assert_eq!(field(&text, "same"), "0", "the restored run printed something else:\n{all}");
    // The breakpoint that took S0 returned 0 in the restored process as in the original,
    // and the later one, past which it printed the rest, did not stop it.
    let line = field(&text, "line");
    assert!(line.starts_with(&format!("round {BP_ROUND}: ")) && line.contains(" (snapshot 0) sum "), "{all}");
    // A pipe on stdout, handed over by criu: the rest of the output goes through it.
    assert_eq!(field(&text, "pipe-export"), "rc=0", "{all}");
    assert_eq!(field(&text, "pipe-restore"), "rc=0", "{all}");
    assert_eq!(field(&text, "pipe-same"), "0", "{all}");
    // A timed snapshot: its restored process runs past both breakpoints to the end.
    assert_eq!(field(&text, "timer-run"), "rc=0", "{all}");
    assert_eq!(field(&text, "timer-snapshots"), "1", "{all}");
    assert_eq!(field(&text, "timer-export"), "rc=0", "{all}");
    assert_eq!(field(&text, "timer-off"), "1", "the state word was found by symbol: {all}");
    assert_eq!(field(&text, "timer-restore"), "rc=0", "{all}");
    assert_eq!(field(&text, "timer-same"), "0", "{all}");
    // The console on stdout: the last round shows twice, from the original and the
    // restored process.
    assert_eq!(field(&text, "tty-export"), "rc=0", "{all}");
    assert_eq!(field(&text, "tty-restore"), "rc=0", "{all}");
    let last = format!("round {}: ", ROUNDS - 1);
    assert_eq!(text.lines().filter(|l| l.starts_with(&last)).count(), 2, "{all}");

    let encoded: String =
        text.lines().skip_while(|l| *l != "BEGIN-IMG").skip(1).take_while(|l| *l != "END-IMG").collect();
    have_crit()?;
    let dir = tempfile::tempdir().unwrap();
    let tgz = dir.path().join("img.tgz");
    let mut decode = Command::new("base64");
    decode.arg("-d").stdin(Stdio::piped());
    let mut child = decode.stdout(std::fs::File::create(&tgz).unwrap()).spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), encoded.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "base64 -d of the guest's images");
    let out = run(Command::new("tar").arg("xzf").arg(&tgz).arg("-C").arg(dir.path()));
    assert!(out.status.success(), "{}", describe(&out));
    std::fs::remove_file(&tgz).unwrap();
    Ok(crit_roundtrip(dir.path(), false))
}

/// The leader's FPU state in its core image.
fn leader_fpregs(images: &HashMap<String, Value>) -> &Value {
    let pid = entry(images, "pstree.img")["pid"].as_u64().unwrap();
    &entry(images, &format!("core-{pid}.img"))["thread_info"]["fpregs"]
}

fn criu_restores_an_exported_snapshot_in_the_guest() -> Result<(), Skip> {
    have_qemu()?;
    // QEMU's default CPU has no XSAVE: the images carry the FXSAVE area alone.
    let images = restore_in_guest(&[])?;
    assert!(leader_fpregs(&images).get("xsave").is_none(), "{}", leader_fpregs(&images));
    Ok(())
}

fn criu_restores_an_exported_snapshot_with_xsave_state_in_the_guest() -> Result<(), Skip> {
    have_qemu()?;
    // QEMU's `max` CPU has XSAVE and AVX: the images carry the upper halves of the YMM
    // registers too.
    let images = restore_in_guest(&["-cpu", "max"])?;
    let fpregs = leader_fpregs(&images);
    assert_eq!(fpregs["xsave"]["ymmh_space"].as_array().map(Vec::len), Some(64), "{fpregs}");
    Ok(())
}

/// Shared memory resumes under `criu restore` with what it held, its views one memory:
/// a file of two shared views removed since the snapshot (in /tmp, and POSIX shared
/// memory in /dev/shm; as a JVM removes its `hsperfdata` file), a memfd mapped twice,
/// closed or held open (its descriptor reads what the views show), and shared anonymous
/// memory beside a memfd held open and mapped privately (`behave gone`, `behave views
/// [closed]`, `behave shared`). The export refused each ("a shared mapping of a file
/// changed since", "shared memory that is not a regular file", "a deleted file"). And
/// each thread's alternate signal stack is its own again (`behave altstack`).
fn criu_restores_shared_memory_in_the_guest() -> Result<(), Skip> {
    have_qemu()?;
    let behave = program("behave");
    let cases = [
        ("tmp", "gone /tmp/gone"),
        ("shm", "gone /dev/shm/gone"),
        ("memfd", "views closed"),
        ("memfd-fd", "views"),
        ("shared", "shared"),
        ("altstack", "altstack"),
    ];
    let mut script = String::from("cd /root\n");
    for (key, args) in cases {
        script.push_str(&format!(
            r#"
sdt run -q --store /tmp/st -- behave {args} >/tmp/out.txt 2>/tmp/err.txt </dev/null; echo "GUEST {key}-run rc=$? $(tr '\n' '|' </tmp/out.txt)"
sdt export criu --store /tmp/st S0 -o /tmp/img-{key} 2>/tmp/export.txt; echo "GUEST {key}-export rc=$?"
sed 's/^/GUEST said /' /tmp/export.txt
: >/tmp/out.txt
criu restore -D /tmp/img-{key} --shell-job -o restore.log >/tmp/restore.txt 2>&1; echo "GUEST {key}-restore rc=$?"
echo "GUEST {key}-printed $(tr '\n' '|' </tmp/out.txt)"
sed 's/^/GUEST criu /' /tmp/restore.txt; grep Error /tmp/img-{key}/restore.log | tail -n 5
rm -rf /tmp/st
"#
        ));
    }
    let args = ["--timeout", "150", "--file", env!("CARGO_BIN_EXE_sdt"), "--file", behave.to_str().unwrap()];
    let out = guest(&args, &script);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    let printed = [
        ("tmp", "view 2 other 2 page p"),
        ("shm", "view 2 other 2 page p"),
        ("memfd", "view y"),
        ("memfd-fd", "view y file y"),
        // (How much its shared memory grew differs.)
        ("shared", ", holds acpf"),
        (
            "altstack",
            "worker: stack same, flags same, handler on it|main: stack same, flags same, handler on it",
        ),
    ];
    for (key, expected) in printed {
        // Lines joined by '|'.
        let run = field(&text, &format!("{key}-run")).trim_end_matches('|');
        assert!(run.starts_with("rc=0 ") && run.ends_with(expected), "{key}: {all}");
        assert_eq!(field(&text, &format!("{key}-export")), "rc=0", "{all}");
        assert_eq!(field(&text, &format!("{key}-restore")), "rc=0", "{all}");
        let printed = field(&text, &format!("{key}-printed")).trim_end_matches('|');
        assert!(printed.ends_with(expected), "{key}: {all}");
    }
    Ok(())
}

sdt_test_harness::tests![
    crit_decodes_and_reencodes_the_images_of_a_real_snapshot,
    criu_restores_shared_memory_in_the_guest,
    criu_restores_an_exported_snapshot_in_the_guest,
    criu_restores_an_exported_snapshot_with_xsave_state_in_the_guest,
];
