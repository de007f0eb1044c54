//! `sdt`: the command-line front of SDT. Each subcommand lives in its own module and
//! turns options into calls on the library crates.

#![deny(unsafe_code)]

mod cli;
mod cmd_attach;
mod cmd_check;
mod cmd_compact;
mod cmd_compare;
mod cmd_diff;
mod cmd_docs;
mod cmd_doctor;
mod cmd_events;
mod cmd_export;
mod cmd_gdb;
mod cmd_history;
mod cmd_ls;
mod cmd_refine;
mod cmd_replay;
mod cmd_restore;
mod cmd_rm;
mod cmd_rollback;
mod cmd_run;
mod cmd_show;
mod cmd_why;
mod diagram;
mod job;
mod launcher;
mod plot;
mod select;

use std::process::ExitCode;

use cli::{Action, ExportAction, Opt};

fn main() -> ExitCode {
    init_logging();
    sdt_sys::default_sigpipe();
    let opt = parse_options();
    match real_main(opt) {
        Ok(code) => code,
        Err(err) => {
            // Errors quote what stores and programs said: escaped, it cannot drive the terminal.
            eprintln!("sdt: error: {}", sdt_daemon::human::escape(&format!("{err:#}")));
            if let Some(hint) = hint(&err) {
                eprintln!("sdt: hint: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

fn real_main(opt: Opt) -> anyhow::Result<ExitCode> {
    match opt.action {
        Action::Run(o) => cmd_run::run(o),
        Action::Attach(o) => cmd_attach::attach(o),
        Action::Ls(o) => cmd_ls::ls(o).map(|()| ExitCode::SUCCESS),
        Action::Runs(o) => cmd_ls::runs(o).map(|()| ExitCode::SUCCESS),
        Action::Compact(o) => cmd_compact::compact(o).map(|()| ExitCode::SUCCESS),
        Action::Rm(o) => cmd_rm::rm(o).map(|()| ExitCode::SUCCESS),
        Action::Show(o) => cmd_show::show(o).map(|()| ExitCode::SUCCESS),
        Action::Events(o) => cmd_events::events(o).map(|()| ExitCode::SUCCESS),
        Action::Check(o) => cmd_check::check(o),
        Action::Rollback(o) => cmd_rollback::rollback(o),
        Action::Why(o) => cmd_why::why(o).map(|()| ExitCode::SUCCESS),
        Action::Replay(o) => cmd_replay::replay(o),
        Action::Diagram(o) => diagram::diagram(o).map(|()| ExitCode::SUCCESS),
        Action::Export(ExportAction::Core(o)) => cmd_export::core(o).map(|()| ExitCode::SUCCESS),
        Action::Export(ExportAction::Criu(o)) => cmd_export::criu(o).map(|()| ExitCode::SUCCESS),
        Action::Gdb(o) => cmd_gdb::gdb(o),
        Action::History(o) => cmd_history::history(o),
        Action::Gdbserver(o) => cmd_gdb::gdbserver(o).map(|()| ExitCode::SUCCESS),
        Action::Restore(o) => cmd_restore::restore(o),
        Action::Refine(o) => cmd_refine::refine(o),
        Action::Doctor => Ok(cmd_doctor::doctor()),
        Action::Completions(o) => {
            cmd_docs::completions(o);
            Ok(ExitCode::SUCCESS)
        }
        Action::Manpages(o) => cmd_docs::manpages(o).map(|()| ExitCode::SUCCESS),
        Action::Diff(o) => cmd_diff::diff(o).map(|()| ExitCode::SUCCESS),
        Action::Compare(o) => cmd_compare::compare(o),
    }
}

/// The command line; `--version` also names the store format and the kernel features
/// found (probed only when asked for).
fn parse_options() -> Opt {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Opt::command();
    if std::env::args_os().any(|a| a == "--version") {
        command = command.long_version(cmd_doctor::long_version());
    }
    Opt::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
}

/// Warnings read as `sdt: warning: ...`; with `RUST_LOG` set, every record gets a
/// nanosecond timestamp and its module, for debugging.
fn init_logging() {
    let mut builder = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    if std::env::var("RUST_LOG").is_ok_and(|v| !v.is_empty()) {
        builder.format_timestamp_nanos();
    } else {
        builder.format(|out, record| {
            use std::io::Write;
            let level = match record.level() {
                log::Level::Warn => "warning".to_owned(),
                other => other.as_str().to_lowercase(),
            };
            writeln!(out, "sdt: {level}: {}", record.args())
        });
    }
    builder.init();
}

/// Turns known causes into the fix, py-spy style.
fn hint(err: &anyhow::Error) -> Option<String> {
    // A restore refused its PID namespace already says what it needs.
    let no_namespace = |cause: &(dyn std::error::Error + 'static)| {
        let restore = cause.downcast_ref().or_else(|| restore_error(cause.downcast_ref()?));
        matches!(restore, Some(sdt_restore::Error::NoNamespace(_) | sdt_restore::Error::NoUserNamespace(_)))
    };
    if err.chain().any(no_namespace) {
        return None;
    }
    // A file of the program's refused (a restore or the CRIU images would open it) is
    // named already; its permission error is not the store's.
    let program_file_refused = |cause: &(dyn std::error::Error + 'static)| {
        let restore = cause.downcast_ref().or_else(|| restore_error(cause.downcast_ref()?));
        matches!(restore, Some(sdt_restore::Error::Refused { .. }))
            || matches!(cause.downcast_ref(), Some(criu_export::Error::Refused { .. }))
    };
    if err.chain().any(program_file_refused) {
        return None;
    }
    if let Some(dir) = err.chain().find_map(store_refused) {
        return Some(format!(
            "permission denied on {}: pass --store DIR (or set SDT_STORE) for a store you may read and write",
            dir.display()
        ));
    }
    if is_disk_full(err) {
        return Some(DISK_FULL_HINT.into());
    }
    // A system call refused: ptrace, or what needs ptrace's rights over the program.
    let eperm = err.chain().any(|cause| {
        cause.downcast_ref::<sdt_sys::Error>().is_some_and(sdt_sys::Error::is_permission_denied)
    });
    if !eperm {
        return None;
    }
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").map(|s| s.trim().to_owned()) {
        Ok(scope) if scope != "0" && scope != "1" => Some(format!(
            "ptrace is restricted (kernel.yama.ptrace_scope = {scope}); run as root, or: sudo sysctl kernel.yama.ptrace_scope=1"
        )),
        _ => Some(
            "ptrace was refused; inside a container, start it with --cap-add SYS_PTRACE (and a seccomp profile that allows ptrace)"
                .into(),
        ),
    }
}

/// What to do when the store's file system is full.
pub(crate) const DISK_FULL_HINT: &str = "the store's file system is full: `sdt runs` lists the runs with their \
     sizes, `sdt rm RUN…` removes those you no longer need; or pass --store DIR (or set SDT_STORE) for a store \
     on a roomier one";

/// Whether `err` comes of a full disk: `ENOSPC` somewhere in its chain, or quoted by an
/// error that passed it on as text.
fn is_disk_full(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| says_disk_full(&cause.to_string()))
}

/// Whether `text` quotes the system's words for a full disk (`ENOSPC`).
pub(crate) fn says_disk_full(text: &str) -> bool {
    text.contains(&std::io::Error::from_raw_os_error(libc::ENOSPC).to_string())
}

/// The restorer's error behind `err`: a run's error shows it as its own, so an error
/// chain skips it.
fn restore_error(err: &sdt_daemon::Error) -> Option<&sdt_restore::Error> {
    match err {
        sdt_daemon::Error::Restore(e) => e.downcast_ref(),
        _ => None,
    }
}

/// The directory the store's file system refused us, if `cause` is such a refusal: the
/// path itself, or for one that does not exist (it could not be created), its nearest
/// existing ancestor.
fn store_refused(cause: &(dyn std::error::Error + 'static)) -> Option<std::path::PathBuf> {
    let store = match cause.downcast_ref::<sdt_daemon::Error>() {
        Some(sdt_daemon::Error::Store(e)) => e,
        _ => cause.downcast_ref::<sdt_store::Error>()?,
    };
    let sdt_store::Error::Io { path, source } = store else { return None };
    if source.kind() != std::io::ErrorKind::PermissionDenied {
        return None;
    }
    Some(path.ancestors().find(|p| p.exists()).unwrap_or(path).to_owned())
}
