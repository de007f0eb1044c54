//! The keeper thread: keeps the files that each snapshot's mappings take pages from
//! (the program, its libraries, mapped data) with the run, as soon as a snapshot first
//! names them and off the pause ([`sdt_store::FileKeeper`]: a hard link where it can,
//! else a copy), so that the snapshots keep their symbols and pages after the program is
//! rebuilt. A program deleted under its running process (an upgrade replaced it) is
//! kept too, opened through the process.

use std::collections::HashSet;
use std::fs::File;
use std::path::Path;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

use sdt_store::{Content, FileKeeper, FileRef, RunId, SnapshotMeta, Store};
use sdt_sys::Tid;

use crate::{human, procfs};

/// A file to keep, and, where its path no longer reaches it, the file opened.
type ToKeep = (FileRef, Option<File>);

/// Hands the files of each snapshot to the keeper thread, each version once.
pub(crate) struct Keeper {
    /// The program.
    pid: Tid,
    files: Option<Sender<(String, Vec<ToKeep>)>>,
    thread: Option<JoinHandle<Vec<String>>>,
    offered: HashSet<FileRef>,
}

impl Keeper {
    /// Starts the keeper thread for run `run` of the store at `store_root`, which
    /// captures program `pid`. If the store cannot give a keeper, no file is kept, which
    /// [`finish`](Self::finish) says.
    pub(crate) fn start(store_root: &Path, run: RunId, pid: Tid) -> Keeper {
        let keeper = Store::open(store_root).and_then(|store| FileKeeper::new(&store, run));
        let (tx, rx) = channel::<(String, Vec<ToKeep>)>();
        let thread = std::thread::Builder::new()
            .name("sdt-keep".into())
            .spawn(move || {
                let mut keeper = match keeper {
                    Ok(keeper) => keeper,
                    Err(e) => return vec![format!("no file: {}", human::error_chain(&e))],
                };
                let mut not_kept = Vec::new();
                for (snapshot, files) in rx {
                    for (f, opened) in files {
                        let kept = match opened {
                            Some(file) => keeper.keep_opened(&f, file, &snapshot),
                            None => keeper.keep(&f, &snapshot),
                        };
                        match kept {
                            Ok(how) => log::debug!("{} kept: {how:?}", f.path),
                            Err(e) => not_kept.push(format!("{}: {}", f.path, human::error_chain(&e))),
                        }
                    }
                }
                not_kept
            })
            .expect("spawning the keeper thread");
        Keeper { pid, files: Some(tx), thread: Some(thread), offered: HashSet::new() }
    }

    /// Hands over the files `meta`'s mappings take pages from, and its deleted program,
    /// that no snapshot before it named. Not a file the program writes in place through
    /// shared mappings alone ([`SnapshotMeta::written_in_place`]): a copy taken after the
    /// capture would not be its version at the capture (a JVM's `hsperfdata` file changed
    /// before it could be kept, and was removed, and `sdt run` said so at every Java run),
    /// and the restore makes it again from the snapshot's pages once it is gone.
    pub(crate) fn offer(&mut self, meta: &SnapshotMeta) {
        let mut new: Vec<ToKeep> = Vec::new();
        for m in &meta.mappings {
            // Looked at once a version: `written_in_place` reads every mapping.
            if let Content::File(f) = &m.content
                && self.offered.insert(f.clone())
                && !meta.written_in_place(f)
            {
                new.push((f.clone(), None));
            }
        }
        if let Some(f) = &meta.process.deleted_program
            && self.offered.insert(f.clone())
        {
            match procfs::open_deleted_program(self.pid, f) {
                Some(file) => new.push((f.clone(), Some(file))),
                None => log::debug!("the deleted program {} is gone from the process", f.path),
            }
        }
        if new.is_empty() {
            return;
        }
        if let Some(files) = &self.files {
            files.send((meta.name.clone(), new)).ok();
        }
    }

    /// Waits for the files handed over to be kept; those that could not be, each with why.
    pub(crate) fn finish(mut self) -> Vec<String> {
        drop(self.files.take());
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}
