//! Fault injection: `sdt run` killed at random instants, a store on a filesystem that
//! fills up, a raw log at its budget. After each: nothing hangs, no process is left
//! behind, the store still lists, and every snapshot number the program was given is in
//! the store, holding the values the program had.
//!
//! The trials are random from a seed, printed (`SDT_FAULT_SEED=N` repeats a run).

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sdt_test_harness::Skip;

use crate::harness::*;

/// `sdt run` kills, at least 30 as the issue asks.
const TRIALS: u64 = 30;

/// A small xorshift generator: the trials repeat from their seed.
struct Rng(u64);

impl Rng {
    fn from_env(test: &str) -> Rng {
        let seed = std::env::var("SDT_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        });
        eprintln!("{test}: seed {seed} (SDT_FAULT_SEED={seed} repeats it)");
        Rng(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `lo..hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// What the program said: its pid, the snapshots it was given (number, thread, marker),
/// and how many breakpoints were declined.
struct Told {
    pid: Option<i32>,
    snaps: Vec<(u32, usize, i64)>,
    declined: usize,
}

fn told(output: &str) -> Told {
    let mut t = Told { pid: None, snaps: Vec::new(), declined: 0 };
    for line in output.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["pid", pid] => t.pid = pid.parse().ok(),
            ["snap", r, "thread", th, "mark", m] => {
                t.snaps.push((r.parse().unwrap(), th.parse().unwrap(), m.parse().unwrap()))
            }
            ["declined", "thread", _] => t.declined += 1,
            _ => {}
        }
    }
    t
}

/// Waits until process `pid` is gone (not stopped, not lingering), failing after 10 s.
fn gone(pid: i32) {
    let start = Instant::now();
    while let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) {
        let state = sdt_procfs::Stat::parse(&stat).and_then(|s| s.state()).unwrap_or('?');
        assert!(start.elapsed() < Duration::from_secs(10), "process {pid} is still there (state {state})");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks the promises: every snapshot the program was given is listed, complete; in a
/// sample of them (the last one given and up to `sample - 1` others), gdb reads the
/// marker value the program had.
fn check_promises(sdt: &Sdt, told: &Told, rng: &mut Rng, sample: usize) {
    let listed = sdt.snapshots();
    let complete: Vec<&str> =
        listed.iter().filter(|s| s["complete"] == true).map(|s| s["name"].as_str().unwrap()).collect();
    for (r, _, _) in &told.snaps {
        assert!(
            complete.contains(&format!("S{r}").as_str()),
            "S{r} was given to the program but is not stored: {complete:?}"
        );
    }
    let Some(last) = told.snaps.iter().max_by_key(|s| s.0) else { return };
    let mut picked = vec![*last];
    for _ in 1..sample.min(told.snaps.len()) {
        picked.push(told.snaps[rng.range(0, told.snaps.len() as u64) as usize]);
    }
    let cores: Vec<_> = picked.iter().map(|(r, _, _)| sdt.core(&format!("S{r}"))).collect();
    let mut commands = Vec::new();
    for (k, ((_, thread, _), core)) in picked.iter().zip(&cores).enumerate() {
        if k > 0 {
            commands.push(format!("core-file {}", core.display()));
        }
        commands.push(format!("print marks[{thread}]"));
    }
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let output = gdb(&program("faults"), &cores[0], &commands);
    let values = gdb_values(&output);
    let expected: Vec<String> = picked.iter().map(|(_, _, m)| m.to_string()).collect();
    assert_eq!(values, expected, "snapshots {picked:?}: {output}");
}

fn sdt_killed_at_random_instants_keeps_every_snapshot_it_gave() {
    let mut rng = Rng::from_env("sdt_killed_at_random_instants_keeps_every_snapshot_it_gave");
    let prog = program("faults");
    let mut given = 0;
    for trial in 0..TRIALS {
        let threads = [1, 2, 8][trial as usize % 3];
        let sdt = Sdt::new();
        let out_path = sdt.dir.path().join("program.out");
        let mut child = sdt
            .command(&["run", "-q", "--", prog.to_str().unwrap(), &threads.to_string(), "8", "0"])
            .stdin(Stdio::null())
            .stdout(File::create(&out_path).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the program to start, then kill sdt at a random instant.
        let start = Instant::now();
        while !std::fs::read_to_string(&out_path).unwrap().contains('\n') {
            assert!(start.elapsed() < Duration::from_secs(30), "trial {trial}: the program did not start");
            std::thread::sleep(Duration::from_millis(2));
        }
        let delay = rng.range(1, 300);
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        child.wait().unwrap();
        let said = std::fs::read_to_string(&out_path).unwrap();
        let t = told(&said);
        gone(t.pid.expect("the program prints its pid first"));
        // Killed before its run was created: nothing was given, nothing is there.
        if t.snaps.is_empty() && stderr(&sdt.output(&["ls"])).contains("holds no runs yet") {
            eprintln!("trial {trial}: killed after {delay} ms, before the run was created");
            continue;
        }
        // Listing works, says the run ended abnormally, and `sdt compact` finishes it.
        let ls = stdout(&sdt.ok(&["ls"]));
        assert!(ls.lines().next().unwrap().contains("ended abnormally"), "trial {trial}: {ls}");
        check_promises(&sdt, &t, &mut rng, 2);
        given += t.snaps.len();
        sdt.ok(&["compact"]);
        check_promises(&sdt, &t, &mut rng, 1);
        let ls = stdout(&sdt.ok(&["ls"]));
        assert!(ls.lines().next().unwrap().contains("failed: sdt"), "trial {trial}: {ls}");
        eprintln!(
            "trial {trial}: {threads} thread(s), killed after {delay} ms, {} snapshot(s) given",
            t.snaps.len()
        );
    }
    assert!(given > TRIALS as usize, "the kills came before most captures: {given} snapshots given in all");
}

/// A tmpfs of `mb` MiB mounted on a new directory, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// The [`Skip`] where `mount` fails (it needs root).
    fn mount(mb: u64) -> Result<SmallFs, Skip> {
        let dir = tempfile::tempdir().unwrap();
        let out = run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mb}m,mode=0700"), "tmpfs"])
            .arg(dir.path()));
        if !out.status.success() {
            let said = stderr(&out);
            let why = format!("mounting a tmpfs needs root ({})", said.lines().next().unwrap_or_default());
            return Err(Skip::needs_root(why));
        }
        Ok(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        run(Command::new("umount").arg(self.dir.path()));
    }
}

fn a_full_store_declines_breakpoints_and_says_how_many_were_lost() -> Result<(), Skip> {
    let fs = SmallFs::mount(20)?;
    let sdt = Sdt::new();
    let store = fs.path().join(".sdt");
    let prog = program("faults");
    // An 8 MiB heap read whole at S0 and a spare as large for the next capture, in
    // 20 MiB: captures fail for room until compaction frees the raw file.
    let out = run(sdt
        .command(&["run", "--store", store.to_str().unwrap(), "--", prog.to_str().unwrap(), "2", "8", "200"])
        .stdin(Stdio::null()));
    assert_eq!(out.status.code(), Some(125), "{}", describe(&out));
    let t = told(&stdout(&out));
    assert!(t.declined > 0, "no breakpoint was declined: {}", describe(&out));
    assert!(stdout(&out).contains("faults done"), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains("snapshots lost: the store could not take them") || err.contains("snapshot lost"),
        "{err}"
    );
    assert!(err.contains("sdt exits 125"), "{err}");
    assert!(
        err.contains("sdt: hint: the store's file system is full") && err.contains("`sdt rm RUN…`"),
        "{err}"
    );
    let sdt_on_fs = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--store", store.to_str().unwrap()]);
        sdt.ok(&all)
    };
    sdt_on_fs(&["ls"]);
    let listed: serde_json::Value = serde_json::from_slice(&sdt_on_fs(&["ls", "--json"]).stdout).unwrap();
    let names: Vec<&str> = listed.as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    for (r, _, _) in &t.snaps {
        assert!(names.contains(&format!("S{r}").as_str()), "S{r} given, not stored: {names:?}");
    }
    // The snapshot given last holds the marker its thread had.
    let &(r, thread, mark) = t.snaps.iter().max_by_key(|s| s.0).expect("some snapshots were taken");
    let core = sdt.dir.path().join("last.core");
    sdt_on_fs(&["export", "core", &format!("S{r}"), "-o", core.to_str().unwrap()]);
    let output = gdb(&prog, &core, &[&format!("print marks[{thread}]")]);
    assert_eq!(gdb_values(&output), [mark.to_string()], "{output}");
    // What the hint says frees the file system, full to its last block.
    let mut filler = std::fs::File::create(fs.path().join("filler")).unwrap();
    while std::io::Write::write_all(&mut filler, &[7u8; 1 << 16]).is_ok() {}
    drop(filler);
    sdt_on_fs(&["rm", "1"]);
    assert!(!store.join("runs/1").exists());
    assert_eq!(std::fs::read_to_string(store.join("runs/.last-id")).unwrap(), "1", "run 1's id stays taken");
    Ok(())
}

fn timed_snapshots_past_the_disk_budget_are_skipped_not_waited_for() {
    let sdt = Sdt::new();
    let prog = program("dirty");
    // 16 MiB written per breakpoint, a 1 MiB budget, a timed snapshot every 2 ms: the raw
    // log is over its budget whenever the compactor is behind.
    let start = Instant::now();
    let out = sdt.output(&[
        "run",
        "--disk-budget",
        "1",
        "--every",
        "2",
        "-c",
        &config(&sdt, "max_level = 0\n"),
        "--",
        prog.to_str().unwrap(),
        "16",
        "100",
        "200",
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains("timed snapshots were skipped")
            || stderr(&out).contains("timed snapshot was skipped"),
        "{}",
        describe(&out)
    );
    assert!(start.elapsed() < Duration::from_secs(60));
    sdt.ok(&["ls"]);
}

sdt_test_harness::tests![
    sdt_killed_at_random_instants_keeps_every_snapshot_it_gave,
    a_full_store_declines_breakpoints_and_says_how_many_were_lost,
    timed_snapshots_past_the_disk_budget_are_skipped_not_waited_for,
];
