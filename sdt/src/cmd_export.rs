//! `sdt export core`, `sdt export criu` and `sdt gdb`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use sdt_daemon::human;
use sdt_store::{Run, Snapshot};

use crate::cli::{ExportCoreOpt, ExportCriuOpt, GdbOpt};
use crate::select;

pub fn core(opt: ExportCoreOpt) -> Result<()> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.snapshot))?;
    let report = sdt_gdb::export_core(&snap, &opt.output)
        .with_context(|| format!("exporting {} to {}", snap.meta().name, opt.output.display()))?;
    eprintln!(
        "sdt: wrote {}: {} of run {}, {} threads, {} mappings, {}",
        opt.output.display(),
        snap.meta().name,
        run.id(),
        report.threads,
        report.mappings,
        human::bytes(report.bytes)
    );
    Ok(())
}

pub fn criu(opt: ExportCriuOpt) -> Result<()> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, Some(&opt.snapshot))?;
    let dir = &opt.output;
    let report = criu_export::export_criu(&snap, dir)
        .with_context(|| format!("exporting {} to {}", snap.meta().name, dir.display()))?;
    eprintln!(
        "sdt: wrote {}: CRIU images of {} of run {}, {} threads, {} mappings, {} descriptors, {} pages, {} in {} files",
        dir.display(),
        snap.meta().name,
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
    for note in &report.notes {
        eprintln!("sdt: note: {note}");
    }
    let shell_job = if report.shell_job { " --shell-job" } else { "" };
    eprintln!("sdt: resume it with: criu restore -D {}{shell_job}", dir.display());
    Ok(())
}

pub fn gdb(opt: GdbOpt) -> Result<ExitCode> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, opt.snapshot.as_deref())?;
    let core = cached_core(&run, &snap)?;
    let exe = PathBuf::from(&snap.meta().process.exe);
    if !exe.exists() {
        eprintln!("sdt: warning: the program {} is gone; gdb gets the core alone", exe.display());
    }
    let status = sdt_gdb::frontend::gdb_command(&exe, &core, &opt.gdb_args)
        .status()
        .context("running gdb (is it installed? apt-get install gdb)")?;
    Ok(ExitCode::from(status.code().unwrap_or(1) as u8))
}

/// The snapshot's core in the run's `cores/` folder, written unless already there and
/// newer than the snapshot.
pub fn cached_core(run: &Run, snap: &Snapshot) -> Result<PathBuf> {
    let dir = run.dir().join("cores");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let core = dir.join(format!("{}.core", snap.meta().name));
    let snap_file = run.dir().join(format!("S{}.snap", snap.meta().seq));
    if !is_newer(&core, &snap_file) {
        sdt_gdb::export_core(snap, &core).with_context(|| format!("exporting {}", snap.meta().name))?;
    }
    Ok(core)
}

fn is_newer(a: &Path, b: &Path) -> bool {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    matches!((mtime(a), mtime(b)), (Some(a), Some(b)) if a >= b)
}
