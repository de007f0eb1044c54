//! Starting gdb on a snapshot served by `sdt gdbserver`, with SDT's gdb commands
//! ([`EXTENSION`]): for the user, or to evaluate expressions there.

use std::ffi::{OsStr, OsString};
use std::io::BufReader;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// SDT's gdb commands (`sdt list`, `sdt goto`, `sdt next`, `sdt prev`, `sdt history`,
/// `sdt last`): a gdb Python script, to be sourced (`-ix FILE.py`) in a gdb connected to
/// `sdt gdbserver`.
pub const EXTENSION: &str = include_str!("../python/sdt.py");

/// What gdb runs for `target remote |`, through `/bin/sh -c`: fixed text, so that no
/// path or name reaches the shell as code; they come from the environment, quoted.
const SERVE: &str =
    r#"target remote | exec "$SDT_GDBSERVER" gdbserver --run "$SDT_GDBSERVER_RUN" "$SDT_GDBSERVER_SNAPSHOT""#;

/// How gdb starts the server: the `sdt` program, the store, the run and the snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Server<'a> {
    /// The `sdt` program (`std::env::current_exe`).
    pub sdt: &'a Path,
    /// The store directory.
    pub store: &'a Path,
    /// The run that holds the snapshot.
    pub run: u32,
    /// The snapshot's name.
    pub snapshot: &'a str,
    /// A folder holding SDT's MPI libraries (`sdtmpi-openmpi.so`, …), which the server
    /// names where a rank has one loaded: gdb reads their symbols and unwind tables there.
    pub libraries: &'a Path,
}

/// `gdb -q -iex 'set sysroot' -ix EXTENSION --se=PROGRAM -ex 'target remote | sdt
/// gdbserver …' EXTRA…`: gdb with `program`'s symbols (none if empty), SDT's commands from
/// `extension` (a file holding [`EXTENSION`]), connected to `server`. The shared libraries
/// are the local files the server names (the sysroot is the local file system). The two
/// paths (the program's comes from the store) are glued to their options, so that gdb
/// never reads one as an option or a command: `--se=-x` names a file `-x`. An empty
/// `program` gives gdb the server alone, and gdb reads the libraries' symbols when told
/// (`sharedlibrary`): without a program it would not.
pub fn remote_command(program: &Path, extension: &Path, server: Server, extra: &[String]) -> Command {
    let mut gdb = Command::new("gdb");
    gdb.args(["-q", "-iex", "set sysroot"]).arg(glued("-ix=", extension));
    if !program.as_os_str().is_empty() {
        gdb.arg(glued("--se=", program));
    }
    if let Some(dir) = rust_printers(program) {
        gdb.arg("-iex").arg(glued("add-auto-load-safe-path ", &dir));
        gdb.arg("-iex").arg(glued("directory ", &dir));
    }
    gdb.arg("-iex").arg(glued("set solib-search-path ", server.libraries));
    // The user's line rather than SDT's trap inside the `breakpoint!` macro or
    // `SetBreakpoint`; and the snapshot's deadlocks, if it has any.
    gdb.args(["-ex", SERVE]);
    if program.as_os_str().is_empty() {
        gdb.args(["-ex", "sharedlibrary"]);
    }
    gdb.args(["-ex", "sdt frame --caller", "-ex", "sdt waits --findings"]).args(extra);
    gdb.env("SDT_GDBSERVER", server.sdt)
        .env("SDT_STORE", server.store)
        .env("SDT_GDBSERVER_RUN", server.run.to_string())
        .env("SDT_GDBSERVER_SNAPSHOT", OsStr::new(server.snapshot));
    gdb
}

/// Where the Rust toolchain keeps gdb's pretty printers, for a Rust `program` (one whose
/// `.debug_gdb_scripts` asks gdb to load them): without it, gdb warns that the script is
/// missing. `None` for other programs, or without `rustc`.
fn rust_printers(program: &Path) -> Option<std::path::PathBuf> {
    use object::{Object, ObjectSection};
    let file = std::fs::File::open(program).ok()?;
    let cache = object::ReadCache::new(file);
    object::File::parse(&cache).ok()?.section_by_name(".debug_gdb_scripts")?.size();
    let out = Command::new("rustc").args(["--print", "sysroot"]).output().ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let dir = Path::new(sysroot.trim_end()).join("lib/rustlib/etc");
    dir.join("gdb_load_rust_pretty_printers.py").is_file().then_some(dir)
}

/// `option` and `path` as one argument.
fn glued(option: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(option);
    arg.push(path);
    arg
}

/// What gdb gave for one expression at one snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// The value as gdb prints it, or why gdb gave none.
    pub value: Result<String, String>,
    /// Where gdb evaluated it, when not in the user's frame of the thread that took the
    /// snapshot: a caller's local, or a local of a function that thread does not run,
    /// such as `main`'s variables that an OpenMP region's threads use (`sdt frame --for`).
    pub elsewhere: Option<Frame>,
}

/// A frame of a snapshot's thread, as `sdt frame --for` names the one it selected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Its function, as gdb shows it.
    pub function: String,
    /// Its level (0: the thread's newest frame).
    pub level: u32,
    /// The thread's id.
    pub thread: i32,
}

impl Frame {
    /// The frame `sdt frame --for` names in a line `in FUNCTION, frame #LEVEL of thread
    /// TID` (a function's name may hold commas).
    fn parse(text: &str) -> Option<Frame> {
        let (rest, thread) = text.strip_prefix("in ")?.rsplit_once(" of thread ")?;
        let (function, level) = rest.rsplit_once(", frame #")?;
        Some(Frame {
            function: function.to_owned(),
            level: level.parse().ok()?,
            thread: thread.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Frame {
    /// `main, frame #3 of thread 12998`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, frame #{} of thread {}", self.function, self.level, self.thread)
    }
}

/// Evaluates each of `exprs` as gdb would in `program` stopped at the snapshot `server`
/// serves, in the user's frame (above SDT's libraries and `SetBreakpoint`, as `sdt frame
/// --caller` selects it), or where that frame has no such name, in the frame `sdt frame
/// --for` finds: the value as gdb prints it, or why gdb gave none. gdb opens only the
/// files the server names, which the store checks, never a path from the snapshot's
/// memory. One gdb answers them all through its machine interface (GDB/MI), one
/// `-data-evaluate-expression` each, so that a value (`^done`) and an error (`^error`)
/// are told apart exactly; a warning gdb gives while evaluating (a charset conversion
/// failure for a non-ASCII name, say) makes the result an error too. Arrays are printed
/// whole (`print elements unlimited`): values that differ past the 200th element differ.
pub fn evaluate(
    program: &Path,
    extension: &Path,
    server: Server,
    exprs: &[String],
) -> std::io::Result<Vec<Evaluation>> {
    let gdb = remote_command(program, extension, server, &MI_OPTIONS.map(str::to_owned));
    let commands: Vec<_> = exprs.iter().flat_map(|expr| evaluation(expr)).collect();
    Ok(run_mi(gdb, &commands, GDB_SILENCE)?.chunks(EVALUATION).map(evaluated).collect())
}

/// Evaluates each of `exprs` in each of `snapshots` (`S3`, or `RUN:S3` for another run
/// of the server's tree) as [`evaluate`] does, in one gdb connected to `server`: `sdt
/// goto` (from `extension`, a file holding [`EXTENSION`]) moves it to the snapshot and
/// selects the thread that took it, in the user's frame, then gdb evaluates `exprs`
/// there. The values, snapshot by snapshot; a snapshot gdb could not go to gives why, as
/// an error for each expression.
pub fn evaluate_in_each(
    program: &Path,
    extension: &Path,
    server: Server,
    snapshots: &[String],
    exprs: &[String],
) -> std::io::Result<Vec<Vec<Evaluation>>> {
    let gdb = remote_command(program, extension, server, &MI_OPTIONS.map(str::to_owned));
    let commands: Vec<_> = snapshots
        .iter()
        .flat_map(|snap| {
            let goto = format!("sdt goto --quiet {snap}");
            std::iter::once(console(&goto)).chain(exprs.iter().flat_map(|expr| evaluation(expr)))
        })
        .collect();
    let answers = run_mi(gdb, &commands, GDB_SILENCE)?;
    Ok(answers
        .chunks(EVALUATION * exprs.len() + 1)
        .map(|at| {
            at[1..]
                .chunks(EVALUATION)
                .map(evaluated)
                .map(|e| Evaluation { value: at[0].clone().and(e.value), ..e })
                .collect()
        })
        .collect())
}

/// The answers to [`evaluation`]'s commands as one evaluation: a reference's value is
/// what it refers to (gdb gives its address alone).
fn evaluated(answers: &[Result<String, String>]) -> Evaluation {
    let (selected, value, referent) = (&answers[0], &answers[1], &answers[2]);
    let said = selected.as_deref().unwrap_or_default();
    let elsewhere = said.lines().find_map(|l| Frame::parse(l.strip_prefix("[sdt] ")?));
    let value = match said.lines().any(|l| l.starts_with("[sdt] a reference")) {
        true => referent,
        false => value,
    };
    Evaluation { value: selected.clone().and(value.clone()), elsewhere }
}

/// gdb speaking GDB/MI, its queries (debuginfod's, say) taking their default answer
/// instead of waiting.
const MI_OPTIONS: [&str; 4] = ["-nx", "--interpreter=mi2", "-iex", "set confirm off"];

/// The GDB/MI commands that evaluate `expr`: `sdt frame --caller --for EXPR`, which
/// selects the frame (and keeps what EXPR refers to, for a C++ reference), the
/// evaluation, and that of the referent.
fn evaluation(expr: &str) -> [String; EVALUATION] {
    [
        console(&format!("sdt frame --caller --for {expr}")),
        format!("-data-evaluate-expression {}", mi_quote(expr)),
        "-data-evaluate-expression $_sdt_referent".to_owned(),
    ]
}

/// How many commands [`evaluation`] gives.
const EVALUATION: usize = 3;

/// The GDB/MI command that runs the console command `command`.
fn console(command: &str) -> String {
    format!("-interpreter-exec console {}", mi_quote(command))
}

/// How long gdb may say nothing before it is taken for stuck and stopped: loading a
/// large program's symbols can take a minute; waiting on a file that never answers
/// takes forever.
const GDB_SILENCE: Duration = Duration::from_secs(300);

/// Runs `gdb` (started with [`MI_OPTIONS`]) on `commands`, arrays printed whole, and
/// gives each command's answer: its value (empty for a command that has none) or why it
/// failed, as [`parse_outputs`] reads them. gdb runs in a process group of its own, which
/// is killed, with whatever gdb started, once gdb has written nothing for `silence`: the
/// answers it did not give then say so.
fn run_mi(
    mut gdb: Command,
    commands: &[String],
    silence: Duration,
) -> std::io::Result<Vec<Result<String, String>>> {
    use std::io::{BufRead, Read, Write};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    gdb.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = gdb.spawn()?;
    // Token 0 is the setting; command i has token i + 1.
    let mut input = String::from("0-gdb-set print elements unlimited\n");
    for (i, command) in commands.iter().enumerate() {
        input.push_str(&format!("{}{command}\n", i + 1));
    }
    input.push_str("-gdb-exit\n");
    let mut stdin = child.stdin.take().expect("piped");
    // Written meanwhile: gdb may answer before it has read everything.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut stderr = child.stderr.take().expect("piped");
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).map(|_| text)
    });
    let (lines, answers) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().expect("piped"));
    let reader = std::thread::spawn(move || {
        for line in stdout.split(b'\n') {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut text = String::new();
    let mut stuck = false;
    loop {
        match answers.recv_timeout(silence) {
            Ok(line) => {
                text.push_str(&String::from_utf8_lossy(&line?));
                text.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                stuck = true;
                // The group is gdb's own (`process_group(0)`): its id is gdb's pid.
                let group = Pid::from_raw(child.id() as i32);
                killpg(group, Signal::SIGKILL).ok();
                break;
            }
        }
    }
    child.wait()?;
    // A gdb that stopped early closed its input; its stderr says why.
    writer.join().expect("the writer thread does not panic").ok();
    let said = said.join().expect("the reader thread does not panic")?;
    drop(answers);
    reader.join().expect("the reader thread does not panic");
    let mut results = parse_outputs(&text, commands.len());
    for result in &mut results {
        if let Err(why) = result
            && why.is_empty()
        {
            *why = match (stuck, said.trim()) {
                (true, _) => format!("gdb said nothing for {} s and was stopped", silence.as_secs_f32()),
                (false, "") => "gdb stopped before it evaluated this".to_owned(),
                (false, said) => format!("gdb stopped before it evaluated this: {said}"),
            };
        }
    }
    Ok(results)
}

/// `text` as a GDB/MI c-string argument: quoted, with `\`, `"` and line ends escaped,
/// so that it stays one argument whatever it holds.
fn mi_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// The c-string at the start of `text` (GDB/MI output: `"` … `"` with C escapes, octal
/// for bytes that are not printable ASCII), decoded (invalid UTF-8 replaced), and the rest
/// of `text` after it; `None` if `text` does not start with a whole c-string.
fn mi_unquote(text: &str) -> Option<(String, &str)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some((String::from_utf8_lossy(&out).into_owned(), &text[i + 1..])),
            b'\\' => {
                let c = *bytes.get(i + 1)?;
                i += 2;
                out.push(match c {
                    b'0'..=b'7' => {
                        // Up to three digits.
                        let mut value = u32::from(c - b'0');
                        for _ in 0..2 {
                            let Some(&d @ b'0'..=b'7') = bytes.get(i) else { break };
                            value = value * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        value as u8
                    }
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'e' => 0x1b,
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'v' => 0x0b,
                    other => other,
                });
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// The answers to tokens `1..=count` in gdb's GDB/MI output: `N^done,value="…"` is a
/// value (`N^done` what the command printed, `~"…"`: a console command's output), unless
/// gdb logged something (`&"warning: …"`) while evaluating it;
/// `N^error,msg="…"` is an error. What gdb logged while loading, before its first
/// prompt, counts against nothing. A missing answer is an empty error (gdb stopped).
fn parse_outputs(text: &str, count: usize) -> Vec<Result<String, String>> {
    let mut results = vec![Err(String::new()); count];
    let (mut logged, mut printed) = (String::new(), String::new());
    for line in text.lines().skip_while(|l| !l.starts_with("(gdb)")) {
        let stream = match line.as_bytes().first() {
            Some(b'&') => &mut logged,
            Some(b'~') => &mut printed,
            _ => {
                let Some((token, answer)) = line.split_once('^') else { continue };
                let (said, printed) = (std::mem::take(&mut logged), std::mem::take(&mut printed));
                answer_to(&mut results, token, answer, said, printed);
                continue;
            }
        };
        let record = &line[1..];
        stream.push_str(&mi_unquote(record).map_or_else(|| record.to_owned(), |(said, _)| said));
    }
    results
}

/// Records `answer`, gdb's result record for the command numbered `token`, in `results`:
/// what gdb `said` on its log stream before it makes the answer an error; a command's
/// `printed` console output is its value where the answer holds none.
fn answer_to(
    results: &mut [Result<String, String>],
    token: &str,
    answer: &str,
    said: String,
    printed: String,
) {
    let count = results.len();
    let Some(index) = token.parse::<usize>().ok().and_then(|t| t.checked_sub(1)).filter(|&i| i < count)
    else {
        return;
    };
    let field = |name: &str| answer.split_once(name).and_then(|(_, rest)| mi_unquote(rest)).map(|(v, _)| v);
    // One line, however many gdb wrote.
    let said = said.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
    results[index] = match answer.split(',').next() {
        Some("done") if said.is_empty() => Ok(field(",value=").unwrap_or(printed)),
        Some("done") => Err(said),
        Some("error") => {
            let msg = field(",msg=").unwrap_or_else(|| answer.to_owned());
            Err(if said.is_empty() { msg } else { format!("{said} {msg}") })
        }
        _ => Err(format!("gdb answered {answer}")),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_named_by_the_environment() {
        let server = Server {
            sdt: "/usr/bin/sdt".as_ref(),
            store: "$(id)".as_ref(),
            run: 3,
            snapshot: "S2",
            libraries: "/tmp/sdt-libs".as_ref(),
        };
        let cmd = remote_command("/bin/prog".as_ref(), "/tmp/x.py".as_ref(), server, &["-batch".to_owned()]);
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(
            args,
            [
                "-q",
                "-iex",
                "set sysroot",
                "-ix=/tmp/x.py",
                "--se=/bin/prog",
                "-iex",
                "set solib-search-path /tmp/sdt-libs",
                "-ex",
                SERVE,
                "-ex",
                "sdt frame --caller",
                "-ex",
                "sdt waits --findings",
                "-batch"
            ]
        );
        let env: Vec<_> =
            cmd.get_envs().map(|(k, v)| (k.to_str().unwrap(), v.unwrap().to_str().unwrap())).collect();
        assert!(
            env.contains(&("SDT_STORE", "$(id)")) && env.contains(&("SDT_GDBSERVER_RUN", "3")),
            "{env:?}"
        );
        // A program path that reads like an option stays a path.
        let cmd = remote_command("--eval-command=shell id".as_ref(), "x.py".as_ref(), server, &[]);
        assert_eq!(cmd.get_args().nth(4).unwrap(), "--se=--eval-command=shell id");
        // Without the program, gdb is told to read the libraries' symbols.
        let cmd = remote_command("".as_ref(), "x.py".as_ref(), server, &[]);
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert!(args.iter().all(|a| !a.starts_with("--se=")), "{args:?}");
        assert!(args.windows(4).any(|w| w == ["-ex", SERVE, "-ex", "sharedlibrary"]), "{args:?}");
    }

    #[test]
    fn a_gdb_that_says_nothing_is_stopped_with_what_it_started() {
        // Stands for a gdb stuck opening a FIFO: it answers the first command, then its
        // child holds the output open and nothing more comes.
        let mut stuck = Command::new("sh");
        stuck.args(["-c", "echo '(gdb) '; echo '1^done,value=\"7\"'; sleep 60 & wait"]);
        let started = std::time::Instant::now();
        let got = run_mi(stuck, &["-a".to_owned(), "-b".to_owned()], Duration::from_millis(500)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
        assert_eq!(got, [Ok("7".to_owned()), Err("gdb said nothing for 0.5 s and was stopped".to_owned())]);
    }

    /// GDB/MI output as gdb 13 gives it (trimmed): loading, with a warning before the
    /// first prompt, then the answers.
    const MI: &str = r#"=thread-group-added,id="i1"
~"Reading symbols from ./bank...\n"
&"warning: Unexpected size of section `.reg-xstate/12802' in core file.\n"
~"Core was generated by `./bank 4'.\n"
(gdb) 
0^done,frame={level="0",func="SetBreakpoint"}
(gdb) 
&"warning: charset conversion failure for '\342\200\246'.\nYou may have the wrong value for 'set ada source-charset'."
&"\n"
1^error,msg="No symbol \"\342\200\246\" in current context."
(gdb) 
2^done,value="{2367, 272, 34, 82, 221, 726, 332, 373}"
(gdb) 
3^error,msg="A syntax error in expression, near `'."
(gdb) 
4^done,value="0x55c9d36a10d0 \"audit\\n\""
(gdb) 
&"warning: something odd\n"
5^done,value="7"
(gdb) 
^exit
"#;

    #[test]
    fn answers_are_values_or_errors_and_a_warning_is_no_value() {
        let got = parse_outputs(MI, 6);
        let charset = "warning: charset conversion failure for '…'. You may have the wrong value for \
                       'set ada source-charset'. No symbol \"…\" in current context.";
        assert_eq!(got[0], Err(charset.to_owned()));
        assert_eq!(got[1], Ok("{2367, 272, 34, 82, 221, 726, 332, 373}".to_owned()));
        assert_eq!(got[2], Err("A syntax error in expression, near `'.".to_owned()));
        assert_eq!(got[3], Ok("0x55c9d36a10d0 \"audit\\n\"".to_owned()));
        assert_eq!(got[4], Err("warning: something odd".to_owned()));
        assert_eq!(got[5], Err(String::new()), "no answer: gdb stopped");
    }

    /// `sdt frame --for total` printing where it went, and that `total` is a reference;
    /// then the two evaluations.
    const ELSEWHERE: &str = r#"(gdb) 
~"[sdt] in main, frame #2 of thread 4012\n"
~"[sdt] a reference: $_sdt_referent\n"
1^done
(gdb) 
2^done,value="@0x7ffe5a1c"
(gdb) 
3^done,value="7"
(gdb) 
"#;

    #[test]
    fn a_value_found_elsewhere_says_where_and_a_reference_gives_its_referent() {
        let answers = parse_outputs(ELSEWHERE, EVALUATION);
        let got = evaluated(&answers);
        assert_eq!(got.value, Ok("7".to_owned()));
        let frame = Frame { function: "main".to_owned(), level: 2, thread: 4012 };
        assert_eq!(got.elsewhere.as_ref(), Some(&frame));
        assert_eq!(frame.to_string(), "main, frame #2 of thread 4012");
        let template = Frame::parse("in pick<int, long>, frame #1 of thread 7");
        assert_eq!(template.map(|f| (f.function, f.level)), Some(("pick<int, long>".to_owned(), 1)));
        // Not a reference, in the user's own frame: the value as gdb printed it.
        let plain = [Ok(String::new()), Ok("42".to_owned()), Ok("void".to_owned())];
        assert_eq!(evaluated(&plain), Evaluation { value: Ok("42".to_owned()), elsewhere: None });
        // A failed selection is the evaluation's error.
        let failed = [Err("Frame is invalid.".to_owned()), Ok("42".to_owned()), Ok("void".to_owned())];
        assert_eq!(evaluated(&failed).value, Err("Frame is invalid.".to_owned()));
    }

    #[test]
    fn an_expression_stays_one_argument() {
        assert_eq!(mi_quote("a[1] + b"), r#""a[1] + b""#);
        let sly = "x\" \n-gdb-exit\n\\";
        assert_eq!(mi_quote(sly), r#""x\" \n-gdb-exit\n\\""#);
        assert_eq!(mi_unquote(&mi_quote(sly)), Some((sly.to_owned(), "")));
        assert_eq!(mi_unquote(r#""\342\200\246",rest"#), Some(("…".to_owned(), ",rest")));
        assert_eq!(mi_unquote(r#""\0012""#), Some(("\u{1}2".to_owned(), "")));
        assert_eq!(mi_unquote("\"unterminated"), None);
        assert_eq!(mi_unquote("x"), None);
    }
}
