//! Building test programs, running `sdt` with a private store, reading its output.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use sdt_test_harness::Skip;
use serde_json::Value;

/// How long any one command may take before the test fails.
const TIMEOUT: Duration = Duration::from_secs(120);

/// `target/<profile>`, where `sdt` and `libsdt.a` are.
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_sdt")).parent().unwrap().to_owned()
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// Compiles `tests/programs/<name>.c` against libsdt.a (once per test run).
pub fn program(name: &str) -> PathBuf {
    compiled(name, &test_source(name, "c"), "gcc", &[])
}

fn test_source(name: &str, extension: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs").join(format!("{name}.{extension}"))
}

/// Compiles `tests/programs/<name>.c` as the shared library `lib<name>.so` (once per test
/// run), for a program to load.
pub fn shared_library(name: &str) -> PathBuf {
    compiled(&format!("lib{name}.so"), &test_source(name, "c"), "gcc", &["-shared", "-fPIC"])
}

/// Whether gcc links an empty program with `flag` (whose runtime it needs).
fn gcc_links(flag: &str) -> bool {
    let probe = tempfile::tempdir().unwrap();
    std::fs::write(probe.path().join("p.c"), "int main(void) { return 0; }\n").unwrap();
    let linked = Command::new("gcc")
        .arg(flag)
        .arg(probe.path().join("p.c"))
        .arg("-o")
        .arg(probe.path().join("p"))
        .stderr(Stdio::null())
        .status();
    linked.is_ok_and(|s| s.success())
}

/// Compiles `tests/programs/<name>.c` with `-fsanitize=<sanitizer>` as `<name>-<sanitizer>`
/// (once per test run); the [`Skip`] where gcc lacks that sanitizer's runtime.
pub fn sanitized_program(name: &str, sanitizer: &str) -> Result<PathBuf, Skip> {
    let flag = format!("-fsanitize={sanitizer}");
    if !gcc_links(&flag) {
        let why = format!("gcc cannot link {flag}");
        return Err(Skip::new("a sanitizer runtime", why, "apt-get install gcc (libasan8, libtsan2)"));
    }
    Ok(compiled(&format!("{name}-{sanitizer}"), &test_source(name, "c"), "gcc", &[&flag]))
}

/// Whether `tool ARG` (asking its version) runs and succeeds: the tool is installed.
fn runs(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Compiles `tests/programs/<Name>.java` with javac into `dir`, for `java -cp DIR Name`;
/// the [`Skip`] where a JDK is not installed.
pub fn java_program(name: &str, dir: &Path) -> Result<(), Skip> {
    if !runs("javac", "-version") || !runs("java", "-version") {
        return Err(Skip::new(
            "a JDK",
            "javac or java is not installed",
            "apt-get install default-jdk-headless",
        ));
    }
    let status = Command::new("javac").arg("-d").arg(dir).arg(test_source(name, "java")).status().unwrap();
    assert!(status.success(), "javac {name}.java: {status}");
    Ok(())
}

/// Builds `tests/programs/<name>.go` with `go build`, cgo linking it to libsdt.a, into
/// `dir`; the [`Skip`] where Go is not installed.
pub fn go_program(name: &str, dir: &Path) -> Result<PathBuf, Skip> {
    if !runs("go", "version") {
        return Err(Skip::new("Go", "go is not installed", "apt-get install golang-go"));
    }
    let out = dir.join(name);
    let built = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&out)
        .arg(test_source(name, "go"))
        .env("GOCACHE", dir.join("go-cache"))
        .env("GOPATH", dir.join("go-path"))
        .env("CGO_ENABLED", "1")
        .env("CGO_CFLAGS", format!("-I{}", workspace().join("sdt-lib/include").display()))
        .env("CGO_LDFLAGS", format!("{} -ldl -lm -lpthread", target_dir().join("libsdt.a").display()))
        .output()
        .unwrap();
    assert!(built.status.success(), "go build {name}.go: {}", describe(&built));
    Ok(out)
}

/// Compiles `tests/programs/<name>.cpp` with g++ (once per test run); the [`Skip`] where
/// g++ is not installed.
pub fn cpp_program(name: &str) -> Result<PathBuf, Skip> {
    if !runs("g++", "--version") {
        return Err(Skip::new("g++", "g++ is not installed", "apt-get install g++"));
    }
    Ok(compiled(name, &test_source(name, "cpp"), "g++", &[]))
}

/// Compiles `tests/programs/<name>.f90` with gfortran (once per test run); the [`Skip`]
/// where gfortran is not installed.
pub fn fortran_program(name: &str) -> Result<PathBuf, Skip> {
    if !runs("gfortran", "--version") {
        return Err(Skip::new("gfortran", "gfortran is not installed", "apt-get install gfortran"));
    }
    Ok(compiled(name, &test_source(name, "f90"), "gfortran", &[]))
}

/// Compiles `tests/programs/<name>.c` with `-fopenmp` (once per test run); the [`Skip`]
/// where gcc cannot link OpenMP programs.
pub fn openmp_program(name: &str) -> Result<PathBuf, Skip> {
    if !gcc_links("-fopenmp") {
        return Err(Skip::new("OpenMP", "gcc cannot link -fopenmp", "apt-get install gcc (libgomp1)"));
    }
    Ok(compiled(name, &test_source(name, "c"), "gcc", &["-fopenmp"]))
}

/// Compiles `examples/<name>/<name>.c` (the README's examples) against libsdt.a.
pub fn example(name: &str) -> PathBuf {
    compiled(name, &workspace().join("examples").join(name).join(format!("{name}.c")), "gcc", &[])
}

/// Compiles `tests/programs/mpi/<name>.c` with Open MPI's `mpicc` against libsdt.a (once
/// per test run); the [`Skip`] where Open MPI is not installed.
pub fn mpi_program(name: &str) -> Result<PathBuf, Skip> {
    mpi_compiled(name, &test_source(&format!("mpi/{name}"), "c"))
}

/// Compiles the MPI example `examples/<name>/<name>.c` like [`mpi_program`].
pub fn mpi_example(name: &str) -> Result<PathBuf, Skip> {
    mpi_compiled(name, &workspace().join("examples").join(name).join(format!("{name}.c")))
}

fn mpi_compiled(name: &str, source: &Path) -> Result<PathBuf, Skip> {
    if !runs("mpicc", "--showme:version") || !runs("mpirun", "--version") {
        return Err(Skip::new(
            "Open MPI",
            "mpicc or mpirun is missing",
            "apt-get install openmpi-bin libopenmpi-dev",
        ));
    }
    Ok(compiled(name, source, "mpicc", &[]))
}

/// `source` compiled against libsdt.a as `name` (once per test run): C with `cc` (gcc, or
/// `mpicc` for MPI programs), `.cpp` with g++, `.f90` with `cc` (gfortran), `flags` added.
fn compiled(name: &str, source: &Path, cc: &str, flags: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let lib = target_dir().join("libsdt.a");
    assert!(
        lib.exists(),
        "{} is missing: run `cargo build --release` first (scripts/test does)",
        lib.display()
    );
    let out_dir = target_dir().join("test-programs");
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join(name);
    let tmp = out_dir.join(format!("{name}.{}.tmp", std::process::id()));
    let compiler = match source.extension() {
        Some(e) if e == "cpp" => "g++",
        _ => cc,
    };
    let status = Command::new(compiler)
        .args(["-g", "-O0", "-pthread", "-Wall", "-Werror"])
        .args(flags)
        .arg(source)
        .arg("-I")
        .arg(workspace().join("sdt-lib/include"))
        .arg(&lib)
        .args(["-ldl", "-lm", "-o"])
        .arg(&tmp)
        .status()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(status.success(), "{compiler} failed on {}", source.display());
    std::fs::rename(&tmp, &out).unwrap();
    built.insert(name.to_owned(), out.clone());
    out
}

/// A program built into `sdt`'s folder as `prog`, replacing what is there the way a build
/// does (a new file): it breaks once in a function named `function`, then prints `version
/// VERSION` with the `version` given.
pub fn build_versioned(sdt: &Sdt, version: u32, function: &str) -> PathBuf {
    let dir = sdt.dir.path();
    let source = dir.join("prog.c");
    std::fs::write(
        &source,
        "#include <stdio.h>\n#include <sdt.h>\nint version = VERSION;\n\
         void FN(void) { SetBreakpoint(1, 1, 1, 1, \"at=fn\"); }\n\
         int main(void) { FN(); printf(\"version %d\\n\", version); return 0; }\n",
    )
    .unwrap();
    let prog = dir.join("prog");
    let status = Command::new("gcc")
        .args(["-g", "-O0", "-Wall", "-Werror"])
        .arg(format!("-DVERSION={version}"))
        .arg(format!("-DFN={function}"))
        .arg(&source)
        .arg("-I")
        .arg(workspace().join("sdt-lib/include"))
        .arg(target_dir().join("libsdt.a"))
        .args(["-ldl", "-lm", "-pthread", "-o"])
        .arg(&prog)
        .status()
        .unwrap();
    assert!(status.success(), "gcc failed on {}", source.display());
    prog
}

/// A private store in a temporary directory, and commands that use it.
pub struct Sdt {
    pub dir: tempfile::TempDir,
}

/// A user other than root, as `setpriv` makes one of root.
pub struct User {
    pub uid: u32,
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: &'static [u32],
}

impl Sdt {
    pub fn new() -> Sdt {
        Sdt { dir: tempfile::tempdir().unwrap() }
    }

    /// An [`Sdt`] whose directory `user` owns, with a copy of `sdt` in it for
    /// [`Sdt::command_as`]: the build's may be out of the user's reach.
    pub fn owned_by(user: &User) -> Sdt {
        let sdt = Sdt::new();
        std::os::unix::fs::chown(sdt.dir.path(), Some(user.uid), Some(user.gid)).unwrap();
        sdt.copy_in(Path::new(env!("CARGO_BIN_EXE_sdt")));
        sdt
    }

    /// A copy of `file` in the directory, owned as the directory is; its path.
    pub fn copy_in(&self, file: &Path) -> PathBuf {
        use std::os::unix::fs::MetadataExt;
        let copy = self.dir.path().join(file.file_name().unwrap());
        std::fs::copy(file, &copy).unwrap();
        let owner = std::fs::metadata(self.dir.path()).unwrap();
        std::os::unix::fs::chown(&copy, Some(owner.uid()), Some(owner.gid())).unwrap();
        copy
    }

    pub fn store(&self) -> PathBuf {
        self.dir.path().join(".sdt")
    }

    /// The base of Open MPI's session directories for this test's jobs, its own: jobs
    /// that start at once in `/tmp/ompi.HOST.UID` fail now and then, one creating it
    /// while another's `mpirun` removes it ("mkdir: File exists").
    fn mpi_session_base(&self) -> PathBuf {
        let base = self.dir.path().join(".ompi");
        std::fs::create_dir_all(&base).unwrap();
        base
    }

    /// `sdt ARGS` in the temp directory, with `SDT_STORE` pointing at the private store.
    /// Only stdin, stdout and stderr reach it: a descriptor this test process inherited
    /// (a build tool's pipe) would reach the programs it runs, and their snapshots.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_via(&[], args)
    }

    /// [`Sdt::command`] without `CAP_SYS_ADMIN`, as users other than root run it:
    /// through `setpriv`, which drops it, where this test runs as root.
    pub fn command_without_sys_admin(&self, args: &[&str]) -> Command {
        self.command_without("sys_admin", args)
    }

    /// [`Sdt::command`] without capability `cap` (`sys_admin`, `sys_ptrace`), as users
    /// other than root run it: through `setpriv`, which drops it, where this test runs as
    /// root.
    pub fn command_without(&self, cap: &str, args: &[&str]) -> Command {
        let cap = format!("-{cap}");
        let drop = ["setpriv", "--bounding-set", &cap, "--inh-caps", &cap, "--"];
        let root = sdt_test_harness::root("").is_ok();
        self.command_via(if root { &drop } else { &[] }, args)
    }

    /// [`Sdt::command`] with its soft limit on open descriptors at `files` (`prlimit`;
    /// the hard limit stays).
    pub fn command_with_files(&self, files: u32, args: &[&str]) -> Command {
        self.command_via(&["prlimit", &format!("--nofile={files}:"), "--"], args)
    }

    /// [`Sdt::command`] as `user`, through `setpriv` (this test runs as root), running the
    /// copy of `sdt` that [`Sdt::owned_by`] put in the directory.
    pub fn command_as(&self, user: &User, args: &[&str]) -> Command {
        let groups = user.groups.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let groups =
            if groups.is_empty() { "--clear-groups".to_owned() } else { format!("--groups={groups}") };
        let ids = [format!("--reuid={}", user.uid), format!("--regid={}", user.gid), groups];
        let wrapper = ["setpriv", &ids[0], &ids[1], &ids[2], "--"];
        self.command_via_sdt(&wrapper, &self.dir.path().join("sdt"), args)
    }

    /// [`Sdt::command`] without `CAP_SYS_ADMIN` where user namespaces are refused: as root
    /// of a user namespace (`unshare`) whose limit of nested ones is 0, with no capability.
    pub fn command_without_user_namespaces(&self, args: &[&str]) -> Command {
        let script = "echo 0 > /proc/sys/user/max_user_namespaces && \
                      exec setpriv --bounding-set=-all --inh-caps=-all -- \"$0\" \"$@\"";
        self.command_via(&["unshare", "--user", "--map-root-user", "sh", "-c", script], args)
    }

    /// [`Sdt::command`] with the umask `mask` (through `sh`).
    pub fn command_with_umask(&self, mask: u32, args: &[&str]) -> Command {
        let script = format!("umask {mask:03o} && exec \"$0\" \"$@\"");
        self.command_via(&["sh", "-c", &script], args)
    }

    /// `wrapper` (a program and its arguments) running `sdt ARGS`, as [`Sdt::command`].
    pub fn command_via(&self, wrapper: &[&str], args: &[&str]) -> Command {
        self.command_via_sdt(wrapper, Path::new(env!("CARGO_BIN_EXE_sdt")), args)
    }

    /// [`Sdt::command_via`] with the `sdt` at `sdt`.
    pub fn command_via_sdt(&self, wrapper: &[&str], sdt: &Path, args: &[&str]) -> Command {
        let mut cmd = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(sdt);
                cmd
            }
            None => Command::new(sdt),
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("SDT_STORE", self.store())
            .env("OMPI_MCA_orte_tmpdir_base", self.mpi_session_base())
            .env_remove("RUST_LOG");
        only_stdio(&mut cmd);
        cmd
    }

    /// Runs `sdt ARGS` to completion (with a timeout), stdin empty.
    pub fn output(&self, args: &[&str]) -> Output {
        run(self.command(args).stdin(Stdio::null()))
    }

    /// Runs `sdt ARGS` and asserts it succeeded.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.output(args);
        assert!(out.status.success(), "sdt {args:?} failed: {}", describe(&out));
        out
    }

    /// `sdt ARGS` started (stdin empty, stdout and stderr piped), its stdout, and the
    /// first line read from it.
    pub fn start(&self, args: &[&str]) -> (Child, BufReader<ChildStdout>, String) {
        start_reading(&mut self.command(args))
    }

    /// `sdt run -q --every 50 -- spin MS` started (stderr piped), once its run has a
    /// snapshot: its `sdt` holds the run until the program ends.
    pub fn start_capturing(&self, ms: &str) -> Child {
        let child = self
            .command(&["run", "-q", "--every", "50", "--", program("spin").to_str().unwrap(), ms])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.output(&["ls", "--json"]).stdout.len() < 3 {
            assert!(Instant::now() < deadline, "no snapshot within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    /// The names of the latest run's complete snapshots.
    pub fn complete_snapshots(&self) -> Vec<String> {
        self.snapshots()
            .iter()
            .filter(|s| s["complete"] == true)
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// `sdt ls --json` of the latest run.
    pub fn snapshots(&self) -> Vec<Value> {
        let out = self.ok(&["ls", "--json"]);
        serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().unwrap().clone()
    }

    /// `sdt ls --json` of the latest run once it is compacted (`sdt compact` waits for
    /// the background compaction `sdt run` may have left).
    pub fn compacted_snapshots(&self) -> Vec<Value> {
        self.ok(&["compact"]);
        self.snapshots()
    }

    /// Exports a snapshot's core into the temp directory.
    pub fn core(&self, snapshot: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{snapshot}.core"));
        self.ok(&["export", "core", snapshot, "-o", path.to_str().unwrap()]);
        path
    }
}

/// `cmd` with no descriptor of this process but stdin, stdout and stderr: one it
/// inherited (a build tool's pipe) would reach the program, and its snapshots.
pub fn only_stdio(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: close_range is async-signal-safe and touches only the child's table.
    unsafe {
        cmd.pre_exec(|| {
            libc::close_range(3, u32::MAX, 0);
            Ok(())
        })
    }
}

/// `cmd` started (stdin empty, stdout and stderr piped), its stdout, and the first line
/// read from it.
pub fn start_reading(cmd: &mut Command) -> (Child, BufReader<ChildStdout>, String) {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    (child, lines, first)
}

/// Runs a command with the harness's timeout, collecting its output.
pub fn run(cmd: &mut Command) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawning");
    wait_with_timeout(child)
}

/// Waits for a child, killing it (and failing the test) after the timeout.
pub fn wait_with_timeout(child: Child) -> Output {
    wait_within(child, TIMEOUT, "")
}

/// Waits for a child, killing it (and failing the test, the panic saying `what`) after
/// `timeout`, with its process group if it leads one.
pub fn wait_within(mut child: Child, timeout: Duration, what: &str) -> Output {
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            s.read_to_end(&mut buf).ok();
        }
        buf
    });
    let err_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            s.read_to_end(&mut buf).ok();
        }
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > timeout {
            // (Fails harmlessly where it leads no group.)
            let group = format!("-{}", child.id());
            Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status().ok();
            child.kill().ok();
            child.wait().ok();
            panic!("command timed out after {timeout:?} {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output { status, stdout: out_thread.join().unwrap(), stderr: err_thread.join().unwrap() }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn describe(out: &Output) -> String {
    format!("{}\n--- stdout:\n{}--- stderr:\n{}", out.status, stdout(out), stderr(out))
}

/// Runs gdb in batch mode on a program and core with the given commands; returns its
/// whole output (stdout and stderr).
pub fn gdb(program: &Path, core: &Path, commands: &[&str]) -> String {
    let mut cmd = Command::new("gdb");
    cmd.args(["-batch", "-nx", "-ex", "set pagination off", "-ex", "set width 0"]);
    for c in commands {
        cmd.args(["-ex", c]);
    }
    cmd.arg(program).arg(core);
    let out = run(&mut cmd);
    format!("{}{}", stdout(&out), stderr(&out))
}

/// The value gdb prints for `print EXPR` in `output` (`$1 = 42` → `42`), by order.
pub fn gdb_values(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix('$'))
        .filter_map(|l| l.split_once(" = ").map(|(_, v)| v.trim().to_owned()))
        .collect()
}

/// A capture config file in the temp directory.
pub fn config(sdt: &Sdt, text: &str) -> String {
    let path = sdt.dir.path().join("capture.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Field of a snapshot object as i64 (None for null or absent).
pub fn int(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

/// Where an MPI job's ranks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// This host, ranks talking through shared memory.
    One,
    /// The three network-namespace hosts of `scripts/mpi-hosts` (`sdt-h1..3`), a rank on
    /// each in turn, talking TCP over their bridge.
    Three,
}

/// Root, `ip` and `unshare`, which `scripts/mpi-hosts` needs; the hosts are brought up
/// (and left up: `up` is idempotent, and other tests may use them meanwhile).
fn namespace_hosts() -> Result<(), Skip> {
    sdt_test_harness::root("network namespaces for the hosts of scripts/mpi-hosts")?;
    for (tool, fix) in [("ip", "apt-get install iproute2"), ("unshare", "apt-get install util-linux")] {
        if !runs(tool, "-V") {
            return Err(Skip::new("ip", format!("{tool} is missing"), fix));
        }
    }
    let up = run(Command::new(workspace().join("scripts/mpi-hosts")).args(["up", "--count", "3"]));
    assert!(up.status.success(), "scripts/mpi-hosts up: {}", describe(&up));
    Ok(())
}

/// `mpirun [MPIRUN_ARGS] -np N sdt run -q --store STORE -- PROGRAM ARGS` with Open MPI (as
/// root where the tests run as root), in the store's directory, on `hosts`. Its output,
/// whether it succeeded or not.
pub fn mpi_job(
    sdt: &Sdt,
    hosts: Hosts,
    ranks: u32,
    mpirun_args: &[&str],
    program: &Path,
    args: &[&str],
) -> Result<Output, Skip> {
    mpi_job_saying(sdt, hosts, ranks, mpirun_args, &["-q"], program, args)
}

/// [`mpi_job`] with `run_args` for each rank's `sdt run` in place of `-q`.
pub fn mpi_job_saying(
    sdt: &Sdt,
    hosts: Hosts,
    ranks: u32,
    mpirun_args: &[&str],
    run_args: &[&str],
    program: &Path,
    args: &[&str],
) -> Result<Output, Skip> {
    let scripts = workspace().join("scripts");
    // A launcher that hangs (mpirun once did, ending a deadlocked job) is ended before the
    // harness's own timeout would fail the test: what the ranks recorded is kept.
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "10", "90"]);
    match hosts {
        Hosts::One => {
            cmd.args(["mpirun", "--mca", "btl", "self,vader"]);
        }
        Hosts::Three => {
            namespace_hosts()?;
            cmd.arg(scripts.join("mpi-hosts"));
            cmd.args(["exec", "sdt-h1", "mpirun", "--mca", "plm_rsh_agent"])
                .arg(scripts.join("mpi-hosts-agent"))
                .args(["--mca", "btl", "tcp,self", "--host", "sdt-h1,sdt-h2,sdt-h3"])
                // The hosts share this machine's CPUs: each host's first rank would be
                // bound to core 0.
                .args(["--bind-to", "none"]);
        }
    }
    let store = sdt.store();
    cmd.args(["--allow-run-as-root", "--oversubscribe"])
        .args(mpirun_args)
        .args(["-np", &ranks.to_string()])
        .arg(env!("CARGO_BIN_EXE_sdt"))
        .arg("run")
        .args(run_args)
        .arg("--store")
        .arg(&store)
        .arg("--")
        .arg(program)
        .args(args)
        .current_dir(sdt.dir.path())
        .env("SDT_STORE", &store)
        .env("OMPI_MCA_orte_tmpdir_base", sdt.mpi_session_base())
        .stdin(Stdio::null());
    Ok(run(&mut cmd))
}
