//! A store holds secrets and is read by root in other users' directories: it is private
//! whatever the umask, and a link or FIFO planted in it is refused, never followed or
//! waited on.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use sdt_store::{Error, PageSource, RunId, Store};
use sdt_test_harness::Skip;

use crate::common::*;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

fn store_files_are_private_whatever_the_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    // The umask is the process's: other tests that create files meanwhile only get
    // looser permissions for their temporary files.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    let made = (|| {
        let store = Store::open_or_create(&root)?;
        let log = store.create_run(run_info())?;
        let mut writer = log.compactor()?;
        let page = page(1, 0x1000);
        writer.write_snapshot(meta(0, vec![anon(0x1000, 1)]), [(0x1000, PageSource::Data(&page))])?;
        let mut spill = log.spares().make()?;
        spill.grow(4096, usize::MAX)?;
        drop(spill);
        log.finish(sdt_store::RunStatus::Exited { code: 0 })
    })();
    nix::sys::stat::umask(old);
    made.unwrap();
    for dir in ["", "runs", "runs/1"] {
        assert_eq!(mode(&root.join(dir)), 0o700, "{dir}/");
    }
    for file in ["runs/1/run.json", "runs/1/lock", "runs/1/S0.snap"] {
        assert_eq!(mode(&root.join(file)), 0o600, "{file}");
    }
    let store = Store::open(&root).unwrap();
    assert_eq!(store.exposed_mode().unwrap(), None);
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(store.exposed_mode().unwrap(), Some(0o755));
}

fn links_and_fifos_in_a_store_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
    let log = store.create_run(run_info()).unwrap();
    let mut writer = log.compactor().unwrap();
    for seq in 0..2 {
        let page = page(seq as u8, 0x1000);
        writer.write_snapshot(meta(seq, vec![anon(0x1000, 1)]), [(0x1000, PageSource::Data(&page))]).unwrap();
    }
    drop(writer);
    log.finish(sdt_store::RunStatus::Exited { code: 0 }).unwrap();
    let run_dir = store.root().join("runs/1");
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, b"not the store's").unwrap();

    // A link in place of a snapshot.
    std::fs::remove_file(run_dir.join("S1.snap")).unwrap();
    std::os::unix::fs::symlink(&secret, run_dir.join("S1.snap")).unwrap();
    let run = store.open_run(&RunId(1)).unwrap();
    let e = run.open_snapshot("S1").unwrap_err();
    assert!(e.to_string().contains("symbolic link") || format!("{e:?}").contains("symbolic link"), "{e:?}");

    // A FIFO in place of a snapshot: refused at once, not waited on.
    std::fs::remove_file(run_dir.join("S1.snap")).unwrap();
    nix::unistd::mkfifo(&run_dir.join("S1.snap"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let start = Instant::now();
    let e = run.open_snapshot("S1").unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(format!("{e:?}").contains("not a regular file"), "{e:?}");

    // A link in place of run.json, and a run directory that is a link.
    std::fs::rename(run_dir.join("run.json"), tmp.path().join("run.json")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("run.json"), run_dir.join("run.json")).unwrap();
    assert!(matches!(store.open_run(&RunId(1)), Err(Error::Io { .. })));
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, store.root().join("runs/2")).unwrap();
    assert_eq!(store.run_ids().unwrap(), vec![RunId(1)]);
    assert!(store.open_run(&RunId(2)).is_err());

    // Creating a run does not follow a link planted where its files go.
    std::fs::remove_file(store.root().join("runs/2")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, store.root().join("runs/2")).unwrap();
    let log = store.create_run(run_info()).unwrap();
    assert_eq!(log.run().id(), RunId(3));
    assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    assert_eq!(std::fs::read(&secret).unwrap(), b"not the store's");
}

fn root_creating_in_a_users_store_leaves_it_theirs() -> Result<(), Skip> {
    sdt_test_harness::root("it needs root (a store owned by another uid)")?;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("store");
    std::fs::create_dir(&root).unwrap();
    std::os::unix::fs::chown(&root, Some(1001), Some(1001)).unwrap();
    let store = Store::open(&root).unwrap();
    let log = store.create_run(run_info()).unwrap();
    log.finish(sdt_store::RunStatus::Exited { code: 0 }).unwrap();
    for path in ["runs", "runs/1", "runs/1/run.json", "runs/1/lock", "latest"] {
        let meta = std::fs::symlink_metadata(root.join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (1001, 1001), "{path}");
    }
    Ok(())
}

/// A run's new small file is written by exactly one of the processes that write it, is
/// private, and a link planted at its name is left as it is, never followed.
fn a_new_small_file_is_written_once_and_never_through_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
    let log = store.create_run(run_info()).unwrap();
    log.finish(sdt_store::RunStatus::Exited { code: 0 }).unwrap();
    let run = store.open_run(&RunId(1)).unwrap();
    assert!(run.create_small_file("record", b"first").unwrap());
    assert!(!run.create_small_file("record", b"second").unwrap());
    assert_eq!(run.read_small_file("record", 64).unwrap().unwrap(), b"first");
    assert_eq!(mode(&run.dir().join("record")), 0o600);
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, run.dir().join("planted")).unwrap();
    assert!(!run.create_small_file("planted", b"evil").unwrap());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let left: Vec<_> = std::fs::read_dir(run.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!left.iter().any(|n| n.to_string_lossy().ends_with(".tmp")), "{left:?}");
}

sdt_test_harness::tests![
    a_new_small_file_is_written_once_and_never_through_a_link,
    store_files_are_private_whatever_the_umask,
    links_and_fifos_in_a_store_are_refused,
    root_creating_in_a_users_store_leaves_it_theirs,
];
