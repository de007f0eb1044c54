//! A store is untrusted input: root running `sdt gdb`, `sdt export` or `sdt refine` on
//! a store that another user crafted (a real run whose metadata the test rewrites, the
//! store then handed to uid 1001) runs no command of theirs, writes no file outside the
//! store, follows none of their symbolic links, reads none of root's files for them,
//! never blocks on a FIFO, writes no terabytes of zeros, and prints their strings
//! escaped.
//!
//! Most tests need root (to own a secret file and hand the store to another uid); without
//! it each is reported ignored.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sdt_test_harness::Skip;
use serde_json::{Value, json};

use crate::harness::{Sdt, describe, program, shared_library, stderr, stdout};

/// The store's owner in these tests: not root, and no account needed.
const OWNER: u32 = 1001;

/// If this process is root, a store holding a real run of `breakpoints`, as
/// [`run_breakpoints`] makes it; otherwise the [`Skip`].
fn run_as_root(breakpoints: &[&str]) -> Result<Sdt, Skip> {
    sdt_test_harness::root("it needs root (a store owned by another uid)")?;
    let sdt = Sdt::new();
    run_breakpoints(&sdt, breakpoints);
    Ok(sdt)
}

/// A real run of `breakpoints` with the given breakpoints, one thread: S0, S1, …,
/// compacted (the tests edit the `.snap` files).
fn run_breakpoints(sdt: &Sdt, breakpoints: &[&str]) {
    let prog = program("breakpoints");
    let mut args = vec!["run", "-q", "--wait-compaction", "--", prog.to_str().unwrap(), "1", "1"];
    args.extend_from_slice(breakpoints);
    sdt.ok(&args);
}

/// Gives the whole store to `uid`, symbolic links included (not followed).
fn chown_store(root: &Path, uid: u32) {
    std::os::unix::fs::lchown(root, Some(uid), Some(uid)).unwrap();
    if std::fs::symlink_metadata(root).unwrap().is_dir() {
        for entry in std::fs::read_dir(root).unwrap() {
            chown_store(&entry.unwrap().path(), uid);
        }
    }
}

/// Rewrites the metadata of the snapshot file `path` with `edit`: a new zstd frame in
/// place of the old one, the footer's length and checksums updated (layout:
/// sdt-store/src/format.rs). The file is replaced, never changed in place.
fn rewrite_meta(path: &Path, edit: impl FnOnce(&mut Value)) {
    let bytes = std::fs::read(path).unwrap();
    let footer_at = bytes.len() - 64;
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let meta_offset = u64_at(footer_at + 40) as usize;
    let json = zstd::decode_all(&bytes[meta_offset..footer_at]).unwrap();
    let mut meta: Value = serde_json::from_slice(&json).unwrap();
    edit(&mut meta);
    let frame = zstd::bulk::compress(&serde_json::to_vec(&meta).unwrap(), 1).unwrap();
    let mut footer = bytes[footer_at..].to_vec();
    footer[48..52].copy_from_slice(&(frame.len() as u32).to_le_bytes());
    footer[52..56].copy_from_slice(&(xxhash_rust::xxh3::xxh3_64(&frame) as u32).to_le_bytes());
    let sum = xxhash_rust::xxh3::xxh3_64(&footer[..56]);
    footer[56..64].copy_from_slice(&sum.to_le_bytes());
    let mut out = bytes[..meta_offset].to_vec();
    out.extend_from_slice(&frame);
    out.extend_from_slice(&footer);
    let tmp = path.with_extension("rewritten");
    std::fs::write(&tmp, out).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Adds a mapping `[start, end)` whose pages come from the file at `path` (with the
/// identity it has now, as a store can copy any file's `stat`), keeping them sorted.
fn add_file_mapping(meta: &mut Value, start: u64, end: u64, path: &Path) {
    let st = std::fs::metadata(path).unwrap();
    let file = json!({
        "kind": "file", "path": path.to_str().unwrap(), "dev": st.dev(), "inode": st.ino(),
        "size": st.size(), "mtime_ns": st.mtime() * 1_000_000_000 + st.mtime_nsec(),
    });
    add_mapping(meta, start, end, st.ino(), path.to_str().unwrap(), file);
}

fn add_mapping(meta: &mut Value, start: u64, end: u64, inode: u64, path: &str, content: Value) {
    let mappings = meta["mappings"].as_array_mut().unwrap();
    mappings.push(json!({
        "start": start, "end": end,
        "perms": {"read": true, "write": false, "exec": false, "shared": false},
        "offset": 0, "dev": "08:01", "inode": inode, "path": path, "content": content,
    }));
    mappings.sort_by_key(|m| m["start"].as_u64().unwrap());
}

fn snap_file(sdt: &Sdt, run: u32, seq: u32) -> PathBuf {
    sdt.store().join(format!("runs/{run}/S{seq}.snap"))
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if std::fs::symlink_metadata(&path).unwrap().is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found
}

fn a_program_path_that_reads_as_a_gdb_option_runs_nothing() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0", "1/1/2/0"])?;
    let marker = sdt.dir.path().join("marker");
    let exe = format!("--eval-command=shell touch {}", marker.display());
    for seq in [0, 1] {
        rewrite_meta(&snap_file(&sdt, 1, seq), |m| m["process"]["exe"] = json!(exe));
    }
    chown_store(&sdt.store(), OWNER);

    let out = sdt.output(&["gdb", "S0", "--", "-batch", "-ex", "info threads"]);
    assert!(!marker.exists(), "sdt gdb ran the store's command: {}", describe(&out));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains("gdb gets no symbols of it"), "{}", describe(&out));
    assert!(stdout(&out).contains("Thread "), "gdb still shows the threads: {}", describe(&out));

    // `sdt refine --check` evaluates in S1 first: the missing config file stops it after.
    let out =
        sdt.output(&["refine", "--from", "S0", "--to", "S1", "--check", "1", "--config", "/nonexistent"]);
    assert!(!marker.exists(), "sdt refine ran the store's command: {}", describe(&out));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--check needs the program"), "{}", describe(&out));
    Ok(())
}

fn a_snapshot_name_with_a_path_in_it_is_corrupt_and_writes_nothing_outside() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0"])?;
    let outside = sdt.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    // cores/../../../../outside/x: runs/1, runs, the store, then the test's directory.
    rewrite_meta(&snap_file(&sdt, 1, 0), |m| m["name"] = json!("../../../../outside/x"));
    chown_store(&sdt.store(), OWNER);

    let says = "snapshot S0 is corrupt: metadata names it \"../../../../outside/x\"";
    refused_writing_nothing(&sdt, &["gdb", "S0", "--", "-batch"], says, &outside);
    Ok(())
}

fn a_refinement_named_with_a_path_is_refused_and_writes_nothing_outside() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0"])?;
    let outside = sdt.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    // Run 2, a "refinement" of run 1 whose snapshot 0 is named ../../../../outside/y.0.
    let run2 = sdt.store().join("runs/2");
    std::fs::create_dir(&run2).unwrap();
    std::fs::copy(snap_file(&sdt, 1, 0), snap_file(&sdt, 2, 0)).unwrap();
    let name = "../../../../outside/y";
    rewrite_meta(&snap_file(&sdt, 2, 0), |m| m["name"] = json!(format!("{name}.0")));
    let mut info: Value =
        serde_json::from_slice(&std::fs::read(sdt.store().join("runs/1/run.json")).unwrap()).unwrap();
    info["parent"] = json!({"run": 1, "from": name, "to": null, "reached": null});
    std::fs::write(run2.join("run.json"), serde_json::to_vec(&info).unwrap()).unwrap();
    chown_store(&sdt.store(), OWNER);

    // Named, the run is refused; unnamed, the latest run is the newest valid one (run 1).
    let says = "parent.from \"../../../../outside/y\" is not a snapshot name";
    refused_writing_nothing(&sdt, &["gdb", "--run", "2", "--", "-batch"], says, &outside);
    sdt.ok(&["gdb", "--", "-batch"]);
    assert_eq!(files_under(&outside), Vec::<PathBuf>::new());
    Ok(())
}

/// Runs `sdt ARGS`, which must fail saying `says` and leave `outside` empty.
fn refused_writing_nothing(sdt: &Sdt, args: &[&str], says: &str, outside: &Path) {
    let out = sdt.output(args);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(stderr(&out).contains(says), "{}", describe(&out));
    assert_eq!(files_under(outside), Vec::<PathBuf>::new());
}

fn a_link_beside_an_exported_core_is_not_followed() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0"])?;
    let victim = sdt.dir.path().join("victim");
    std::fs::write(&victim, b"root's own").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    chown_store(&sdt.store(), OWNER);
    // The temporary file `export core` writes next to its output is a link to the victim.
    std::os::unix::fs::symlink(&victim, sdt.dir.path().join("out.core.tmp")).unwrap();
    sdt.ok(&["export", "core", "S0", "-o", "out.core"]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's own", "sdt export core wrote through a link");
    let core = std::fs::symlink_metadata(sdt.dir.path().join("out.core")).unwrap();
    assert!(core.is_file());
    assert_eq!(core.permissions().mode() & 0o777, 0o600, "a core holds the process's memory");
    Ok(())
}

/// gdb evaluates `--vars` and `sdt history` through `sdt gdbserver`, which names only
/// the libraries the store checks: a library replaced by a FIFO since the capture, whose
/// path the dynamic linker's list in the snapshot's memory still gives (gdb would wait
/// for a writer for ever), holds nothing up. The values are those of SetBreakpoint's
/// caller, a local among them.
fn a_library_now_a_fifo_holds_up_no_evaluation() {
    let sdt = Sdt::new();
    let lib = sdt.copy_in(&shared_library("loaded"));
    let prog = program("plugin");
    let args = ["run", "-q", "--", prog.to_str().unwrap(), lib.to_str().unwrap()];
    for _ in 0..2 {
        assert_eq!(stdout(&sdt.ok(&args)), "step 1 x 16\nstep 2 x 49\n");
    }
    let evaluated = || {
        let start = Instant::now();
        let history = sdt.ok(&["history", "x"]);
        let values: Vec<_> =
            stdout(&history).lines().map(|l| l.rsplit(' ').next().unwrap().to_owned()).collect();
        assert_eq!(values, ["16", "49"], "{}", describe(&history));
        let compare = sdt.ok(&["compare", "--reference", "1", "--run", "2", "--vars", "x,x*2"]);
        let same = "no difference: run 2 agrees with reference run 1 at all 2 arrivals in common\n";
        assert_eq!(stdout(&compare), same, "{}", describe(&compare));
        assert!(start.elapsed() < Duration::from_secs(60), "took {:?}", start.elapsed());
    };
    evaluated();
    std::fs::remove_file(&lib).unwrap();
    mkfifo(&lib);
    evaluated();
}

fn a_fifo_mapping_blocks_no_exporter() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0"])?;
    // Its name also shows that error messages print a store's strings escaped.
    let fifo = sdt.dir.path().join("fifo\x1b[2J");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
    rewrite_meta(&snap_file(&sdt, 1, 0), |m| add_file_mapping(m, 0x1000_0000_0000, 0x1000_0001_0000, &fifo));
    chown_store(&sdt.store(), OWNER);

    let start = Instant::now();
    let core = sdt.output(&["export", "core", "S0", "-o", "s0.core"]);
    assert!(core.status.success(), "{}", describe(&core));
    assert!(stderr(&core).contains("it is a FIFO, not a regular file"), "{}", describe(&core));
    let gdb = sdt.output(&["gdb", "S0", "--", "-batch"]);
    assert!(gdb.status.success(), "{}", describe(&gdb));
    let criu = sdt.output(&["export", "criu", "S0", "-o", "img"]);
    assert!(start.elapsed() < Duration::from_secs(30), "{:?}", start.elapsed());
    assert!(!criu.status.success(), "{}", describe(&criu));
    let err = stderr(&criu);
    assert!(err.contains("fifo\\x1b[2J is not read for snapshot S0: it is a FIFO"), "{}", describe(&criu));
    assert!(!err.contains('\x1b'), "a raw escape reached the terminal: {err:?}");
    assert!(!sdt.dir.path().join("img").exists());
    Ok(())
}

fn a_64_tib_mapping_exports_small_and_fast() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0"])?;
    let (start, end) = (0x1000_0000_0000u64, 0x5000_0000_0000u64);
    rewrite_meta(&snap_file(&sdt, 1, 0), |m| {
        let zero = json!({"kind": "zero"});
        add_mapping(m, start, end, 0, "", zero);
        m["mappings"].as_array_mut().unwrap().iter_mut().find(|m| m["start"] == start).unwrap()["perms"]["write"] =
            json!(true);
    });
    // The program as the store's owner, so that its credentials export.
    set_creds(&snap_file(&sdt, 1, 0), creds_json(OWNER, 0));
    chown_store(&sdt.store(), OWNER);

    let began = Instant::now();
    sdt.ok(&["export", "core", "S0", "-o", "s0.core"]);
    let core = sdt.dir.path().join("s0.core");
    assert!(
        std::fs::metadata(&core).unwrap().len() < 64 << 20,
        "{} bytes",
        std::fs::metadata(&core).unwrap().len()
    );
    assert!(std::fs::metadata(&core).unwrap().blocks() * 512 < 64 << 20);
    sdt.ok(&["export", "criu", "S0", "-o", "img"]);
    let images: u64 =
        files_under(&sdt.dir.path().join("img")).iter().map(|f| f.metadata().unwrap().blocks() * 512).sum();
    assert!(images < 64 << 20, "{images} bytes of images");
    assert!(began.elapsed() < Duration::from_secs(30), "{:?}", began.elapsed());
    // gdb reads the reservation as the zeros it held.
    let prog = program("breakpoints");
    let text = crate::harness::gdb(&prog, &core, &[&format!("print *(long *){:#x}", end - 8)]);
    assert!(text.contains("= 0"), "{text}");
    Ok(())
}

fn a_file_the_stores_owner_cannot_read_stays_out_of_the_exports() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0"])?;
    let secret = sdt.dir.path().join("secret");
    let mark = format!("TOPSECRET-{}-", std::process::id());
    std::fs::write(&secret, mark.repeat(4096 / mark.len() + 1)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    rewrite_meta(&snap_file(&sdt, 1, 0), |m| {
        add_file_mapping(m, 0x1000_0000_0000, 0x1000_0000_1000, &secret)
    });
    let holds = |core: &Path| {
        let bytes = std::fs::read(core).unwrap();
        bytes.windows(mark.len()).any(|w| w == mark.as_bytes())
    };
    // Root's own store: root's file is the program's, and it is in the core.
    sdt.ok(&["export", "core", "S0", "-o", "own.core"]);
    assert!(holds(&sdt.dir.path().join("own.core")), "the test does not see the secret where it should be");
    let secret_in_gdb = |out: &std::process::Output| stdout(out).contains("84 'T'\t79 'O'\t80 'P'");
    let show_page = ["gdb", "S0", "--", "-batch", "-ex", "x/64c 0x100000000000"];
    assert!(secret_in_gdb(&sdt.ok(&show_page)), "gdb on root's own store shows root's file");

    chown_store(&sdt.store(), OWNER);
    let out = sdt.ok(&["export", "core", "S0", "-o", "s0.core"]);
    assert!(!holds(&sdt.dir.path().join("s0.core")), "root's secret is in the core of uid {OWNER}'s store");
    assert!(
        stderr(&out).contains(&format!("the store belongs to uid {OWNER}, who could not read it")),
        "{}",
        describe(&out)
    );
    // Through sdt gdbserver, the file's page reads as nothing gdb can show.
    let out = sdt.output(&show_page);
    assert!(!secret_in_gdb(&out), "the secret reached gdb: {}", describe(&out));
    let criu = sdt.output(&["export", "criu", "S0", "-o", "img"]);
    assert!(!criu.status.success(), "criu restore would map it: {}", describe(&criu));
    assert!(stderr(&criu).contains("who could not read it"), "{}", describe(&criu));
    Ok(())
}

fn a_stores_strings_are_printed_escaped() {
    let sdt = Sdt::new();
    run_breakpoints(&sdt, &["1/1/1/0/phase=\x1b[31mred\x1b[0m"]);
    rewrite_meta(&snap_file(&sdt, 1, 0), |m| {
        m["threads"][0]["name"] = json!("w\x1b]0;title\x07");
        m["process"]["comm"] = json!("c\u{202e}x");
        let first = &mut m["mappings"][0];
        first["path"] = json!(format!("{}\nfake line", first["path"].as_str().unwrap()));
    });
    let run_json = sdt.store().join("runs/1/run.json");
    let mut info: Value = serde_json::from_slice(&std::fs::read(&run_json).unwrap()).unwrap();
    info["command"][1] = json!("\x1b[2Jarg");
    std::fs::write(&run_json, serde_json::to_vec(&info).unwrap()).unwrap();
    let show = stdout(&sdt.ok(&["show", "S0"]));
    let ls = stdout(&sdt.ok(&["ls"]));
    let runs = stdout(&sdt.ok(&["runs"]));
    for (what, text) in [("show", &show), ("ls", &ls), ("runs", &runs)] {
        assert!(
            !text.contains('\x1b') && !text.contains('\x07'),
            "sdt {what} printed a raw escape: {text:?}"
        );
    }
    assert!(show.contains("attrs phase=\\x1b[31mred\\x1b[0m"), "{show}");
    assert!(show.contains("w\\x1b]0;title\\x07"), "{show}");
    assert!(show.contains("(c\\u{202e}x)"), "{show}");
    assert!(show.contains("\\nfake line"), "{show}");
    assert!(!show.lines().any(|l| l.starts_with("fake line")), "{show}");
    assert!(ls.contains("phase=\\x1b[31mred\\x…"), "{ls}");
    assert!(runs.contains("\\x1b[2Jarg"), "{runs}");
    // --json is JSON-escaped already.
    let json = stdout(&sdt.ok(&["ls", "--json"]));
    assert!(json.contains("phase=\\u001b[31mred"), "{json}");
}

/// The credentials of a thread as a snapshot records them: user and group `id`
/// everywhere, no supplementary groups, the capabilities `caps` permitted and effective.
fn creds_json(id: u32, caps: u64) -> Value {
    let ids = json!({"real": id, "effective": id, "saved": id, "fs": id});
    let sets = json!({"inheritable": 0, "permitted": caps, "effective": caps, "bounding": (1u64 << 41) - 1, "ambient": 0});
    json!({"uids": ids, "gids": ids, "groups": [], "caps": sets, "no_new_privs": false, "seccomp": "disabled"})
}

/// Makes every thread of the snapshot in `path` have the credentials `creds`.
fn set_creds(path: &Path, creds: Value) {
    rewrite_meta(path, |m| {
        m["process"]["creds"] = creds;
        m["process"]["thread_creds"] = json!([]);
    });
}

/// Adds descriptor 100, open with `flags` on the file at `path`, to the snapshot's
/// metadata, as a regular file with the identity it has now.
fn add_descriptor(meta: &mut Value, path: &Path, flags: u32) {
    let st = std::fs::symlink_metadata(path).unwrap();
    let file = json!({
        "path": path.to_str().unwrap(), "dev": st.dev(), "inode": st.ino(), "size": st.size(),
        "mtime_ns": st.mtime() * 1_000_000_000 + st.mtime_nsec(),
    });
    meta["files"].as_array_mut().unwrap().push(json!({
        "fd": 100, "target": path.to_str().unwrap(), "kind": "regular", "flags": flags, "pos": 0,
        "file": file, "inherited": false,
    }));
}

/// A FIFO at `path`.
fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) }, 0);
}

/// Runs `sdt ARGS`, which must fail within 30 seconds saying each of `says`; returns
/// what it printed on stderr.
fn refused_promptly(sdt: &Sdt, args: &[&str], says: &[&str]) -> String {
    let start = Instant::now();
    let out = sdt.output(args);
    assert!(start.elapsed() < Duration::from_secs(30), "sdt {args:?} took {:?}", start.elapsed());
    assert!(!out.status.success(), "sdt {args:?}: {}", describe(&out));
    let err = stderr(&out);
    for s in says {
        assert!(err.contains(s), "sdt {args:?} does not say {s:?}: {}", describe(&out));
    }
    assert_eq!(stdout(&out), "", "the program ran: {}", describe(&out));
    err
}

fn a_users_store_that_claims_more_than_the_user_has_is_refused_or_lowered() -> Result<(), Skip> {
    crate::restore::may_restore()?;
    // What `credentials` reads and keeps open, in a directory anyone may enter.
    let files = tempfile::tempdir().unwrap();
    std::fs::set_permissions(files.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (secret, kept) = (files.path().join("secret"), files.path().join("kept"));
    std::fs::write(&secret, "the secret file\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&kept, "the kept file\n").unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o644)).unwrap();
    // It drops root for real uid 1003, effective uid 1001, groups 1002 and 1004 and
    // CAP_NET_BIND_SERVICE: more than uid 1001, who has no account here, has.
    let sdt = Sdt::new();
    let prog = program("credentials");
    sdt.ok(&[
        "run",
        "-q",
        // Compacted before it returns: the test edits S0.snap.
        "--wait-compaction",
        "--",
        prog.to_str().unwrap(),
        "drop",
        secret.to_str().unwrap(),
        kept.to_str().unwrap(),
    ]);
    chown_store(&sdt.store(), OWNER);

    let beyond = "more than the owner of its store (uid 1001) has: uid 1001";
    let err = refused_promptly(
        &sdt,
        &["restore", "-q", "S0"],
        &["recorded with user ids [1003, 1001, 1001, 1001]", beyond],
    );
    assert!(err.contains("hint: `sdt restore --as-owner S0` resumes it as uid 1001"), "{err}");
    // Capturing restores (`sdt refine`'s path) too, and --keep-root more so.
    refused_promptly(&sdt, &["restore", "-q", "--every", "1000", "S0"], &[beyond]);
    refused_promptly(&sdt, &["restore", "-q", "--keep-root", "S0"], &["the store belongs to uid 1001"]);
    let criu = refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &[beyond]);
    assert!(!sdt.dir.path().join("img").exists(), "{criu}");

    // --as-owner: every thread as uid 1001 of group 1001 (its store's group), nothing more.
    let out = sdt.output(&["restore", "-q", "--as-owner", "S0"]);
    assert!(out.status.success(), "{}", describe(&out));
    let printed = stdout(&out);
    for line in [
        "main: uid 1001 1001 1001 1001 gid 1001 1001 1001 1001 groups\n",
        "main: CapPrm:\t0000000000000000\n",
        "main: CapEff:\t0000000000000000\n",
        "main: CapAmb:\t0000000000000000\n",
        "worker: uid 1001 1001 1001 1001 gid 1001 1001 1001 1001 groups\n",
        "worker: NoNewPrivs:\t1\n",
        "threads in seccomp strict mode: 1\n",
        "kept: the kept file\n",
        "secret: EACCES\n",
    ] {
        assert!(printed.contains(line), "{line:?} not in:\n{}", describe(&out));
    }
    assert!(stderr(&out).contains("it resumes with the owner's (uid 1001)"), "{}", describe(&out));

    // Crafted: uid 1001 but group 0, or CAP_SYS_ADMIN.
    let mut root_group = creds_json(OWNER, 0);
    root_group["gids"] = json!({"real": 0, "effective": 0, "saved": 0, "fs": 0});
    set_creds(&snap_file(&sdt, 1, 0), root_group);
    refused_promptly(
        &sdt,
        &["restore", "-q", "S0"],
        &["recorded with group ids [0, 0, 0, 0]", "has: groups [1001]"],
    );
    set_creds(&snap_file(&sdt, 1, 0), creds_json(OWNER, 1 << 21));
    refused_promptly(
        &sdt,
        &["restore", "-q", "S0"],
        &["recorded with permitted capabilities 0x200000", "has: none"],
    );
    Ok(())
}

/// Decodes the CRIU image `path` with `crit`; the [`Skip`] where crit is missing.
fn crit_decode(path: &Path) -> Result<Value, Skip> {
    crate::criu_export::have_crit()?;
    let out = std::process::Command::new("crit").arg("decode").arg("-i").arg(path).output().unwrap();
    assert!(out.status.success(), "crit decode {}: {}", path.display(), describe(&out));
    Ok(serde_json::from_slice(&out.stdout).unwrap())
}

fn criu_images_of_a_users_store_carry_only_the_users_credentials() -> Result<(), Skip> {
    let sdt = run_as_root(&["1/1/1/0"])?;
    chown_store(&sdt.store(), OWNER);
    // Recorded as root, who ran it.
    let says = ["recorded with user ids [0, 0, 0, 0], more than the owner of its store (uid 1001) has"];
    refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &says);
    set_creds(&snap_file(&sdt, 1, 0), creds_json(OWNER, 1 << 21));
    refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &["permitted capabilities 0x200000"]);
    let mut root_group = creds_json(OWNER, 0);
    root_group["groups"] = json!([0]);
    set_creds(&snap_file(&sdt, 1, 0), root_group);
    refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &["supplementary groups [0]"]);
    assert!(!sdt.dir.path().join("img").exists());

    // The user's own: exported as they are.
    set_creds(&snap_file(&sdt, 1, 0), creds_json(OWNER, 0));
    sdt.ok(&["export", "criu", "S0", "-o", "img"]);
    let img = sdt.dir.path().join("img");
    let cores: Vec<PathBuf> = files_under(&img)
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("core-"))
        .collect();
    assert!(!cores.is_empty());
    for core in cores {
        let image = crit_decode(&core)?;
        let creds = &image["entries"][0]["thread_core"]["creds"];
        for id in ["uid", "euid", "suid", "fsuid", "gid", "egid", "sgid", "fsgid"] {
            assert_eq!(creds[id], json!(OWNER), "{id} in {}: {creds}", core.display());
        }
        for set in ["cap_prm", "cap_eff", "cap_inh"] {
            assert_eq!(creds[set], json!([0, 0]), "{set} in {}: {creds}", core.display());
        }
    }
    Ok(())
}

fn a_descriptor_the_stores_owner_could_not_open_is_refused() -> Result<(), Skip> {
    crate::restore::may_restore()?;
    let sdt = run_as_root(&["1/1/1/0"])?;
    let secret = sdt.dir.path().join("secret");
    std::fs::write(&secret, "root's own\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let snap = snap_file(&sdt, 1, 0);
    // The program's credentials are the store owner's: only the descriptor is wrong.
    set_creds(&snap, creds_json(OWNER, 0));
    rewrite_meta(&snap, |m| add_descriptor(m, &secret, 0));
    chown_store(&sdt.store(), OWNER);

    let secret_path = secret.to_str().unwrap();
    let fd = format!("file descriptor 100 ({secret_path})");
    let why = "the store belongs to uid 1001, who could not read it";
    refused_promptly(&sdt, &["restore", "-q", "S0"], &[&fd, why]);
    let criu_fd = format!("fd 100 ({secret_path}) is refused: `criu restore` would open it as root");
    refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &[&criu_fd, why]);
    assert!(!sdt.dir.path().join("img").exists());

    // Anyone may read it, but only root write it: not for writing (O_RDWR).
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    rewrite_meta(&snap, |m| m["files"].as_array_mut().unwrap().last_mut().unwrap()["flags"] = json!(2));
    let why = "who could not write it";
    refused_promptly(&sdt, &["restore", "-q", "S0"], &[&fd, why]);
    refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &[&criu_fd, why]);

    // A FIFO in its place: nothing opens it, nothing waits for a writer.
    std::fs::remove_file(&secret).unwrap();
    mkfifo(&secret);
    let why = "it is a FIFO, not a regular file";
    refused_promptly(&sdt, &["restore", "-q", "S0"], &[&fd, why]);
    refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &[&criu_fd, why]);
    Ok(())
}

fn a_mapping_naming_a_fifo_ends_a_restore_promptly() -> Result<(), Skip> {
    crate::restore::may_restore()?;
    let sdt = run_as_root(&["1/1/1/0", "1/1/2/0"])?;
    let fifo = sdt.dir.path().join("fifo");
    mkfifo(&fifo);
    let fifo_path = fifo.to_str().unwrap();
    // A mapping with no pages in the snapshot (a library's PROT_NONE gap), mapped again
    // from its file by path.
    rewrite_meta(&snap_file(&sdt, 1, 0), |m| {
        add_mapping(m, 0x1000_0000_0000, 0x1000_0001_0000, 7, fifo_path, json!({"kind": "unreadable"}));
        let gap = m["mappings"].as_array_mut().unwrap().iter_mut().find(|m| m["path"] == fifo_path).unwrap();
        gap["perms"]["read"] = json!(false);
    });
    let mapping = format!("mapping 0x100000000000-0x100000010000 {fifo_path}");
    let why = "it is a FIFO, not a regular file";
    refused_promptly(&sdt, &["restore", "-q", "S0"], &[&mapping, why]);
    refused_promptly(&sdt, &["restore", "-q", "--every", "1000", "S0"], &[&mapping, why]);
    let refine = ["refine", "--from", "S0", "--to", "S1", "--check", "nbps"];
    refused_promptly(&sdt, &refine, &[&mapping, why]);
    refused_promptly(&sdt, &["export", "criu", "S0", "-o", "img"], &[fifo_path, why]);
    Ok(())
}

sdt_test_harness::tests![
    a_program_path_that_reads_as_a_gdb_option_runs_nothing,
    a_snapshot_name_with_a_path_in_it_is_corrupt_and_writes_nothing_outside,
    a_refinement_named_with_a_path_is_refused_and_writes_nothing_outside,
    a_link_beside_an_exported_core_is_not_followed,
    a_library_now_a_fifo_holds_up_no_evaluation,
    a_fifo_mapping_blocks_no_exporter,
    a_64_tib_mapping_exports_small_and_fast,
    a_file_the_stores_owner_cannot_read_stays_out_of_the_exports,
    a_stores_strings_are_printed_escaped,
    a_users_store_that_claims_more_than_the_user_has_is_refused_or_lowered,
    criu_images_of_a_users_store_carry_only_the_users_credentials,
    a_descriptor_the_stores_owner_could_not_open_is_refused,
    a_mapping_naming_a_fifo_ends_a_restore_promptly,
];
