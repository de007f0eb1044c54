//! `sdt export core` and `sdt export criu`, and the program gdb reads symbols from.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sdt_daemon::human::{self, escape};
use sdt_store::Snapshot;

use crate::cli::{ExportCoreOpt, ExportCriuOpt};
use crate::select;

pub fn core(opt: ExportCoreOpt) -> Result<()> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.snapshot))?;
    let report = sdt_gdb::export_core(&snap, &opt.output)
        .with_context(|| format!("exporting {} to {}", snap.name(), opt.output.display()))?;
    eprintln!(
        "sdt: wrote {}: {} of run {}, {} threads, {} mappings, {}",
        opt.output.display(),
        snap.name(),
        run.id(),
        report.threads,
        report.mappings,
        human::bytes(report.bytes)
    );
    print_notes(&report.notes);
    // The program as it ran: where it changed since, the copy kept with the run.
    if let Ok(program) = checked_program(&snap) {
        let kept = if program == Path::new(&snap.meta().process.exe) {
            ""
        } else {
            " (the program as it ran: it changed since, and the run kept a copy)"
        };
        eprintln!(
            "sdt: open it with: gdb {} {}{kept}",
            escape(&program.to_string_lossy()),
            escape(&opt.output.to_string_lossy())
        );
    }
    Ok(())
}

pub fn criu(opt: ExportCriuOpt) -> Result<()> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.snapshot))?;
    let dir = &opt.output;
    let report = criu_export::export_criu(&snap, dir)
        .with_context(|| format!("exporting {} to {}", snap.name(), dir.display()))?;
    eprintln!(
        "sdt: wrote {}: CRIU images of {} of run {}, {} threads, {} mappings, {} descriptors, {} pages, {} in {} files",
        dir.display(),
        snap.name(),
        run.id(),
        report.threads,
        report.vmas,
        report.fds,
        report.pages,
        human::bytes(report.bytes()),
        report.images.len()
    );
    let names: Vec<&str> = report.images.iter().map(|(name, _)| name.as_str()).collect();
    eprintln!("sdt:   {}", names.join(" "));
    print_notes(&report.notes);
    let shell_job = if report.shell_job { " --shell-job" } else { "" };
    eprintln!("sdt: resume it with: criu restore -D {}{shell_job}", dir.display());
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "sdt: note: criu restore needs root (or CAP_CHECKPOINT_RESTORE); `sdt restore {}` resumes it \
             without",
            snap.name()
        );
    }
    Ok(())
}

/// The snapshot's program, for gdb: only if it is the file a mapping of the snapshot
/// read its pages from (or the program deleted before the capture) and the store checks
/// it (the version mapped, a regular file, readable by the store's owner), so that gdb
/// never opens a path the store merely names; the copy kept with the run where the
/// program changed since. Otherwise why not.
pub fn checked_program(snap: &Snapshot) -> Result<PathBuf, String> {
    let exe = &snap.meta().process.exe;
    match snap.meta().program_file() {
        Some(f) => match snap.file_path(f) {
            Ok(path) => Ok(path),
            Err(e) => Err(format!("the program is not used: {}", human::error_chain(&e))),
        },
        None if exe.ends_with(" (deleted)") => Err(format!(
            "the program {exe:?} was deleted before the capture: the snapshot holds its pages only"
        )),
        None => Err(format!("the program {exe:?} is not among the files the snapshot maps")),
    }
}

fn print_notes(notes: &[String]) {
    for note in notes {
        eprintln!("sdt: note: {}", escape(note));
    }
}
