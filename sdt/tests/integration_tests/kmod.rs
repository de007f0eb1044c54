//! The kernel module (`kmod/`) in the QEMU guest (`scripts/guest/`): built warning-free
//! against Debian's 6.1 headers, loaded into Debian's 6.1 kernel, and driving
//! `sdt run --backend kmod` on the spine's multithreaded programs; the same programs
//! under ptrace in the same boot give the same snapshots; a stress test, a program
//! killed mid-capture and a daemon killed mid-capture leave no thread held, no hung
//! task, no oops (`scripts/guest/run` fails on any), and the module unloads. A snapshot
//! the module took is exported for CRIU and restored.
//!
//! Reported ignored where `qemu-system-x86_64` is not installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sdt_test_harness::Skip;
use serde_json::Value;

use crate::guest::{field, guest, have_qemu, numbers, prepare};
use crate::harness::{describe, gdb, program, run, stdout, target_dir};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// Builds `kmod/` against the guest kernel's headers (once per test run), in a copy
/// under `target/guest/`, and checks that the build is warning-free. Returns `sdt.ko`.
fn module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let kdir = &prepare()["GUEST_KDIR"];
            let build = workspace().join("target/guest/kmod-build");
            std::fs::remove_dir_all(&build).ok();
            let out = run(Command::new("cp").arg("-r").arg(workspace().join("kmod")).arg(&build));
            assert!(out.status.success(), "copying kmod/: {}", describe(&out));
            // From scratch (the copy may hold objects of a `make -C kmod`), so that every
            // file is compiled and its warnings seen.
            let make = |target: &str| {
                run(Command::new("make")
                    .arg("-C")
                    .arg(&build)
                    .arg(format!("KDIR={kdir}"))
                    .arg("W=1")
                    .arg(target))
            };
            let out = make("clean");
            assert!(out.status.success(), "make clean: {}", describe(&out));
            let out = make("modules");
            let all = describe(&out);
            assert!(out.status.success(), "make -C kmod failed: {all}");
            for source in ["sdt_main", "sdt_capture", "sdt_filter"] {
                assert!(all.contains(&format!("/{source}.o\n")), "{source}.c was compiled: {all}");
            }
            let warnings: Vec<&str> = all
                .lines()
                .filter(|l| l.contains("warning:") && !l.contains("Skipping BTF generation"))
                .collect();
            assert!(warnings.is_empty(), "the module builds with warnings:\n{}", warnings.join("\n"));
            build.join("sdt.ko")
        })
        .clone()
}

/// `kmod/dkms.conf` builds the module: `dkms add` and `dkms build` in a private DKMS
/// tree, for Debian's 6.1 kernel from the headers the guest uses; the module is built
/// for that kernel, without warnings. (Installing and loading need that kernel running:
/// the guest tests load the module `make` builds.)
fn dkms_builds_the_module_for_debians_kernel() -> Result<(), Skip> {
    have_qemu()?;
    if Command::new("dkms").arg("--version").output().is_err() {
        return Err(Skip::new("dkms", "dkms is not installed", "apt-get install dkms"));
    }
    let vars = prepare();
    let (kver, kdir) = (&vars["GUEST_KVER"], &vars["GUEST_KDIR"]);
    let dir = tempfile::tempdir().unwrap();
    let version = std::fs::read_to_string(workspace().join("kmod/dkms.conf"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("PACKAGE_VERSION=\"")?.strip_suffix('"').map(str::to_owned))
        .expect("dkms.conf names its version");
    let (sources, tree) = (dir.path().join("src"), dir.path().join("tree"));
    std::fs::create_dir_all(&sources).unwrap();
    std::fs::create_dir_all(&tree).unwrap();
    let out = run(Command::new("cp")
        .arg("-r")
        .arg(workspace().join("kmod"))
        .arg(sources.join(format!("sdt-{version}"))));
    assert!(out.status.success(), "{}", describe(&out));
    let dkms = |args: &[&str]| {
        let out = run(Command::new("dkms")
            .args(args)
            .args(["-m", "sdt", "-v", &version, "--sourcetree"])
            .arg(&sources)
            .arg("--dkmstree")
            .arg(&tree));
        assert!(out.status.success(), "dkms {args:?}: {}", describe(&out));
    };
    dkms(&["add"]);
    dkms(&["build", "-k", kver, "--kernelsourcedir", kdir]);
    let built = tree.join(format!("sdt/{version}/{kver}/x86_64/module/sdt.ko"));
    let log =
        std::fs::read_to_string(tree.join(format!("sdt/{version}/{kver}/x86_64/log/make.log"))).unwrap();
    let warnings: Vec<&str> =
        log.lines().filter(|l| l.contains("warning:") && !l.contains("Skipping BTF generation")).collect();
    assert!(warnings.is_empty(), "dkms built with warnings:\n{}", warnings.join("\n"));
    let info = run(Command::new("modinfo").arg("-F").arg("vermagic").arg(&built));
    assert!(stdout(&info).starts_with(&format!("{kver} ")), "{}", describe(&info));
    Ok(())
}

/// The `scripts/guest/run` arguments for the module, `sdt` and these test programs.
fn guest_args(programs: &[&str]) -> Vec<String> {
    let mut args = vec!["--timeout".into(), "400".into(), "--memory".into(), "1G".into()];
    args.extend(["--module".into(), module().display().to_string()]);
    args.extend(["--file".into(), target_dir().join("sdt").display().to_string()]);
    for p in programs {
        args.extend(["--file".into(), program(p).display().to_string()]);
    }
    args
}

/// Shell helpers every script starts with: `st` prints /sys/class/misc/sdt/status on
/// one line (`sessions=0 capturing=0 …`), `stat NAME` one of its numbers, `wait_for NAME OP N` polls until
/// `stat NAME` satisfies `[ X OP N ]` (20 s at most), `run BACKEND NAME ARGS…` runs
/// `sdt run` into /tmp/BACKEND-NAME.sdt and keeps its output and `sdt ls --json` in
/// /tmp/out.
const PRELUDE: &str = r#"
cd /tmp
mkdir -p /tmp/out
st() { sed 's/ /=/' /sys/class/misc/sdt/status | tr '\n' ' '; }
stat() { sed -n "s/^$1 //p" /sys/class/misc/sdt/status; }
wait_for() {
    i=0
    while [ $i -lt 400 ]; do
        [ "$(stat $1)" $2 $3 ] && return 0
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}
run() {
    b=$1 n=$2
    shift 2
    sdt run --backend $b --store /tmp/$b-$n.sdt "$@" >/tmp/out/$b-$n.out 2>/tmp/out/$b-$n.err
    rc=$?
    sdt ls --json --store /tmp/$b-$n.sdt >/tmp/out/$b-$n.json 2>>/tmp/out/$b-$n.err
    echo "GUEST $b-$n rc=$rc"
}
echo "GUEST loaded $(st)"
"#;

const CAPTURE_SCRIPT: &str = r#"
for b in ptrace kmod; do
    run $b states -- states
    for s in S0 S1; do
        sdt export core --store /tmp/$b-states.sdt $s -o /tmp/out/$b-states-$s.core
        sdt show --raw --store /tmp/$b-states.sdt $s >/tmp/out/$b-states-$s.meta.json
    done
    run $b signals -- behave signals
    sdt show --raw --store /tmp/$b-signals.sdt S0 >/tmp/out/$b-signals-S0.meta.json
    run $b altstack -- behave altstack
    sdt show --raw --store /tmp/$b-altstack.sdt S0 >/tmp/out/$b-altstack-S0.meta.json
done

printf 'max_level = 2\nclasses = [1, 2]\nids = [1, "10-12"]\n[attrs]\nphase = "solve*"\n' >/tmp/filters.toml
run kmod filters -c /tmp/filters.toml -- breakpoints 1 1 1/1/1/1/phase=solve 3/1/1/1/phase=solve \
    1/3/1/1/phase=solve 1/1/5/1/phase=solve 2/2/11/1/iter=3,phase=solver 1/1/12/1/phase=setup 2/1/10/1
printf 'hits = [2, "4-5"]\n' >/tmp/hits.toml
run kmod hits -c /tmp/hits.toml -- breakpoints 1 6 1/1/1/1 1/1/2/1
run kmod mark -- breakpoints 4 3 1/1/1/0 1/1/2/1
printf 'max_snapshots = 2\nmax_level = 1\n' >/tmp/max.toml
run kmod max -c /tmp/max.toml -- breakpoints 1 5 1/1/1/1 2/1/1/1
printf 'max_snapshots = 20\n' >/tmp/churn.toml
run kmod churn --verify -c /tmp/churn.toml -- churn 20
run kmod timed --every 50 -- spin 1000
run kmod exit -- behave exit 7
run kmod segv -- behave segv
run kmod fork -- behave fork
run kmod leader --verify -- behave leader-exits
run kmod exec --verify -- behave exec
printf 'max_level = 1\n' >/tmp/level.toml
run kmod filtered -c /tmp/level.toml -- filtered 100000

# A snapshot the module took, exported for CRIU and restored: the restored process
# prints what the original printed from the snapshot on (the header and rounds 0-9 came
# before it).
sdt run -q --backend kmod --store /tmp/criu.sdt -- rounds 40 10 >/tmp/rounds.txt 2>/tmp/out/criu-run.err </dev/null
echo "GUEST criu-run rc=$?"
cp /tmp/rounds.txt /tmp/rounds-orig.txt
sdt export criu --store /tmp/criu.sdt S0 -o /tmp/img >/tmp/out/criu-export.txt 2>&1
echo "GUEST criu-export rc=$?"
head -n 11 /tmp/rounds-orig.txt >/tmp/rounds.txt
criu restore -D /tmp/img --shell-job -o restore.log >/tmp/out/criu-restore.txt 2>&1
echo "GUEST criu-restore rc=$?"
cmp -s /tmp/rounds.txt /tmp/rounds-orig.txt
echo "GUEST criu-same $?"
grep snapshot /tmp/rounds.txt | sed 's/^/GUEST criu-line /'
echo "GUEST status $(st)"
rmmod sdt
echo "GUEST rmmod rc=$?"
while [ ! -b /dev/vda ]; do sleep 0.1; done
tar cf /dev/vda -C /tmp out
echo "GUEST tar rc=$?"
"#;

/// The files the guest left in `/tmp/out`, unpacked from the virtio disk it wrote.
struct Out {
    dir: tempfile::TempDir,
}

impl Out {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join("out").join(name)
    }

    fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn json(&self, name: &str) -> Value {
        serde_json::from_str(&self.text(name)).unwrap_or_else(|e| panic!("{name}: {e}: {}", self.text(name)))
    }

    /// `sdt ls --json` of a run.
    fn snapshots(&self, run: &str) -> Vec<Value> {
        self.json(&format!("{run}.json")).as_array().unwrap().clone()
    }
}

fn int(v: &Value, key: &str) -> i64 {
    v[key].as_i64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// `(level, class, id)` of every snapshot.
fn triggers(snaps: &[Value]) -> Vec<(i64, i64, i64)> {
    snaps.iter().map(|s| (int(s, "level"), int(s, "class"), int(s, "id"))).collect()
}

/// General register `index` (of `struct user_regs_struct`) of a stored thread.
fn reg(thread: &Value, index: usize) -> i64 {
    let hex = thread["gpregs"].as_str().unwrap();
    let bytes: Vec<u8> =
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    i64::from_le_bytes(bytes[index * 8..index * 8 + 8].try_into().unwrap())
}

/// A snapshot's signal dispositions, less the handlers' addresses (which ASLR moves):
/// number, flags, mask, and whether there is a handler.
fn handlers(meta: &Value) -> Vec<String> {
    meta["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!("{} {} {} {}", s["signo"], s["flags"], s["mask"], s["handler"].as_u64().unwrap() > 1)
        })
        .collect()
}

const RAX: usize = 10;
const RESTART_SYSCALL: i64 = 219;
const CLOCK_NANOSLEEP: i64 = 230;
const ORIG_RAX: usize = 15;

/// What must be equal between the two backends' snapshot of `states`: the values gdb
/// prints, each thread's top function and TLS, the system calls the other threads
/// were stopped in, the mappings and open files.
fn comparable(out: &Out, backend: &str, snap: &str) -> BTreeMap<&'static str, Vec<String>> {
    let core = out.path(&format!("{backend}-states-{snap}.core"));
    let text = gdb(
        &program("states"),
        &core,
        &[
            "print counter_global",
            "print arr",
            "print message",
            "print origin",
            "info threads",
            "thread apply all -q print tls_value",
        ],
    );
    let mut values: Vec<String> =
        text.lines().filter_map(|l| l.split_once(" = ").map(|(_, v)| v.to_owned())).collect();
    let tls = values.split_off(4.min(values.len()));
    // `Thread 0x… (LWP 132) report (id=1) at states.c:90`, or without debug information
    // `… (LWP 135) 0x00007f… in read () from /lib/…`: the function.
    let mut tops: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_once("(LWP ").and_then(|(_, rest)| rest.split_once(") ")))
        .map(|(_, frame)| {
            let frame = if frame.starts_with("0x") {
                frame.split_once(" in ").map_or(frame, |(_, f)| f)
            } else {
                frame
            };
            frame.split([' ', '(']).next().unwrap_or("").to_owned()
        })
        .collect();
    tops.sort();
    let mut tls = tls;
    tls.sort();

    let meta = out.json(&format!("{backend}-states-{snap}.meta.json"));
    let breaking = meta["trigger"]["tid"].as_i64();
    let mut in_calls: Vec<String> = meta["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| Some(t["tid"].as_i64().unwrap()) != breaking && reg(t, ORIG_RAX) >= 0)
        .map(|t| {
            // A sleep interrupted by the capture before goes on in restart_syscall(2)
            // (219) until it ends: the same sleep, whichever backend interrupted it.
            let call = match reg(t, ORIG_RAX) {
                RESTART_SYSCALL => CLOCK_NANOSLEEP,
                call => call,
            };
            // A sleep may also have just ended (0) when the capture came: its result
            // depends on timing, not on the backend.
            if call == CLOCK_NANOSLEEP {
                return format!("syscall {call} (sleeping)");
            }
            format!("syscall {call} -> {}", reg(t, RAX))
        })
        .collect();
    in_calls.sort();
    let mappings: Vec<String> = meta["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{} {}", m["perms"], m["path"]))
        .collect();
    let mut files: Vec<String> = meta["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["target"] != "/dev/sdt")
        .map(|f| {
            // Our own output files are named after the backend; pipes get new inodes.
            let target = f["target"].as_str().unwrap().replace(backend, "B");
            let target = if target.starts_with("pipe:") { "pipe" } else { &target };
            format!("{} {target} {}", f["fd"], f["flags"])
        })
        .collect();
    files.sort();
    let threads = vec![meta["threads"].as_array().unwrap().len().to_string()];
    BTreeMap::from([
        ("signals", handlers(&meta)),
        ("gdb values", values),
        ("top frames", tops),
        ("tls", tls),
        ("blocked in", in_calls),
        ("mappings", mappings),
        ("files", files),
        ("threads", threads),
    ])
}

fn kmod_captures_what_ptrace_captures_in_the_guest() -> Result<(), Skip> {
    have_qemu()?;
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("out.img");
    std::fs::File::create(&disk).unwrap().set_len(512 << 20).unwrap();
    let mut args = guest_args(&["states", "behave", "breakpoints", "churn", "spin", "filtered", "rounds"]);
    for a in ["--kmod", "virtio_blk", "--kmod", "virtio_pci", "--qemu", "-drive", "--qemu"] {
        args.push(a.into());
    }
    args.push(format!("file={},format=raw,if=virtio", disk.display()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let out = guest(&args, &format!("{PRELUDE}{CAPTURE_SCRIPT}"));
    let text = stdout(&out);
    let all = describe(&out);
    eprintln!("kmod capture guest run took {:.1}s", started.elapsed().as_secs_f64());
    assert!(out.status.success(), "{all}");
    let loaded = format!("version={} sessions=0 ", sdt_abi::kmod::KMOD_VERSION);
    assert!(field(&text, "loaded").starts_with(&loaded), "{all}");
    assert_eq!(field(&text, "tar"), "rc=0", "{all}");
    let unpack = run(Command::new("tar").arg("xf").arg(&disk).arg("-C").arg(dir.path()));
    assert!(unpack.status.success(), "{}", describe(&unpack));
    let o = Out { dir };

    // The same program under both backends: the same snapshots.
    for b in ["ptrace", "kmod"] {
        assert_eq!(field(&text, &format!("{b}-states")), "rc=0", "{all}");
        assert_eq!(
            o.text(&format!("{b}-states.out")),
            "bp 1: counter_global=42 arr[5]=25 message=hello from states origin=3,4\nbp 1: result 0\n\
             bp 2: counter_global=4242 arr[5]=-7 message=changed between snapshots origin=3,40\nbp 2: result 1\n\
             done: tls_value=100\n"
        );
    }
    let (p, k) = (o.snapshots("ptrace-states"), o.snapshots("kmod-states"));
    assert_eq!(triggers(&p), [(1, 1, 1), (1, 1, 2)]);
    assert_eq!(triggers(&k), triggers(&p));
    for (ps, ks) in p.iter().zip(&k) {
        // (Not the page count: how many stack and heap pages are resident varies from
        // run to run under either backend.)
        for key in ["name", "hit", "attrs", "threads", "mode"] {
            assert_eq!(ps[key], ks[key], "{key}: ptrace {ps} kmod {ks}");
        }
        assert!(int(ks, "deviation_us") > 0 && int(ks, "deviation_us") <= int(ks, "pause_us"), "{ks}");
    }
    for snap in ["S0", "S1"] {
        let (pc, kc) = (comparable(&o, "ptrace", snap), comparable(&o, "kmod", snap));
        assert_eq!(pc["gdb values"].len(), 4, "{pc:?}");
        assert_eq!(pc["threads"], ["5"], "{pc:?}");
        assert!(
            pc["blocked in"].len() >= 2,
            "read, nanosleep and futex wait are caught in their calls: {pc:?}"
        );
        assert!(pc["top frames"].iter().any(|f| f == "SetBreakpoint"), "{pc:?}");
        for (what, pv) in &pc {
            assert_eq!(pv, &kc[what], "{snap} {what}: ptrace {pv:?}, kmod {:?}", kc[what]);
        }
    }
    // The module read the same signal handlers as the injected rt_sigaction calls.
    let signals = |b: &str| handlers(&o.json(&format!("{b}-signals-S0.meta.json")));
    assert!(signals("kmod").len() >= 2, "{:?}", signals("kmod"));
    assert_eq!(signals("kmod"), signals("ptrace"));
    assert_eq!(o.text("kmod-signals.out"), "usr1=1 rt=2\n");
    // And the same alternate signal stacks as the injected sigaltstack calls: main's, and
    // the worker's with SS_AUTODISARM.
    let altstacks = |b: &str| {
        let meta = o.json(&format!("{b}-altstack-S0.meta.json"));
        let threads = meta["threads"].as_array().cloned().unwrap_or_default();
        let mut stacks: Vec<_> =
            threads.iter().map(|t| (int(&t["altstack"], "size"), int(&t["altstack"], "flags"))).collect();
        stacks.sort();
        stacks
    };
    assert_eq!(altstacks("ptrace"), [(65536, 0), (65536, 1 << 31)], "{all}");
    assert_eq!(altstacks("kmod"), altstacks("ptrace"));

    // The spine's capture tests, under the module.
    assert_eq!(triggers(&o.snapshots("kmod-filters")), [(1, 1, 1), (2, 2, 11)], "{all}");
    let hits: Vec<(i64, i64)> =
        o.snapshots("kmod-hits").iter().map(|s| (int(s, "id"), int(s, "hit"))).collect();
    assert_eq!(hits, [(1, 2), (2, 2), (1, 4), (2, 4), (1, 5), (2, 5)]);
    let mark = triggers(&o.snapshots("kmod-mark"));
    assert_eq!(mark.iter().filter(|t| t.2 == 1).count(), 1, "multiple_mark 0: {mark:?}");
    assert_eq!(mark.iter().filter(|t| t.2 == 2).count(), 12, "multiple_mark 1: {mark:?}");
    assert_eq!(
        o.text("kmod-max.out"),
        "captured 1/1/1 -> S0\ncaptured 1/1/1 -> S1\ndeclined 1/1/1\ndeclined 1/1/1\ndeclined 1/1/1\n\
         declining inline\ndone\n",
        "past max_snapshots the module negates the state word: {}",
        o.text("kmod-max.err")
    );
    let churn = o.snapshots("kmod-churn");
    assert_eq!(churn.len(), 20, "{}", o.text("kmod-churn.err"));
    let churn_err = o.text("kmod-churn.err");
    assert_eq!(churn_err.matches("matches the live process").count(), 20, "{churn_err}");
    assert!(!churn_err.contains("MISMATCH"), "{churn_err}");
    assert!(churn.iter().any(|s| int(s, "threads") > 3), "short-lived threads were caught: {churn:?}");
    // A second of computing, 50 ms between snapshots: at least 4 even when the emulated
    // guest is slowed by other tests (its start may take half a second then).
    let timed = o.snapshots("kmod-timed");
    assert!(timed.len() >= 4 && timed.iter().all(|s| s["trigger"] == "timer"), "{timed:?}");
    assert_eq!(field(&text, "kmod-exit"), "rc=7");
    assert_eq!(field(&text, "kmod-segv"), "rc=139");
    assert_eq!(o.text("kmod-fork.out"), "parent 0\nforked child -1\nchild exit 5\n");
    assert_eq!(field(&text, "kmod-leader"), "rc=4");
    assert_eq!(
        o.snapshots("kmod-leader").len(),
        3,
        "out:\n{}\nerr:\n{}",
        o.text("kmod-leader.out"),
        o.text("kmod-leader.err")
    );
    assert_eq!(field(&text, "kmod-exec"), "rc=6");
    let exec = o.snapshots("kmod-exec");
    assert_eq!(exec.len(), 2, "one snapshot before the exec, one after");
    assert_eq!(exec[1]["attrs"], "mode=exit");
    assert_eq!(o.text("kmod-exec.err").matches("matches the live process").count(), 2);
    assert_eq!(o.text("kmod-filtered.out"), "first 0\nfiltered 100000\n");
    for run in ["filters", "hits", "mark", "churn", "timed", "exit", "fork", "leader", "exec"] {
        let snaps = o.snapshots(&format!("kmod-{run}"));
        assert!(snaps.iter().all(|s| s["mode"] == "page-hash"), "{run}: {snaps:?}");
    }

    // CRIU restores the module's snapshot: its breakpoint answers 0 there too, and the
    // program runs on untraced, its breakpoints off and its /dev/sdt left closed.
    for step in ["criu-run", "criu-export", "criu-restore"] {
        assert_eq!(field(&text, step), "rc=0", "{step}: {all}\n{}", o.text("criu-restore.txt"));
    }
    assert!(
        o.text("criu-export.txt").contains("is SDT's kernel module (/dev/sdt)"),
        "{}",
        o.text("criu-export.txt")
    );
    assert_eq!(field(&text, "criu-same"), "0", "the restored run printed something else: {all}");
    assert!(
        field(&text, "criu-line").starts_with("round 10: ")
            && field(&text, "criu-line").contains("(snapshot 0)"),
        "{all}"
    );

    // Nothing left behind: every session closed, no thread held, the module unloads.
    let status = numbers(field(&text, "status"));
    assert_eq!(
        (status["sessions"], status["capturing"], status["held"], status["pending"]),
        (0, 0, 0, 0),
        "{all}"
    );
    assert!(status["ipis"] > 0, "the pauses used IPIs: {status:?}");
    assert_eq!(field(&text, "rmmod"), "rc=0", "{all}");
    Ok(())
}

const STRESS_SCRIPT: &str = r#"
t0=$(date +%s)
sdt run -q --backend kmod --store /tmp/stress.sdt -- kmodstress 8 1000 >/tmp/stress.out 2>&1
echo "GUEST stress rc=$? secs=$(($(date +%s) - t0)) $(grep -o 'triggers=.*' /tmp/stress.out)"
echo "GUEST stress-snapshots n=$(sdt ls --json --store /tmp/stress.sdt | grep -c '"name"')"
grep -v 'kmodstress done' /tmp/stress.out | head -n 5
echo "GUEST after-stress $(st)"

# The daemon dies while every thread is held for it.
sdt run -q --backend kmod --store /tmp/kd.sdt -- kmodstress 4 100000 /tmp/kd.pid >/tmp/kd.out 2>&1 &
sdt=$!
while [ ! -s /tmp/kd.pid ]; do sleep 0.05; done
kill -STOP $sdt
wait_for capturing -eq 1 && wait_for held -ge 4
echo "GUEST daemon-stopped $(st)"
kill -KILL $sdt
wait $sdt
rc=$?
i=0
until grep -q 'kmodstress done' /tmp/kd.out || [ $i -ge 600 ]; do sleep 0.05; i=$((i + 1)); done
wait_for held -eq 0
echo "GUEST daemon-killed rc=$rc $(st)"
echo "GUEST daemon-program $(grep -o 'triggers=.*' /tmp/kd.out)"

# The program is killed while every thread is held.
sdt run -q --backend kmod --store /tmp/kt.sdt -- kmodstress 4 100000 /tmp/kt.pid >/tmp/kt.out 2>&1 &
sdt=$!
while [ ! -s /tmp/kt.pid ]; do sleep 0.05; done
kill -STOP $sdt
wait_for capturing -eq 1 && wait_for held -ge 4
echo "GUEST program-held $(st)"
kill -KILL $(cat /tmp/kt.pid)
wait_for held -eq 0
echo "GUEST program-killed $(st)"
kill -CONT $sdt
wait $sdt
echo "GUEST program-gone rc=$? $(st)"
sdt ls --store /tmp/kt.sdt | head -n 1
rmmod sdt
echo "GUEST rmmod rc=$?"
"#;

fn kmod_survives_stress_and_kills_mid_capture_in_the_guest() -> Result<(), Skip> {
    have_qemu()?;
    let args = guest_args(&["kmodstress"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let out = guest(&args, &format!("{PRELUDE}{STRESS_SCRIPT}"));
    let text = stdout(&out);
    let all = describe(&out);
    eprintln!("kmod stress guest run took {:.1}s", started.elapsed().as_secs_f64());
    assert!(out.status.success(), "{all}");

    // 1000 breakpoints from 8 threads while others are created and exit: a snapshot each.
    let stress = numbers(field(&text, "stress"));
    assert_eq!(stress["rc"], 0, "{all}");
    assert_eq!((stress["triggers"], stress["captured"], stress["distinct"]), (1000, 1000, 1000), "{all}");
    assert_eq!(stress["declined"] + stress["off"] + stress["other"], 0, "{all}");
    assert!(stress["churned"] > 0, "{all}");
    assert_eq!(numbers(field(&text, "stress-snapshots"))["n"], 1000, "{all}");
    let idle = numbers(field(&text, "after-stress"));
    assert_eq!((idle["sessions"], idle["capturing"], idle["held"], idle["pending"]), (0, 0, 0, 0), "{all}");
    assert!(idle["captures"] >= 1000 && idle["triggers"] >= 1000, "{all}");
    // Threads created during a capture were held from the fork tracepoint.
    assert!(idle["born"] > 0, "{all}");

    // Killing the daemon lets every thread go; the program runs on, its breakpoints off.
    let stopped = numbers(field(&text, "daemon-stopped"));
    assert_eq!(stopped["capturing"], 1, "a capture was under way: {all}");
    assert!(stopped["held"] >= 4, "{all}");
    let killed = numbers(field(&text, "daemon-killed"));
    assert_eq!(killed["rc"], 137, "{all}");
    assert_eq!(
        (killed["sessions"], killed["capturing"], killed["held"], killed["pending"]),
        (0, 0, 0, 0),
        "{all}"
    );
    let program = numbers(field(&text, "daemon-program"));
    assert_eq!(program["triggers"], 100_000, "the program finished: {all}");
    assert!(program["off"] > 0, "its breakpoints were switched off: {all}");
    assert_eq!(program["captured"] + program["off"] + program["declined"], 100_000, "{all}");

    // Killing the program ends its held threads; sdt reports the death and exits alike.
    let held = numbers(field(&text, "program-held"));
    assert_eq!(held["capturing"], 1, "{all}");
    assert!(held["held"] >= 4, "{all}");
    assert_eq!(numbers(field(&text, "program-killed"))["held"], 0, "{all}");
    let gone = numbers(field(&text, "program-gone"));
    assert_eq!(gone["rc"], 137, "sdt ends as its program did (SIGKILL): {all}");
    assert_eq!((gone["sessions"], gone["capturing"], gone["held"], gone["pending"]), (0, 0, 0, 0), "{all}");
    assert!(text.contains("killed by signal 9"), "{all}");
    assert_eq!(field(&text, "rmmod"), "rc=0", "{all}");
    Ok(())
}

fn without_the_module_kmod_is_refused_with_the_way_to_load_it() -> Result<(), Skip> {
    if Path::new("/dev/sdt").exists() {
        return Err(Skip::new("the module unloaded", "/dev/sdt exists here", "rmmod sdt"));
    }
    let sdt = crate::harness::Sdt::new();
    let prog = program("states");
    let out = sdt.output(&["run", "--backend", "kmod", "--", prog.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = crate::harness::stderr(&out);
    assert!(
        err.contains("kernel module is not loaded (no /dev/sdt)") && err.contains("kmod/install.sh"),
        "{err}"
    );
    assert!(!stdout(&out).contains("bp 1"), "the program did not start: {}", describe(&out));
    // `auto` falls back to ptrace.
    let out = sdt.ok(&["run", "--backend", "auto", "--", prog.to_str().unwrap()]);
    assert!(stdout(&out).contains("bp 2: result 1"), "{}", describe(&out));
    // A restored process is never taken over by the module.
    let out = sdt.output(&["restore", "S0", "--every", "50", "--backend", "kmod"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        crate::harness::stderr(&out).contains("a restored process is captured with ptrace"),
        "{}",
        describe(&out)
    );
    Ok(())
}

sdt_test_harness::tests![
    dkms_builds_the_module_for_debians_kernel,
    kmod_captures_what_ptrace_captures_in_the_guest,
    kmod_survives_stress_and_kills_mid_capture_in_the_guest,
    without_the_module_kmod_is_refused_with_the_way_to_load_it,
];
