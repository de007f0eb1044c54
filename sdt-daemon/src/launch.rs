//! Finding the program and building what `execve` gets.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sdt_abi::{ENV_CAPTURE, ENV_TRACER, Filter};
use sdt_sys::spawn::Command;

/// Why the program cannot be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// No such file, or not found in `PATH`.
    #[error("program not found: {0}{hint}", hint = if .0.contains('/') { "" } else { " (looked in PATH)" })]
    NotFound(String),
    /// A directory was named.
    #[error("{0} is a directory, not a program")]
    IsDirectory(String),
    /// The file has no execute permission.
    #[error("{0} is not executable (no execute permission; try chmod +x)")]
    NotExecutable(String),
    /// An argument or environment variable holds a NUL byte.
    #[error("argument or environment variable holds a NUL byte: {0:?}")]
    Nul(String),
    /// No program was given.
    #[error("no program given (usage: sdt run -- PROG ARGS...)")]
    Empty,
    /// `execve` refused a program that is there, and the file says why.
    #[error("cannot execute {program} ({errno}): {why}")]
    Exec {
        /// The program's path.
        program: String,
        /// What `execve` answered.
        errno: std::io::Error,
        /// What the file's start says of it.
        why: String,
    },
}

/// Why `execve` refused `program`, a file that is there, with `errno`, where the file's
/// start tells more than the error's name: a `#!` line or an ELF interpreter that does
/// not exist (both `ENOENT`), a file that is neither a script nor a program for this
/// machine (`ENOEXEC`).
pub(crate) fn why_exec_failed(program: &Path, errno: &std::io::Error) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let len = std::fs::File::open(program).and_then(|mut f| f.read(&mut head)).ok()?;
    let head = &head[..len];
    let elf = head.starts_with(b"\x7fELF");
    match errno.raw_os_error()? {
        libc::ENOENT if head.starts_with(b"#!") => {
            let line = head[2..].split(|&b| b == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line);
            let interpreter = line.split_whitespace().next().unwrap_or_default();
            Some(format!("its #! line names {interpreter:?}, which does not exist"))
        }
        libc::ENOENT if elf => {
            let loader = elf_interpreter(program)
                .map_or_else(|| "its dynamic loader".to_owned(), |l| format!("its dynamic loader {l:?}"));
            Some(format!("{loader} does not exist here (a program built for another system?)"))
        }
        libc::ENOEXEC if elf => {
            Some("an ELF file this machine does not run (another architecture, or a damaged file)".to_owned())
        }
        libc::ENOEXEC => Some(
            "neither a program nor a script with a #! line (a shell runs such a file with sh: `sdt run -- sh FILE`)"
                .to_owned(),
        ),
        _ => None,
    }
}

/// The program interpreter (`PT_INTERP`: the dynamic loader) a 64-bit ELF file names.
fn elf_interpreter(path: &Path) -> Option<String> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let data = &object::ReadCache::new(std::fs::File::open(path).ok()?);
    let header = object::elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let segments = header.program_headers(endian, data).ok()?;
    let interpreter = segments.iter().find_map(|s| s.interpreter(endian, data).ok().flatten())?;
    Some(String::from_utf8_lossy(interpreter).into_owned())
}

/// Looks `program` up the way a shell does: as a path if it holds a `/`, else in `PATH`.
pub fn resolve(program: &str) -> Result<PathBuf, LaunchError> {
    if program.is_empty() {
        return Err(LaunchError::Empty);
    }
    if program.contains('/') {
        let path = PathBuf::from(program);
        return match std::fs::metadata(&path) {
            Err(_) => Err(LaunchError::NotFound(program.to_owned())),
            Ok(m) if m.is_dir() => Err(LaunchError::IsDirectory(program.to_owned())),
            Ok(m) if m.permissions().mode() & 0o111 == 0 => {
                Err(LaunchError::NotExecutable(program.to_owned()))
            }
            Ok(_) => Ok(path),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable_file(candidate))
        .ok_or_else(|| LaunchError::NotFound(program.to_owned()))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How a program is linked: what its dynamic section and symbol table name.
#[derive(Debug, Default)]
pub(crate) struct Linking {
    /// Its `DT_NEEDED` libraries.
    pub needed: Vec<String>,
    /// Those of the dynamic symbols asked about that it has, defined or not.
    pub symbols: Vec<String>,
}

impl Linking {
    /// How `program` is linked, and which of `symbols` are among its dynamic symbols;
    /// empty for what is not an ELF file (a script).
    pub(crate) fn of(program: &Path, symbols: &[&str]) -> Linking {
        let Some(dynamic) = crate::libraries::Dynamic::of(program) else { return Linking::default() };
        let mut found = Vec::new();
        if let (false, Ok(file)) = (symbols.is_empty(), std::fs::File::open(program)) {
            let data = object::ReadCache::new(file);
            let dynamic = [sdt_target::symbols::DYNAMIC];
            found.extend(symbols.iter().filter_map(|&name| {
                sdt_target::symbols::find_named(&data, &dynamic, name, |_| Some(name.to_owned()))
            }));
        }
        let symbols = found;
        Linking { needed: dynamic.needed, symbols }
    }
}

/// Whether `program` shows libsdt: it needs `libsdt.so`, defines libsdt's state word
/// (linked with `libsdt.a`, or the `sdt-lib` crate), or, stripped of its symbols, holds
/// the name of the variable the library reads its capture filter from.
pub(crate) fn links_libsdt(program: &Path) -> bool {
    use sdt_target::symbols::{DYNAMIC, STATIC, find_named, has_table};
    if needs_libsdt_so(program) {
        return true;
    }
    let Ok(file) = std::fs::File::open(program) else { return false };
    let data = object::ReadCache::new(file);
    if find_named(&data, &[STATIC, DYNAMIC], sdt_abi::SYMBOL_STATE, |s| s.defined.then_some(())).is_some() {
        return true;
    }
    // A program that kept its symbol table would list the state word; a stripped one
    // still holds the library's strings.
    !has_table(&data, STATIC) && contains(program, sdt_abi::ENV_CAPTURE.as_bytes())
}

/// Whether `program` needs `libsdt.so` (`DT_NEEDED`).
pub(crate) fn needs_libsdt_so(program: &Path) -> bool {
    Linking::of(program, &[]).needed.iter().any(|lib| lib.starts_with("libsdt.so"))
}

/// Whether the file at `path` holds `needle`, read a MiB at a time.
fn contains(path: &Path, needle: &[u8]) -> bool {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let finder = memchr::memmem::Finder::new(needle);
    let mut window = Vec::with_capacity((1 << 20) + needle.len());
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        window.extend_from_slice(&chunk[..n]);
        if finder.find(&window).is_some() {
            return true;
        }
        // What could begin a match that the next read completes.
        window.drain(..window.len().saturating_sub(needle.len() - 1));
    }
}

/// The `execve` arguments: `argv` as given (the program's name first), this process's
/// environment with `extra` in place of its own values, the two variables that turn the
/// program's library on, and the descriptors in `keep` left open.
pub(crate) fn command(
    program: &Path,
    args: &[String],
    filter: &Filter,
    ptrace_options: u32,
    extra: &[(String, Vec<u8>)],
    keep: Vec<i32>,
) -> Result<Command, LaunchError> {
    let cstring = |bytes: &[u8]| {
        CString::new(bytes).map_err(|_| LaunchError::Nul(String::from_utf8_lossy(bytes).into_owned()))
    };
    let pair = |key: &[u8], value: &[u8]| cstring(&[key, b"=", value].concat());
    let mut env = Vec::new();
    for (key, value) in std::env::vars_os() {
        let ours = extra.iter().any(|(k, _)| k.as_bytes() == key.as_bytes());
        if key == ENV_TRACER || key == ENV_CAPTURE || ours {
            continue;
        }
        env.push(pair(key.as_bytes(), value.as_bytes())?);
    }
    for (key, value) in extra {
        env.push(pair(key.as_bytes(), value)?);
    }
    env.push(cstring(format!("{ENV_TRACER}={}", std::process::id()).as_bytes())?);
    env.push(cstring(format!("{ENV_CAPTURE}={}", filter.encode()).as_bytes())?);
    Ok(Command {
        program: cstring(program.as_os_str().as_bytes())?,
        args: args.iter().map(|a| cstring(a.as_bytes())).collect::<Result<_, _>>()?,
        env,
        ptrace_options,
        keep,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_a_shell() {
        assert!(resolve("sh").unwrap().ends_with("sh"));
        assert!(matches!(resolve("no-such-program-sdt"), Err(LaunchError::NotFound(_))));
        assert!(matches!(resolve("./no/such/file"), Err(LaunchError::NotFound(_))));
        assert!(matches!(resolve("/"), Err(LaunchError::IsDirectory(_))));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(resolve(file.to_str().unwrap()), Err(LaunchError::NotExecutable(_))));
        assert!(matches!(resolve(""), Err(LaunchError::Empty)));
    }

    #[test]
    fn errors_read_well() {
        assert_eq!(
            LaunchError::NotFound("foo".into()).to_string(),
            "program not found: foo (looked in PATH)"
        );
        assert_eq!(LaunchError::NotFound("./foo".into()).to_string(), "program not found: ./foo");
    }
}
