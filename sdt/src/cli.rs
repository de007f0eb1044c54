//! The command line: one `Action` per subcommand, shared option groups flattened in.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  sdt run --config capture.toml -- ./prog args   run once, capturing snapshots
  mpirun -np 3 sdt run -- ./prog                  each rank of an MPI job, as one job
  sdt attach 4242                                 a snapshot of a running process, which runs on
  sdt ls                                          the latest run's snapshots
  sdt show S3                                     threads and mappings of S3
  sdt gdb S3                                      open S3 in gdb
  sdt gdb 2:S3                                    open rank 2's S3 after a job
  sdt export core S3 -o core.S3                   an ELF core file for any tool
  sdt export criu S3 -o img                       CRIU images: criu restore -D img --shell-job
  sdt restore S3                                  resume the program from S3
  sdt refine --from S1 --to S2 --check total      re-run S1..S2 under a finer config
  sdt history total --plot total.svg               a variable in every snapshot, plotted
  sdt diff S1 S2                                  variables, memory and threads that changed
  sdt compare --reference 1 --run 2               where run 2 first departs from run 1
  sdt runs                                        every run in the store
  sdt doctor                                      check what SDT needs on this machine";

/// SDT, a snapshot debugger for multithreaded programs: run a program once, capture every
/// thread and page at the breakpoints you marked, then inspect any snapshot in gdb.
#[derive(Debug, Parser)]
#[command(name = "sdt", version, after_help = EXAMPLES)]
pub struct Opt {
    #[command(subcommand)]
    pub action: Action,
}

/// The store, shared by every subcommand.
#[derive(Debug, Args)]
pub struct StoreArgs {
    /// Snapshot store directory.
    #[arg(long, env = "SDT_STORE", default_value = ".sdt")]
    pub store: PathBuf,
}

/// Which run of the store to read.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run to read (default: the latest).
    #[arg(long = "run", value_name = "ID")]
    pub run: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Run a program, capturing a snapshot at every breakpoint that passes the config.
    ///
    /// The program's stdin, stdout, stderr, signals and exit code are its own; sdt's
    /// exit code is the program's, or 125 if the store could not take a snapshot the
    /// config asked for (the disk was full: that breakpoint returned SDT_DECLINED).
    ///
    /// A signal about to end the program (SIGSEGV, SIGABRT, an unhandled SIGTERM, …) gets
    /// a snapshot of its own before it is delivered (see --no-signal-snapshot).
    ///
    /// Under an MPI launcher (`mpirun … sdt run -- ./prog`), each rank's run records the
    /// job id, rank and size the launcher's environment gives (Open MPI, MPICH's Hydra,
    /// Slurm) and the host's name: `sdt ls` shows the job, `2:S3` names rank 2's S3.
    #[command(after_help = "Examples:
  sdt run --config capture.toml --every 100 -- ./prog --threads 4
  mpirun -np 3 --host a,b,c sdt run --store /shared/.sdt -- ./prog")]
    Run(RunOpt),
    /// Capture a running process sdt did not start, as gdb's gcore does, and let it go: a
    /// snapshot of every thread and page now, what its blocked threads wait for (a
    /// deadlock or a hang is named), and the process runs on, untraced, as before.
    ///
    /// With --watch (or --every, --for), sdt stays attached: a snapshot at every --every
    /// tick and one at a signal about to end the process, until it ends, --for runs out
    /// or sdt gets Ctrl-C (SIGINT), SIGTERM or SIGHUP; then it is let go. Its
    /// SetBreakpoint calls stay off: they capture only under `sdt run`. If sdt is killed,
    /// the kernel lets the process go. The snapshots are a run of the store like any
    /// other: `sdt ls`, `sdt show`, `sdt gdb`, `sdt export`, `sdt restore`.
    ///
    /// Exit code 0 once the snapshot is stored; 1 when none could be taken; 125 when the
    /// store had no room for one (the one at a signal, say).
    #[command(after_help = "Examples:
  sdt attach $(pidof server)                       one snapshot; the server runs on
  sdt attach 4242 --every 1s --for 10s             a snapshot a second for ten seconds
  sdt attach 4242 --watch                          until it crashes (a snapshot at the signal) or Ctrl-C")]
    Attach(AttachOpt),
    /// List the snapshots of a run; of every rank of the job, for a rank of an MPI job.
    Ls(LsOpt),
    /// List the runs in the store.
    Runs(RunsOpt),
    /// Compact a run's raw snapshots (diff and compress them): what a run left when its
    /// sdt died, or when compaction stopped for want of disk space. The background
    /// compaction `sdt run` starts when the program ends runs on idle CPU time only: this
    /// stops it and finishes the rest at once.
    #[command(after_help = "Example:\n  sdt compact --run 3")]
    Compact(CompactOpt),
    /// Remove runs from the store, with every snapshot in them. A run goes with its
    /// refinements and the other ranks of its job, which must be named too; a run whose
    /// capture is going on is refused, and its background compaction is stopped first.
    /// Removed run ids are not given to later runs.
    #[command(after_help = "Examples:\n  sdt rm 3\n  sdt rm 2-5 8 --dry-run")]
    Rm(RmOpt),
    /// Show a snapshot: trigger, timing, threads (what each was doing, pc, sp), what the
    /// blocked ones wait for (a mutex and its holder, a thread being joined, a descriptor,
    /// a child) and the deadlocks that makes, descriptors, mappings.
    Show(ShowOpt),
    /// Print an MPI job's message history: every rank's sends, receives (with the source
    /// and tag a wildcard receive took), completions, probes and collectives (non-blocking
    /// ones as their post and their completion), each with its vector clock and the source
    /// line that called MPI.
    #[command(after_help = "Examples:
  sdt events
  sdt events --json | jq '.[] | select(.kind == \"recv\")'
  sdt events --perfetto job.json     # open in ui.perfetto.dev")]
    Events(EventsOpt),
    /// The messages a rank's snapshot depends on: every message in its causal past
    /// received since the job's previous global snapshot, with its sender, the source
    /// lines of its send and receive, and the sender's last snapshot before the send.
    #[command(after_help = "Examples:\n  sdt why 2:S3\n  sdt why 2:S3 --json")]
    Why(WhyOpt),
    /// Find errors in an MPI job's message history: ranks blocked for ever (deadlock),
    /// messages never received, receives truncated, requests never completed, ranks that
    /// called MPI_Abort or that an MPI error ended, collectives that do not match across a
    /// communicator's members. Exit 0 when there are none, 1 when there are.
    Check(CheckOpt),
    /// Re-execute an MPI job from its start with every message race going the way it
    /// went (the matches in its replay record, `mpi-replay`, written from the history on
    /// first use): a new job in the store. `--until G` captures each rank at the global
    /// snapshot G again and ends the job there; `--check` compares expressions at G with
    /// the original's.
    #[command(after_help = "Examples:\n  sdt replay --dry-run\n  sdt replay --until G2 --check total,count")]
    Replay(ReplayOpt),
    /// Roll an MPI job back before an event of its history (`RANK:SEQ`, as `sdt events`
    /// lists them): the latest consistent global snapshot that does not contain it, or
    /// the cut just before it when none was taken; `--replay` runs the job again and
    /// stops every rank there. Without --replay, exit 1 when no global snapshot comes
    /// before the event.
    #[command(after_help = "Examples:\n  sdt rollback 2:14\n  sdt rollback 2:14 --replay")]
    Rollback(RollbackOpt),
    /// Draw an MPI job's time–process diagram: a line per rank, an arrow per message,
    /// the snapshots, the global snapshots (green: consistent, red: not) and what
    /// `sdt check` finds.
    Diagram(DiagramOpt),
    /// Write a snapshot in another tool's format.
    #[command(subcommand)]
    Export(ExportAction),
    /// Open a snapshot in gdb, served straight from the store (`sdt gdbserver`), with
    /// SDT's commands: `sdt list`, `sdt goto S4`, `sdt next`, `sdt prev`,
    /// `sdt history EXPR`, `sdt last EXPR`, `sdt waits`.
    Gdb(GdbOpt),
    /// Serve a snapshot to gdb over its remote protocol, on stdin/stdout
    /// (`target remote | sdt gdbserver S3`) or on a TCP port (`--listen`), for gdb and the
    /// IDEs that speak to gdbserver. `monitor goto S4` moves to another snapshot.
    #[command(after_help = "Examples:
  (gdb) target remote | sdt gdbserver S3
  sdt gdbserver S3 --listen 127.0.0.1:2345")]
    Gdbserver(GdbserverOpt),
    /// Print an expression in every snapshot of a run and of its refinements: snapshot,
    /// thread, trigger and the value as gdb prints it (one gdb goes from snapshot to
    /// snapshot, in the thread that took each).
    ///
    /// A local that thread's frame does not see is taken from a caller's frame, from the
    /// frame of the function whose block encloses it on the one thread that runs it
    /// (main's variables, for the threads of an OpenMP region), or from the one other
    /// thread with a frame that has it (main's, for a lambda's thread): the row says
    /// where. A C++ reference is given as what it refers to.
    ///
    /// A refinement's snapshots are named RUN:NAME. An expression gdb cannot evaluate in
    /// a snapshot gives the error there, in <angle brackets> (in JSON as "error"), and
    /// the exit code is 1 if that happened anywhere.
    #[command(after_help = "Examples:
  sdt history total
  sdt history --changes 'acct[3].balance' --json
  sdt history total --plot total.svg")]
    History(HistoryOpt),
    /// Resume the program from a snapshot: same memory, threads, registers, files and
    /// signal handlers, same thread ids (in a new PID namespace; without root, in a user
    /// namespace of its own that maps only your user and group).
    ///
    /// Without --config or --every the program runs on untraced and sdt's exit code is
    /// its own. With them, its breakpoints capture again, into a new run whose snapshots
    /// are named after SNAP (S3.0, S3.1, …).
    #[command(
        after_help = "Examples:\n  sdt restore S3\n  sdt restore S3 --config fine.toml\n  sdt restore S3 -- VERBOSE=1"
    )]
    Restore(RestoreOpt),
    /// Narrow a bug down between two snapshots: resume the first under a finer capture
    /// config until the program reaches the second's breakpoint again, and check that
    /// the key variables came out as they did.
    ///
    /// The new snapshots are S1.0, S1.1, … and S2.new. The check evaluates each EXPR
    /// in gdb on S2 and on S2.new; on a mismatch the interval is run again, up to
    /// --retries times. The exit code is 0 when the values matched.
    #[command(
        after_help = "Example:\n  sdt refine --from S1 --to S2 --config fine.toml --check 'total,acct[3].balance'"
    )]
    Refine(RefineOpt),
    /// What changed between two snapshots: global and thread-local variables by name
    /// (from the program's DWARF), other changed memory as ranges with the mapping they
    /// lie in, and threads that appeared, ended or moved.
    ///
    /// A snapshot may name its run or rank: `2:S3` (rank 2's after a job, else run 2's),
    /// `run2:S3`, so A and B may come from different runs or ranks.
    #[command(
        after_help = "Examples:\n  sdt diff S1 S2\n  sdt diff S1 S2 --all\n  sdt diff 1:S3 2:S3 --json"
    )]
    Diff(DiffOpt),
    /// Check a run against a reference run (the same program on one thread, say): pair
    /// their snapshots by breakpoint arrival (level, class, id, hit), compare the chosen
    /// variables at each, and report the first arrival where they differ and the last
    /// where they agreed. Exit code 0 when nothing differs, 1 when something does.
    #[command(after_help = "Example:\n  sdt compare --reference 1 --run 2 --vars total,grid --rtol 1e-9")]
    Compare(CompareOpt),
    /// Check what SDT needs on this machine (ptrace, write tracking, gdb, CRIU, the
    /// kernel module), each by trying it, and say how to fix what is missing. Exit 1 if
    /// something `sdt run` or `sdt gdb` needs is missing.
    Doctor,
    /// Print a shell completion script for sdt (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  sdt completions bash > ~/.local/share/bash-completion/completions/sdt"
    )]
    Completions(CompletionsOpt),
    /// Write sdt's man pages (sdt.1, sdt-run.1, …) into a directory.
    #[command(hide = true)]
    Manpages(ManpagesOpt),
}

#[derive(Debug, Args)]
pub struct DiffOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// The first snapshot (S3, 3, N:S3 for rank N's after a job or run N's, run2:S3).
    pub a: String,
    /// The second snapshot.
    pub b: String,
    /// Print a JSON object: {"variables": […], "ranges": […], "threads": […]}.
    #[arg(long)]
    pub json: bool,
    /// List every changed range of other memory. Past 32 of them, the text gives the
    /// changes by mapping and the 32 largest ranges.
    #[arg(long, conflicts_with = "json")]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct CompareOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The reference run.
    #[arg(long, value_name = "ID")]
    pub reference: u32,
    #[command(flatten)]
    pub run: RunArgs,
    /// What to compare, comma-separated (default: every global variable): variables,
    /// members and elements by name (`total,grid[2],origin.y`), or any expression gdb
    /// evaluates.
    #[arg(long, value_name = "EXPR[,EXPR…]")]
    pub vars: Vec<String>,
    /// Relative tolerance for numbers: |value - reference| <= atol + rtol * |reference|.
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    pub rtol: f64,
    /// Absolute tolerance for numbers.
    #[arg(long, value_name = "Y", default_value_t = 0.0)]
    pub atol: f64,
    /// Print a JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Capture settings for a run that resumes a snapshot.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Capture config (TOML), as for `sdt run`.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Also take a timed snapshot every MS milliseconds (`50`, or with a unit: `50ms`,
    /// `0.5s`).
    #[arg(long, value_name = "MS", value_parser = interval_ms)]
    pub every: Option<u64>,
    /// No line per snapshot.
    #[arg(long, short)]
    pub quiet: bool,
    /// How threads are stopped: a restored process is captured with `ptrace` (`auto`
    /// picks it too).
    #[arg(long, value_enum, default_value_t = BackendArg::Ptrace)]
    pub backend: BackendArg,
}

#[derive(Debug, Args)]
pub struct RestoreOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Snapshot to resume (S3, or 3; N:S3 is rank N's S3 after a job, else run N's).
    pub snapshot: String,
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Resume with sdt's own credentials (root's, every capability) instead of those the
    /// program had: it can then read and change anything root can. Without it, every
    /// thread gets back its user and group ids, supplementary groups, capabilities and
    /// no_new_privs. Only for a store root owns. Not with --config or --every.
    #[arg(long, conflicts_with_all = ["without_seccomp", "as_owner"])]
    pub keep_root: bool,
    /// Where the snapshot records more than the owner of its (not root's) store has (uid
    /// 0, groups the owner is not in, capabilities), resume as the owner instead of
    /// refusing: its uid, the recorded groups it is in (else its primary group), no
    /// capabilities. Not with --config or --every.
    #[arg(long)]
    pub as_owner: bool,
    /// Resume a program that ran under a seccomp filter without the filter (snapshots do
    /// not hold it; such a snapshot is refused otherwise). Not with --config or --every.
    #[arg(long)]
    pub without_seccomp: bool,
    /// Resume a program that held POSIX timers (`timer_create`) without them (a restore
    /// does not make them again; such a snapshot is refused otherwise).
    #[arg(long)]
    pub without_timers: bool,
    /// Environment variables to add to the program's or replace in it, as its `getenv`
    /// sees them from now on.
    #[arg(last = true, value_name = "NAME=VALUE")]
    pub env: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RefineOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// The snapshot to resume (S1); for an MPI job, a global snapshot (G1): the job is
    /// replayed from its start to --to (`sdt replay --until`).
    #[arg(long, value_name = "SNAP")]
    pub from: String,
    /// The snapshot whose breakpoint ends the interval (S2); it must be a later
    /// breakpoint snapshot of the same run.
    #[arg(long, value_name = "SNAP")]
    pub to: String,
    /// Key expressions, comma-separated, compared between S2 and S2.new as gdb prints
    /// them (globals, array elements, struct fields: `total,acct[3].balance`).
    #[arg(long, value_name = "EXPR[,EXPR…]", required = true)]
    pub check: Vec<String>,
    /// How many more times to run the interval when the values differ.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub retries: u32,
    /// How long each run has to reach --to's breakpoint; past that, the program is
    /// snapshotted where it is (a hang shows there) and ended, and the attempt counts as
    /// not reproduced. Default: ten times what S1..S2 took, at least 60 s; 0: no limit.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub timeout: Option<std::time::Duration>,
    #[command(flatten)]
    pub capture: CaptureArgs,
}

#[derive(Debug, Args)]
pub struct RunOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Capture config (TOML): max_level, classes, ids, [attrs], hits, every_ms,
    /// max_snapshots.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Also take a timed snapshot every MS milliseconds (`50`, or with a unit: `50ms`,
    /// `0.5s`; overrides every_ms), counted from the end of the previous one: slow
    /// captures do not pile up.
    #[arg(long, value_name = "MS", value_parser = interval_ms)]
    pub every: Option<u64>,
    /// Also break at the entry of function FUNC, as if it called
    /// SetBreakpoint(1, 0, N, 1, "symbol=FUNC") (N: the N-th --break); `@HITS` keeps only
    /// those arrivals (`solve@1,10-12`). The snapshot shows the thread where the body
    /// starts, its arguments stored (as gdb breaks on a function), where the program's
    /// DWARF says where that is. FUNC is a symbol or a C++/Rust/Fortran name as the
    /// source writes it: `Klass::method`, `'Foo::bar(int)'` to pick one of its overloads,
    /// `solver::relax` (a Fortran module procedure, any case). It is
    /// looked for in the program, then in the libraries it loads at its start; `LIB:FUNC`
    /// names a function of library LIB (`libz:deflate`), found whenever the program loads
    /// it, dlopen included. Repeatable; ptrace backend only.
    #[arg(long = "break", value_name = "[LIB:]FUNC[@HIT,…]")]
    pub breaks: Vec<String>,
    /// Compare every stored snapshot with the live process's memory (slow; implies
    /// --wait-compaction).
    #[arg(long)]
    pub verify: bool,
    /// Return once every snapshot is compacted. Without it, sdt returns when the program
    /// ends and a background `sdt compact` finishes what is left (the snapshots are
    /// readable meanwhile; `sdt compact` finishes them at once).
    #[arg(long)]
    pub wait_compaction: bool,
    /// Captures the raw log may hold before compaction catches up, in MiB (`512`, or with a
    /// unit: `512M`, `2G`, `1TiB`; default: half the store's free space); past it,
    /// breakpoint captures wait for compaction and timed snapshots are skipped.
    #[arg(long, value_name = "MB", value_parser = size_mib)]
    pub disk_budget: Option<u64>,
    /// How changed pages are found: `uffd-wp` (the kernel tracks writes; Linux 6.7),
    /// `page-hash` (copy every resident page, compare hashes), or `auto` (the first that
    /// works).
    #[arg(long, value_enum, default_value_t = TrackingArg::Auto)]
    pub tracking: TrackingArg,
    /// How the program's threads are stopped: `ptrace` (the program runs traced; it can
    /// track written pages), `kmod` (SDT's kernel module holds them with IPIs; /dev/sdt
    /// must be there, see kmod/README.md), or `auto` (kmod where /dev/sdt is present,
    /// else ptrace).
    #[arg(long, value_enum, default_value_t = BackendArg::Ptrace)]
    pub backend: BackendArg,
    /// Do not record the message history of a program that links MPI (by default SDT's
    /// interposition library is loaded into it and records every message, probe and
    /// collective in the run's mpi-events).
    #[arg(long)]
    pub no_mpi_history: bool,
    /// Do not take a snapshot when a signal is about to end the program. By default one
    /// is taken at the delivery of a signal the program neither catches nor ignores and
    /// whose default action ends it (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGTERM, …), with
    /// the thread that got it first, before it is delivered (ptrace backend).
    #[arg(long)]
    pub no_signal_snapshot: bool,
    /// Stop the program if it is still running after this long (`30`, `90s`, `5m`): a
    /// snapshot of where it is first (where a hang waits; threads that wait for each
    /// other's mutexes are named), then it is killed, and sdt exits 124.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub timeout: Option<std::time::Duration>,
    /// Replay: make the MPI program's receives take the messages this replay record
    /// (`mpi-replay`, which `sdt replay` writes) says. `sdt replay` starts every rank so.
    #[arg(long, value_name = "RECORD", conflicts_with = "no_mpi_history")]
    pub replay: Option<PathBuf>,
    /// With --replay: stop the ranks at a cut, each rank before its first MPI call once
    /// it has made as many events as the list says for its rank (`3,5,2`: rank 0 after
    /// 3, …); it then finalizes MPI with the others and exits 0. `sdt replay --until` and
    /// `sdt rollback --replay` pass it.
    #[arg(long, value_name = "EVENTS,…", requires = "replay", value_delimiter = ',')]
    pub stop_after: Vec<u64>,
    /// With --stop-after: each rank takes a snapshot where it stops (SDT's own
    /// breakpoint, class and id -1), and no other unless --config asks for it.
    #[arg(long, requires = "stop_after")]
    pub stop_capture: bool,
    /// No line per snapshot, no summary.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub job: JobArgs,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, value_name = "PROG ARGS")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AttachOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The process (its id, as `pidof` or `ps` gives it; a thread's id names its process).
    #[arg(value_name = "PID")]
    pub pid: i32,
    /// Stay attached after the first snapshot: a snapshot at a signal about to end the
    /// process, and at every --every tick, until it ends, --for runs out, or Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// A snapshot every MS milliseconds while attached (`500`, `500ms`, `2s`; implies
    /// --watch), counted from the end of the previous one.
    #[arg(long, value_name = "MS", value_parser = interval_ms)]
    pub every: Option<u64>,
    /// Stay attached this long at most (`30`, `90s`, `5m`; implies --watch), then let the
    /// process go.
    #[arg(long = "for", value_name = "SECONDS", value_parser = seconds)]
    pub duration: Option<std::time::Duration>,
    /// How changed pages are found between snapshots while watching, as `sdt run
    /// --tracking` (a single snapshot copies every page: it needs none).
    #[arg(long, value_enum, default_value_t = TrackingArg::Auto)]
    pub tracking: TrackingArg,
    /// Captures the raw log may hold before compaction catches up, in MiB, as `sdt run
    /// --disk-budget`.
    #[arg(long, value_name = "MB", value_parser = size_mib)]
    pub disk_budget: Option<u64>,
    /// While watching, take no snapshot when a signal is about to end the process.
    #[arg(long)]
    pub no_signal_snapshot: bool,
    /// No line per snapshot, no summary.
    #[arg(long, short)]
    pub quiet: bool,
}

/// A rank of a job (`mpirun -np 3 sdt run -- ./prog`): by default from the launcher's
/// environment (Open MPI, MPICH's Hydra, Slurm).
#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job this run is a rank of, where the launcher's environment names none (its
    /// runs are listed together by `sdt ls`, their snapshots named RANK:SNAP).
    #[arg(long, value_name = "ID")]
    pub job: Option<String>,
    /// The rank, instead of the launcher's.
    #[arg(long, value_name = "N", hide = true, requires = "job_size")]
    pub rank: Option<u32>,
    /// The job's number of ranks, instead of the launcher's.
    #[arg(long, value_name = "N", hide = true, requires = "rank")]
    pub job_size: Option<u32>,
}

/// `--backend` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    Auto,
    Ptrace,
    Kmod,
}

impl From<BackendArg> for sdt_daemon::Backend {
    fn from(arg: BackendArg) -> Self {
        match arg {
            BackendArg::Auto => sdt_daemon::Backend::Auto,
            BackendArg::Ptrace => sdt_daemon::Backend::Ptrace,
            BackendArg::Kmod => sdt_daemon::Backend::Kmod,
        }
    }
}

/// `--tracking` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TrackingArg {
    Auto,
    UffdWp,
    PageHash,
}

#[derive(Debug, Args)]
pub struct LsOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// The run to list, as `sdt runs` numbers them: `sdt ls 3` is `sdt ls --run 3`.
    #[arg(value_name = "RUN", conflicts_with = "run")]
    pub run_id: Option<u32>,
    /// Print a JSON array, one object per snapshot.
    #[arg(long)]
    pub json: bool,
    /// Only the first N snapshots of each run.
    #[arg(long, value_name = "N", conflicts_with = "last")]
    pub first: Option<usize>,
    /// Only the last N snapshots of each run.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
}

#[derive(Debug, Args)]
pub struct RunsOpt {
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Debug, Args)]
pub struct RmOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// The runs: ids (`3`) and ranges of ids (`2-5`), as `sdt runs` lists them.
    #[arg(required = true, value_name = "RUN", value_parser = run_ids)]
    pub runs: Vec<std::ops::RangeInclusive<u32>>,
    /// List what would be removed, and remove nothing.
    #[arg(long, short = 'n')]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct CompactOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// As started by `sdt run` when the program ends: quietly, on idle CPU time only,
    /// and not at all if another sdt holds the run.
    #[arg(long, hide = true)]
    pub background: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsOpt {
    /// The shell the script is for.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManpagesOpt {
    /// Directory to write them into (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct ShowOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Snapshot name (S3, or 3; N:S3 is rank N's S3 after a job, else run N's; run2:S3 is run
    /// 2's; default: the run's last snapshot).
    pub snapshot: Option<String>,
    /// Print the stored metadata as JSON.
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Args)]
pub struct EventsOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// A run of the job (default: the latest run's job).
    #[command(flatten)]
    pub run: RunArgs,
    /// Only this rank's events.
    #[arg(long, value_name = "RANK")]
    pub rank: Option<u32>,
    /// One JSON array of events: rank, seq, kind, peer, tag, bytes, vc, matched, post,
    /// comm, time_us, site, any_source, any_tag, truncated, diverged (a replay's receive
    /// took another message than its record says), fixed_route (a persistent request's
    /// or a matched probe's, whose match a replay does not enforce).
    #[arg(long)]
    pub json: bool,
    /// Write the history as a Chrome/Perfetto trace into FILE (messages as flow arrows).
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct WhyOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// A rank's snapshot (`2:S3`).
    pub snapshot: String,
    /// The messages as a JSON array: send and recv as [rank, seq], tag, bytes, sites,
    /// the sender's snapshot before the send.
    #[arg(long)]
    pub json: bool,
}

/// How a replayed MPI job is launched.
#[derive(Debug, Args)]
pub struct LauncherArgs {
    /// The launcher to run the job with (default: `mpirun`, on this host). Across hosts,
    /// a program that starts Open MPI's mpirun there, taking mpirun's arguments:
    /// `scripts/mpi-hosts-mpirun` for the hosts of scripts/mpi-hosts.
    #[arg(long, value_name = "PROGRAM", default_value = "mpirun")]
    pub mpirun: PathBuf,
    /// More arguments for mpirun (`--mpirun-arg=--mca --mpirun-arg=btl …`).
    #[arg(long = "mpirun-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub mpirun_args: Vec<String>,
    /// How long the replayed job may run; past that, mpirun is told to end it (each rank
    /// gets a snapshot of where it was, at the SIGTERM). Default: ten times the recorded
    /// job's time, at least 60 s; 0: no limit.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub timeout: Option<std::time::Duration>,
}

impl Default for LauncherArgs {
    fn default() -> LauncherArgs {
        LauncherArgs { mpirun: "mpirun".into(), mpirun_args: Vec::new(), timeout: None }
    }
}

#[derive(Debug, Args)]
pub struct ReplayOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// A run of the job (default: the latest run's job).
    #[command(flatten)]
    pub run: RunArgs,
    /// The global snapshot (G1, G2, … as `sdt ls` lists them) where every rank is captured
    /// again and stops: at its first MPI call after G, where it finalizes MPI with the
    /// others and exits (the job ends at G).
    #[arg(long, value_name = "G")]
    pub until: Option<String>,
    /// The capture config of the replay's ranks (default: only --until's arrival).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// With --until: compare these expressions (comma-separated, as `sdt compare --vars`)
    /// at G in every rank, original against replay. Exit 1 when any differs.
    #[arg(long, value_name = "EXPR[,EXPR…]", requires = "until")]
    pub check: Vec<String>,
    #[command(flatten)]
    pub launcher: LauncherArgs,
    /// Only write the replay record and say how many receives it pins.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct RollbackOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// A run of the job (default: the latest run's job).
    #[command(flatten)]
    pub run: RunArgs,
    /// The event, `RANK:SEQ`.
    pub event: String,
    /// Run the job again to the global snapshot found (`sdt replay --until G`), or, when
    /// none was taken before the event, to the cut just before it, where every rank
    /// stops and takes a snapshot (together a global snapshot of the replay).
    #[arg(long)]
    pub replay: bool,
    /// With --replay: how the job is launched.
    #[command(flatten)]
    pub launcher: LauncherArgs,
}

#[derive(Debug, Args)]
pub struct CheckOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// A run of the job (default: the latest run's job).
    #[command(flatten)]
    pub run: RunArgs,
    /// The findings as a JSON array: kind, rank, seq, site, peer, waits_on, what.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiagramOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    /// A run of the job (default: the latest run's job).
    #[command(flatten)]
    pub run: RunArgs,
    /// The picture's file (.svg or .png).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum ExportAction {
    /// An ELF core file that gdb (and any core tool) opens with the program.
    Core(ExportCoreOpt),
    /// A CRIU image directory that `criu restore -D DIR` resumes: the program runs on
    /// from the snapshot, untraced, its SDT breakpoints off.
    ///
    /// Its files must be as they were at the snapshot (a regular file's size is
    /// checked). Sockets, FIFOs, eventfds and other objects the images cannot express
    /// are refused, naming them.
    #[command(after_help = "Example:\n  sdt export criu S3 -o img && criu restore -D img --shell-job")]
    Criu(ExportCriuOpt),
}

#[derive(Debug, Args)]
pub struct ExportCriuOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Snapshot name (S3, or 3; N:S3 is rank N's S3 after a job, else run N's; run2:S3 is run
    /// 2's).
    pub snapshot: String,
    /// Image directory to write (new, or empty).
    #[arg(long, short, value_name = "DIR")]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct ExportCoreOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Snapshot name (S3, or 3; N:S3 is rank N's S3 after a job, else run N's; run2:S3 is run
    /// 2's).
    pub snapshot: String,
    /// Core file to write.
    #[arg(long, short, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, Args)]
pub struct GdbOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Snapshot name (S3, or 3; N:S3 is rank N's S3 after a job, else run N's; run2:S3 is run
    /// 2's; default: the run's last snapshot).
    pub snapshot: Option<String>,
    /// Extra arguments for gdb (after --), e.g. -- -batch -ex bt.
    #[arg(last = true, value_name = "GDB ARGS")]
    pub gdb_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct HistoryOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// The expression, as gdb's `print` takes it.
    pub expr: String,
    /// Only the snapshots where the value changed (and each run's first).
    #[arg(long)]
    pub changes: bool,
    /// One JSON object per snapshot: run, name, thread, trigger, since_start_ns, and
    /// value or error.
    #[arg(long)]
    pub json: bool,
    /// Plot the numeric values over time into FILE (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GdbserverOpt {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Snapshot name (S3, or 3; N:S3 is rank N's S3 after a job, else run N's; run2:S3 is run
    /// 2's; default: the run's last snapshot).
    pub snapshot: Option<String>,
    /// Listen on this TCP address for one gdb instead of serving stdin/stdout.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
}

/// A run id (`3`) or a range of them (`2-5`).
fn run_ids(text: &str) -> Result<std::ops::RangeInclusive<u32>, String> {
    let id = |t: &str| t.trim().parse::<u32>().map_err(|_| format!("{t:?} is not a run id (3, or 2-5)"));
    let (first, last) = match text.split_once('-') {
        Some((first, last)) => (id(first)?, id(last)?),
        None => (id(text)?, id(text)?),
    };
    if first > last {
        return Err(format!("{first}-{last} is an empty range"));
    }
    Ok(first..=last)
}

/// `--every`: milliseconds, bare (`50`) or with a unit (`50ms`, `2s`, `0.5s`); at least 1.
fn interval_ms(text: &str) -> Result<u64, String> {
    let ms = quantity(text, &[("", 1.0), ("ms", 1.0), ("s", 1e3)], "ms or s: 50, 50ms, 0.5s")?;
    if ms < 1.0 {
        return Err("less than 1 ms".to_owned());
    }
    Ok(ms.round() as u64)
}

/// `--timeout`: seconds, bare (`30`) or with a unit (`500ms`, `30s`, `2m`); 0 for none.
fn seconds(text: &str) -> Result<std::time::Duration, String> {
    let secs =
        quantity(text, &[("", 1.0), ("ms", 1e-3), ("s", 1.0), ("m", 60.0)], "s, ms or m: 30, 30s, 2m")?;
    std::time::Duration::try_from_secs_f64(secs).map_err(|_| "too long".to_owned())
}

/// `--disk-budget`: MiB, bare (`512`) or with a binary unit (`512M`, `2G`, `2GiB`, `1T`);
/// at least 1.
fn size_mib(text: &str) -> Result<u64, String> {
    const UNITS: [(&str, f64); 10] = [
        ("", 1.0),
        ("m", 1.0),
        ("mb", 1.0),
        ("mib", 1.0),
        ("g", 1024.0),
        ("gb", 1024.0),
        ("gib", 1024.0),
        ("t", 1048576.0),
        ("tb", 1048576.0),
        ("tib", 1048576.0),
    ];
    let mib = quantity(text, &UNITS, "MiB, or M, G, T: 512, 512M, 2G")?;
    if mib < 1.0 {
        return Err("less than 1 MiB".to_owned());
    }
    Ok(mib.round() as u64)
}

/// A positive number followed by one of `units` (name, scale; matched without regard to
/// case, spaces allowed between), scaled; `expected` says what is taken, for the error.
fn quantity(text: &str, units: &[(&str, f64)], expected: &str) -> Result<f64, String> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = (&text[..split], text[split..].trim());
    let value: f64 = number.parse().map_err(|_| format!("not a number ({expected})"))?;
    let Some((_, scale)) = units.iter().find(|(name, _)| name.eq_ignore_ascii_case(unit)) else {
        return Err(format!("unknown unit {unit:?} ({expected})"));
    };
    Ok(value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Opt::command().debug_assert();
    }

    #[test]
    fn run_takes_the_program_after_dashes() {
        let opt = Opt::parse_from([
            "sdt",
            "run",
            "--every",
            "50",
            "--break",
            "solve@1,3",
            "--break",
            "step",
            "--",
            "./prog",
            "-x",
            "--y",
        ]);
        let Action::Run(run) = opt.action else { panic!("not run") };
        assert_eq!(run.command, ["./prog", "-x", "--y"]);
        assert_eq!(run.every, Some(50));
        assert_eq!(run.breaks, ["solve@1,3", "step"]);
        assert_eq!(run.backend, BackendArg::Ptrace);
        let opt = Opt::parse_from(["sdt", "run", "--backend", "kmod", "--", "./prog"]);
        let Action::Run(run) = opt.action else { panic!("not run") };
        assert_eq!(run.backend, BackendArg::Kmod);
        assert!(Opt::try_parse_from(["sdt", "run", "--backend", "ipi", "--", "x"]).is_err());
        assert!(Opt::try_parse_from(["sdt", "run"]).is_err());
        assert!(Opt::try_parse_from(["sdt", "run", "--every", "0", "--", "x"]).is_err());
    }

    #[test]
    fn rm_takes_ids_and_ranges() {
        let opt = Opt::parse_from(["sdt", "rm", "3", "5-7", "-n"]);
        let Action::Rm(rm) = opt.action else { panic!("not rm") };
        assert_eq!(rm.runs, [3..=3, 5..=7]);
        assert!(rm.dry_run);
        for bad in ["x", "3-", "-3", "7-5", "1-2-3"] {
            assert!(Opt::try_parse_from(["sdt", "rm", bad]).is_err(), "{bad}");
        }
        assert!(Opt::try_parse_from(["sdt", "rm"]).is_err(), "a run is required");
    }

    #[test]
    fn intervals_and_sizes_take_units() {
        for (text, ms) in [("50", 50), ("50ms", 50), ("50 ms", 50), ("2s", 2000), ("0.5s", 500), ("1.4", 1)] {
            assert_eq!(interval_ms(text), Ok(ms), "{text}");
        }
        for bad in ["0", "0.2ms", "", "ms", "-5", "5m", "1e3", "5 sec", "1..2s"] {
            assert!(interval_ms(bad).is_err(), "{bad}");
        }
        assert_eq!(interval_ms("5m"), Err("unknown unit \"m\" (ms or s: 50, 50ms, 0.5s)".into()));
        use std::time::Duration;
        for (text, time) in [("30", 30_000), ("500ms", 500), ("2m", 120_000), ("1.5 s", 1500), ("0", 0)] {
            assert_eq!(seconds(text), Ok(Duration::from_millis(time)), "{text}");
        }
        for bad in ["", "-1", "5h", "1e300", "99999999999999999999999"] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        for (text, mib) in
            [("512", 512), ("512M", 512), ("2G", 2048), ("2 GiB", 2048), ("1.5g", 1536), ("1T", 1 << 20)]
        {
            assert_eq!(size_mib(text), Ok(mib), "{text}");
        }
        for bad in ["0", "0.5M", "2K", "G", "x"] {
            assert!(size_mib(bad).is_err(), "{bad}");
        }
        let opt = Opt::parse_from(["sdt", "run", "--every", "0.25s", "--disk-budget", "2G", "--", "x"]);
        let Action::Run(run) = opt.action else { panic!("not run") };
        assert_eq!((run.every, run.disk_budget), (Some(250), Some(2048)));
    }

    #[test]
    fn restore_and_refine_options() {
        let opt = Opt::parse_from(["sdt", "restore", "3", "--config", "f.toml", "--run", "2"]);
        let Action::Restore(r) = opt.action else { panic!("not restore") };
        assert_eq!((r.snapshot.as_str(), r.run.run), ("3", Some(2)));
        assert_eq!(r.capture.config, Some(PathBuf::from("f.toml")));
        assert!(!r.keep_root && !r.without_seccomp);
        let opt = Opt::parse_from(["sdt", "restore", "S3", "--keep-root", "--", "A=1"]);
        let Action::Restore(r) = opt.action else { panic!("not restore") };
        assert!(r.keep_root && !r.without_seccomp);
        assert_eq!(r.env, ["A=1"]);
        let opt = Opt::parse_from(["sdt", "restore", "S3", "--without-seccomp"]);
        let Action::Restore(r) = opt.action else { panic!("not restore") };
        assert!(r.without_seccomp);
        assert!(Opt::try_parse_from(["sdt", "restore", "S3", "--keep-root", "--without-seccomp"]).is_err());
        let opt = Opt::parse_from(["sdt", "restore", "S3", "--as-owner", "--without-seccomp"]);
        let Action::Restore(r) = opt.action else { panic!("not restore") };
        assert!(r.as_owner && r.without_seccomp && !r.keep_root);
        assert!(Opt::try_parse_from(["sdt", "restore", "S3", "--keep-root", "--as-owner"]).is_err());
        let opt = Opt::parse_from([
            "sdt",
            "refine",
            "--from",
            "S1",
            "--to",
            "S2",
            "--check",
            "total,acct[3].balance",
            "--check",
            "x",
            "--retries",
            "3",
            "--every",
            "5",
        ]);
        let Action::Refine(r) = opt.action else { panic!("not refine") };
        assert_eq!((r.from.as_str(), r.to.as_str(), r.retries), ("S1", "S2", 3));
        assert_eq!(r.check, ["total,acct[3].balance", "x"]);
        assert_eq!(r.capture.every, Some(5));
        assert!(Opt::try_parse_from(["sdt", "refine", "--from", "S1", "--to", "S2"]).is_err());
    }

    #[test]
    fn store_and_run_options() {
        let opt = Opt::parse_from(["sdt", "ls", "--store", "/tmp/s", "--run", "3", "--json"]);
        let Action::Ls(ls) = opt.action else { panic!("not ls") };
        assert_eq!(ls.store.store, PathBuf::from("/tmp/s"));
        assert_eq!(ls.run.run, Some(3));
        assert!(ls.json);
        let opt = Opt::parse_from(["sdt", "export", "core", "S2", "-o", "c"]);
        let Action::Export(ExportAction::Core(core)) = opt.action else { panic!("not export") };
        assert_eq!(core.snapshot, "S2");
        let opt = Opt::parse_from(["sdt", "export", "criu", "--run", "2", "3", "-o", "img"]);
        let Action::Export(ExportAction::Criu(criu)) = opt.action else { panic!("not export criu") };
        assert_eq!((criu.snapshot.as_str(), criu.run.run), ("3", Some(2)));
        assert_eq!(criu.output, PathBuf::from("img"));
        assert!(Opt::try_parse_from(["sdt", "export", "criu", "S3"]).is_err(), "-o is required");
        let opt = Opt::parse_from(["sdt", "gdb", "S1", "--", "-batch", "-ex", "bt"]);
        let Action::Gdb(gdb) = opt.action else { panic!("not gdb") };
        assert_eq!(gdb.gdb_args, ["-batch", "-ex", "bt"]);
    }

    #[test]
    fn diff_and_compare_options() {
        let opt = Opt::parse_from(["sdt", "diff", "1:S3", "2:S3", "--json"]);
        let Action::Diff(d) = opt.action else { panic!("not diff") };
        assert_eq!((d.a.as_str(), d.b.as_str(), d.json), ("1:S3", "2:S3", true));
        assert!(Opt::try_parse_from(["sdt", "diff", "S1"]).is_err());
        let opt = Opt::parse_from([
            "sdt",
            "compare",
            "--reference",
            "1",
            "--run",
            "2",
            "--vars",
            "a,b[2]",
            "--rtol",
            "1e-9",
        ]);
        let Action::Compare(c) = opt.action else { panic!("not compare") };
        assert_eq!((c.reference, c.run.run, c.rtol, c.atol), (1, Some(2), 1e-9, 0.0));
        assert_eq!(c.vars, ["a,b[2]"]);
        assert!(Opt::try_parse_from(["sdt", "compare"]).is_err(), "--reference is required");
    }
}
