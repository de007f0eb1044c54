//! Files kept with a run: a snapshot whose program or library was replaced after the
//! capture still reads that file's pages, from the version the run kept; a kept version
//! that changed too is not used; names from the store make one file name, never a path.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sdt_store::{Content, Error, FileKeeper, FileRef, Kept, PageSource, RunId, Snapshot, Store, kept_name};
use sdt_test_harness::Skip;

use crate::common::*;

const LIB: u64 = 0x7f00_0000_0000;

/// Writes `bytes` as the file at `path`, replacing it by a rename (a new inode), the
/// way compilers and package managers replace files.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A temporary folder holding a store and `libwork.so` (`lib_bytes(1)`).
fn lib_and_store() -> (tempfile::TempDir, PathBuf, Store) {
    let tmp = tempfile::tempdir().unwrap();
    let lib = tmp.path().join("libwork.so");
    std::fs::write(&lib, lib_bytes(1)).unwrap();
    let store = Store::open_or_create(&tmp.path().join(".sdt")).unwrap();
    (tmp, lib, store)
}

fn lib_bytes(tag: u8) -> Vec<u8> {
    (0..PAGE * 2).map(|i| (i as u8).wrapping_mul(7) ^ tag).collect()
}

/// A run of `store` with one snapshot, S0, that maps the file at `path` (two pages, none
/// stored); its id and what it records of the file.
fn run_mapping(store: &Store, path: &Path) -> (RunId, FileRef) {
    let f = FileRef::of(path.to_str().unwrap(), &std::fs::metadata(path).unwrap());
    let (log, mut writer) = create_run(store);
    let id = log.run().id();
    let mapping = with_content(LIB, 2, Content::File(f.clone()));
    writer.write_snapshot(meta(0, vec![mapping]), Vec::<(u64, PageSource)>::new()).unwrap();
    drop(writer);
    log.finish(sdt_store::RunStatus::Exited { code: 0 }).unwrap();
    (id, f)
}

fn s0(store: &Store, id: RunId) -> Snapshot {
    store.open_run(&id).unwrap().open_snapshot("S0").unwrap()
}

fn read_lib(snap: &Snapshot) -> sdt_store::Result<Vec<u8>> {
    let mut buf = vec![0; PAGE * 2];
    snap.read(LIB, &mut buf).map(|()| buf)
}

fn a_replaced_file_is_read_from_the_version_the_run_kept() {
    let (tmp, lib, store) = lib_and_store();
    let (kept_run, f) = run_mapping(&store, &lib);
    let (not_kept_run, _) = run_mapping(&store, &lib);
    let mut keeper = FileKeeper::new(&store, kept_run).unwrap();
    // Same file system, a file of ours: a link.
    assert_eq!(keeper.keep(&f, "S0").unwrap(), Kept::Linked);
    assert_eq!(keeper.keep(&f, "S0").unwrap(), Kept::Already);
    // A link to a file outside the store costs it nothing.
    assert_eq!(store.kept_bytes().unwrap(), 0);

    replace(&lib, &lib_bytes(2));
    let snap = s0(&store, kept_run);
    assert_eq!(read_lib(&snap).unwrap(), lib_bytes(1));
    let path = snap.file_path(&f).unwrap();
    assert!(path.is_absolute(), "{}", path.display());
    assert!(path.starts_with(store.root().canonicalize().unwrap().join("runs")), "{}", path.display());
    assert_eq!(std::fs::read(&path).unwrap(), lib_bytes(1));
    // A shared mapping is of the file at its path, where it changed: no copy helps it.
    snap.check_files().unwrap();
    assert!(matches!(snap.check_file_in_place(&f).unwrap_err(), Error::FileChanged { .. }));

    // The run that kept nothing says the file changed, and reads nothing from the new one.
    let err = read_lib(&s0(&store, not_kept_run)).unwrap_err();
    assert!(matches!(err, Error::FileChanged { .. }), "{err}");

    // A file still the version mapped is read where it lies.
    std::fs::write(tmp.path().join("other.so"), lib_bytes(3)).unwrap();
    let (id, f) = run_mapping(&store, &tmp.path().join("other.so"));
    FileKeeper::new(&store, id).unwrap().keep(&f, "S0").unwrap();
    assert_eq!(s0(&store, id).file_path(&f).unwrap(), tmp.path().join("other.so"));
}

fn a_kept_link_rewritten_in_place_is_not_used() {
    let (_tmp, lib, store) = lib_and_store();
    let (id, f) = run_mapping(&store, &lib);
    assert_eq!(FileKeeper::new(&store, id).unwrap().keep(&f, "S0").unwrap(), Kept::Linked);
    // Written in place (`cp` over it): the kept link is that inode, so it changed too.
    std::thread::sleep(std::time::Duration::from_millis(10));
    let mut file = std::fs::OpenOptions::new().write(true).truncate(true).open(&lib).unwrap();
    file.write_all(&lib_bytes(2)).unwrap();
    drop(file);
    let err = read_lib(&s0(&store, id)).unwrap_err();
    assert!(matches!(err, Error::FileChanged { .. }), "{err}");
}

fn a_file_that_changed_before_it_was_kept_is_not_kept() {
    let (_tmp, lib, store) = lib_and_store();
    let (id, f) = run_mapping(&store, &lib);
    replace(&lib, &lib_bytes(2));
    let err = FileKeeper::new(&store, id).unwrap().keep(&f, "S0").unwrap_err();
    assert!(matches!(err, Error::FileChanged { .. }), "{err}");
    assert!(matches!(read_lib(&s0(&store, id)).unwrap_err(), Error::FileChanged { .. }));
}

fn a_file_on_another_file_system_is_copied_once() -> Result<(), Skip> {
    let shm = Path::new("/dev/shm");
    let tmp = tempfile::tempdir().unwrap();
    let other = match tempfile::tempdir_in(shm) {
        Ok(dir)
            if std::fs::metadata(dir.path()).unwrap().dev()
                != std::fs::metadata(tmp.path()).unwrap().dev() =>
        {
            dir
        }
        _ => {
            return Err(Skip::new(
                "a second file system",
                "/dev/shm is not a file system of its own here",
                "mount a tmpfs on /dev/shm",
            ));
        }
    };
    let lib = tmp.path().join("libwork.so");
    std::fs::write(&lib, lib_bytes(1)).unwrap();
    let store = Store::open_or_create(&other.path().join(".sdt")).unwrap();
    let (first, f) = run_mapping(&store, &lib);
    assert_eq!(
        FileKeeper::new(&store, first).unwrap().keep(&f, "S0").unwrap(),
        Kept::Copied(PAGE as u64 * 2)
    );
    // A later run of the same version links the first one's copy.
    let (second, _) = run_mapping(&store, &lib);
    assert_eq!(FileKeeper::new(&store, second).unwrap().keep(&f, "S0").unwrap(), Kept::Already);

    replace(&lib, &lib_bytes(2));
    let (a, b) = (s0(&store, first).file_path(&f).unwrap(), s0(&store, second).file_path(&f).unwrap());
    let (a_meta, b_meta) = (std::fs::metadata(&a).unwrap(), std::fs::metadata(&b).unwrap());
    assert_eq!((a_meta.ino(), a_meta.nlink(), a_meta.mode() & 0o777), (b_meta.ino(), 2, 0o600));
    // The copy is the store's, counted once.
    assert_eq!(store.kept_bytes().unwrap(), a_meta.blocks() * 512);
    assert!(a_meta.blocks() * 512 >= PAGE as u64 * 2);
    assert_eq!(read_lib(&s0(&store, second)).unwrap(), lib_bytes(1));

    // A run whose copies have used up its budget copies no more.
    std::fs::write(tmp.path().join("big.so"), vec![7; PAGE * 3]).unwrap();
    let (third, big) = run_mapping(&store, &tmp.path().join("big.so"));
    let mut keeper = FileKeeper::new(&store, third).unwrap().with_copy_budget(PAGE as u64 * 5);
    assert_eq!(keeper.keep(&big, "S0").unwrap(), Kept::Copied(PAGE as u64 * 3));
    std::fs::write(tmp.path().join("big2.so"), vec![8; PAGE * 3]).unwrap();
    let (_, big2) = run_mapping(&store, &tmp.path().join("big2.so"));
    let err = keeper.keep(&big2, "S0").unwrap_err();
    let why = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default();
    assert!(why.contains("the run may still copy"), "{err}: {why}");
    Ok(())
}

fn what_is_planted_under_a_kept_name_is_not_followed() {
    let (tmp, lib, store) = lib_and_store();
    let (id, f) = run_mapping(&store, &lib);
    replace(&lib, &lib_bytes(2));
    // Another file of the same size and mtime, reached through a link in `files/`.
    let decoy = tmp.path().join("decoy.so");
    std::fs::write(&decoy, lib_bytes(3)).unwrap();
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(f.mtime_ns as u64);
    std::fs::File::options().write(true).open(&decoy).unwrap().set_modified(mtime).unwrap();
    let files = store.root().join("runs").join(id.to_string()).join("files");
    std::fs::create_dir(&files).unwrap();
    std::os::unix::fs::symlink(&decoy, files.join(kept_name(&f))).unwrap();
    let err = read_lib(&s0(&store, id)).unwrap_err();
    assert!(matches!(err, Error::FileChanged { .. }), "{err}");
    // Nor a `files` folder that is a link.
    std::fs::remove_dir_all(&files).unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::copy(&decoy, elsewhere.join(kept_name(&f))).unwrap();
    std::fs::File::options()
        .write(true)
        .open(elsewhere.join(kept_name(&f)))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    std::os::unix::fs::symlink(&elsewhere, &files).unwrap();
    let err = read_lib(&s0(&store, id)).unwrap_err();
    assert!(matches!(err, Error::FileChanged { .. }), "{err}");
}

fn a_file_a_users_store_could_not_read_is_not_kept_by_root() -> Result<(), Skip> {
    sdt_test_harness::root("only root writes into another user's store")?;
    let (_tmp, lib, store) = lib_and_store();
    let (id, f) = run_mapping(&store, &lib);
    let run_dir = store.root().join("runs").join(id.to_string());
    for dir in [store.root().to_owned(), run_dir] {
        std::os::unix::fs::chown(&dir, Some(1000), Some(1000)).unwrap();
    }
    // Root's, 0600: uid 1000 may not read it, so no copy or link of it is made for them.
    std::fs::set_permissions(&lib, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let err = FileKeeper::new(&store, id).unwrap().keep(&f, "S0").unwrap_err();
    assert!(matches!(err, Error::FileRefused { .. }), "{err}");
    assert!(!store.root().join("runs").join(id.to_string()).join("files").join(kept_name(&f)).exists());
    Ok(())
}

fn kept_names_are_one_file_name_whatever_the_store_records() {
    let f = |path: &str| FileRef { path: path.into(), dev: 0xfe01, inode: 7, size: 8192, mtime_ns: -1 };
    assert_eq!(kept_name(&f("/usr/lib/libc.so.6")), "fe01-7-2000-ffffffffffffffff-libc.so.6");
    for path in ["/a/../..", "..", "/", "", "x\0/y", "/tmp/a b\n$(rm)", "/tmp/é", &"/x".repeat(300)] {
        let name = kept_name(&f(path));
        assert!(
            name.starts_with("fe01-7-2000-")
                && name.len() < 200
                && !name.contains('/')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c)),
            "{path:?} -> {name:?}"
        );
    }
}

/// A program deleted under its process is kept from the file opened before (it cannot be
/// linked: no name is left), executable for the store's owner alone; the snapshot that
/// maps the path it had reads it from there.
fn a_deleted_program_is_kept_from_the_open_file_executable_for_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let (_tmp, lib, store) = lib_and_store();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (id, f) = run_mapping(&store, &lib);
    let opened = std::fs::File::open(&lib).unwrap();
    std::fs::remove_file(&lib).unwrap();
    let mut keeper = FileKeeper::new(&store, id).unwrap();
    assert_eq!(keeper.keep_opened(&f, opened, "S0").unwrap(), Kept::Copied(PAGE as u64 * 2));
    let kept = s0(&store, id).file_path(&f).unwrap();
    assert_eq!(std::fs::metadata(&kept).unwrap().mode() & 0o777, 0o700);
    assert_eq!(read_lib(&s0(&store, id)).unwrap(), lib_bytes(1));
    // A file opened that is not the version recorded is not kept for it.
    std::fs::write(&lib, lib_bytes(2)).unwrap();
    let recorded = FileRef { path: "/nonexistent/prog".into(), ..f.clone() };
    let other = std::fs::File::open(&lib).unwrap();
    assert!(matches!(keeper.keep_opened(&recorded, other, "S0"), Err(Error::FileChanged { .. })));
}

sdt_test_harness::tests![
    a_replaced_file_is_read_from_the_version_the_run_kept,
    a_kept_link_rewritten_in_place_is_not_used,
    a_file_that_changed_before_it_was_kept_is_not_kept,
    a_file_on_another_file_system_is_copied_once,
    what_is_planted_under_a_kept_name_is_not_followed,
    a_file_a_users_store_could_not_read_is_not_kept_by_root,
    kept_names_are_one_file_name_whatever_the_store_records,
    a_deleted_program_is_kept_from_the_open_file_executable_for_its_owner,
];
