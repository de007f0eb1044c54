//! `sdt gdb` and `sdt gdbserver`: gdb on a snapshot, served straight from the store.

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use sdt_daemon::human::escape;
use sdt_gdb::frontend::{EXTENSION, Evaluation, Server, remote_command};
use sdt_gdbserver::{StoreTimeline, serve};
use sdt_store::{Run, RunId, Snapshot};

use crate::cli::{GdbOpt, GdbserverOpt, StoreArgs};
use crate::cmd_export::checked_program;
use crate::select;

pub fn gdb(opt: GdbOpt) -> Result<ExitCode> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, opt.snapshot.as_deref())?;
    // Without the program gdb still shows threads and registers.
    let exe = checked_program(&snap).unwrap_or_else(|why| {
        eprintln!("sdt: warning: {}; gdb gets no symbols of it", escape(&why));
        PathBuf::new()
    });
    let parts = ServerParts::new(&opt.store)?;
    let status =
        remote_command(&exe, parts.extension.path(), parts.server(run.id().0, snap.name()), &opt.gdb_args)
            .status()
            .context("running gdb (is it installed? apt-get install gdb)")?;
    Ok(ExitCode::from(status.code().unwrap_or(1) as u8))
}

/// The program gdb reads `snap`'s symbols from ([`checked_program`]), or an error that
/// says why there is none.
pub fn gdb_program(snap: &Snapshot) -> Result<PathBuf> {
    checked_program(snap).map_err(|why| anyhow::anyhow!("gdb needs the program, and {why}"))
}

/// What gdb gave for one expression: its value as gdb prints it, or why it gave none.
pub type Answer = Result<String, String>;

/// What a gdb connected to `sdt gdbserver` needs besides the run and snapshot: this
/// program, the store's absolute path, SDT's gdb commands in a private file and SDT's MPI
/// libraries in a private folder, both removed on drop.
pub struct ServerParts {
    pub sdt: PathBuf,
    pub store: PathBuf,
    pub extension: tempfile::NamedTempFile,
    pub libraries: tempfile::TempDir,
}

impl ServerParts {
    pub fn new(store: &StoreArgs) -> Result<ServerParts> {
        let sdt = std::env::current_exe().context("finding the sdt program, to start the server")?;
        let store = std::path::absolute(&store.store).context("the store's path")?;
        let mut extension = tempfile::Builder::new()
            .prefix("sdt-gdb-")
            .suffix(".py")
            .tempfile()
            .context("writing SDT's gdb commands to a temporary file")?;
        extension.write_all(EXTENSION.as_bytes()).context("writing SDT's gdb commands")?;
        let libraries = tempfile::Builder::new()
            .prefix("sdt-gdb-libs-")
            .tempdir()
            .context("making a folder for SDT's MPI libraries")?;
        for mpi in sdt_mpi::Mpi::ALL {
            if let Some(bytes) = mpi.library() {
                std::fs::write(libraries.path().join(mpi.file_name()), bytes)
                    .with_context(|| format!("writing {} for gdb", mpi.file_name()))?;
            }
        }
        Ok(ServerParts { sdt, store, extension, libraries })
    }

    /// The server of snapshot `snapshot` of run `run`, in these parts' store.
    pub fn server<'a>(&'a self, run: u32, snapshot: &'a str) -> Server<'a> {
        Server { sdt: &self.sdt, store: &self.store, run, snapshot, libraries: self.libraries.path() }
    }

    /// Each of `exprs` as gdb evaluates it at `snap` of `run`, with the snapshot's program
    /// ([`checked_program`]), in the user's frame: its value or why gdb gave none.
    pub fn evaluate(&self, run: &Run, snap: &Snapshot, exprs: &[String]) -> Result<Vec<Answer>> {
        let program = gdb_program(snap)?;
        let server = self.server(run.id().0, snap.name());
        let evaluated = sdt_gdb::frontend::evaluate(&program, self.extension.path(), server, exprs)
            .context("running gdb (is it installed? apt-get install gdb)")?;
        Ok(evaluated.into_iter().map(|e| e.value).collect())
    }

    /// Each of `exprs` in each of `snapshots` (`(run, name)`, runs of the tree `server`
    /// serves), through one gdb on `program` that goes from snapshot to snapshot: the
    /// values, snapshot by snapshot. A name that is not one plain word (it goes on gdb's
    /// command line) gives an error for each expression, without asking gdb.
    pub fn evaluate_in_each(
        &self,
        program: &Path,
        server: Server,
        snapshots: &[(RunId, String)],
        exprs: &[String],
    ) -> Result<Vec<Vec<Evaluation>>> {
        let plain = |name: &str| name.chars().all(|c| c.is_ascii_graphic() && c != ':');
        let asked: Vec<String> = snapshots
            .iter()
            .filter(|(_, name)| plain(name))
            .map(|(run, name)| format!("{run}:{name}"))
            .collect();
        let mut values = if asked.is_empty() {
            Vec::new().into_iter()
        } else {
            sdt_gdb::frontend::evaluate_in_each(program, self.extension.path(), server, &asked, exprs)
                .context("running gdb (is it installed? apt-get install gdb)")?
                .into_iter()
        };
        let failed = |why: String| vec![Evaluation { value: Err(why), elsewhere: None }; exprs.len()];
        let answer = |(_, name): &(RunId, String)| match plain(name) {
            true => values.next().unwrap_or_else(|| failed("gdb gave no answer".to_owned())),
            false => failed(format!("the snapshot's name {name:?} is not a plain word")),
        };
        Ok(snapshots.iter().map(answer).collect())
    }
}

pub fn gdbserver(opt: GdbserverOpt) -> Result<()> {
    let (run, snap) = select::open_snapshot(&opt.store, &opt.run, opt.snapshot.as_deref())?;
    let store = select::open_store(&opt.store)?;
    let root = opt.run.run.map_or_else(|| store.latest_run(), |id| Ok(sdt_store::RunId(id)))?;
    let mut timeline = StoreTimeline::new(store, root, run.id(), snap);
    match opt.listen {
        None => {
            serve(&mut timeline, std::io::stdin().lock(), std::io::stdout().lock()).context("serving gdb")
        }
        Some(addr) => {
            let listener = TcpListener::bind(addr).with_context(|| format!("listening on {addr}"))?;
            let addr = listener.local_addr().context("the address listened on")?;
            eprintln!("sdt: serving {} to one gdb: target remote {addr}", timeline_name(&timeline));
            let (stream, peer) = listener.accept().context("waiting for gdb")?;
            log::info!("gdb connected from {peer}");
            let input = BufReader::new(stream.try_clone().context("the connection")?);
            serve(&mut timeline, input, stream).context("serving gdb")
        }
    }
}

fn timeline_name(timeline: &StoreTimeline) -> String {
    use sdt_gdbserver::Timeline;
    timeline.current().name().to_owned()
}
