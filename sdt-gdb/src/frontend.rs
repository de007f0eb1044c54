//! Starting gdb on an exported core.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// `gdb -q --se=PROGRAM --core=CORE EXTRA…`: gdb with `program`'s symbols, opening
/// `core` (from [`export_core`](crate::export_core)). `extra` holds gdb options such as
/// `-batch` or `-ex bt`. The shared libraries come from the paths in the core's
/// `NT_FILE`, so they must still be the ones the snapshot mapped.
///
/// The two paths (the program's comes from the store) are glued to their options, so
/// that gdb never reads one as an option or a command: `--se=-x` names a file `-x`. An
/// empty `program` gives gdb the core alone.
pub fn gdb_command(program: &Path, core: &Path, extra: &[String]) -> Command {
    let mut gdb = Command::new("gdb");
    gdb.arg("-q");
    if !program.as_os_str().is_empty() {
        gdb.arg(glued("--se=", program));
    }
    gdb.arg(glued("--core=", core)).args(extra);
    gdb
}

/// `option` and `path` as one argument.
fn glued(option: &str, path: &Path) -> OsString {
    let mut arg = OsString::from(option);
    arg.push(path);
    arg
}

/// Evaluates each of `exprs` as gdb would in `program` with `core` loaded (one batch
/// gdb, one `output` command each): the value as gdb prints it, or gdb's error message.
pub fn evaluate(
    program: &Path,
    core: &Path,
    exprs: &[String],
) -> std::io::Result<Vec<Result<String, String>>> {
    let mut extra = vec!["-batch".to_owned(), "-nx".to_owned()];
    for (i, expr) in exprs.iter().enumerate() {
        extra.extend([
            "-ex".to_owned(),
            format!("echo \\n{MARKER}{i}\\n"),
            "-ex".to_owned(),
            format!("output {expr}"),
        ]);
    }
    extra.extend(["-ex".to_owned(), format!("echo \\n{MARKER}end\\n")]);
    // Values go to stdout and errors to stderr: one pipe for both keeps them in order.
    let (mut reader, writer) = std::io::pipe()?;
    let mut gdb = gdb_command(program, core, &extra);
    gdb.stdin(std::process::Stdio::null()).stdout(writer.try_clone()?).stderr(writer);
    let mut child = gdb.spawn()?;
    drop(gdb);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut reader, &mut text)?;
    child.wait()?;
    Ok(parse_outputs(&text, exprs.len()))
}

/// Marks where each expression's output starts in gdb's output.
const MARKER: &str = "@@sdt-expr ";

/// Splits gdb's output at the markers: the text after marker `i` is expression `i`'s
/// value, or its error if gdb said so (an error is a line without a value before it).
fn parse_outputs(text: &str, count: usize) -> Vec<Result<String, String>> {
    (0..count)
        .map(|i| {
            let start =
                text.find(&format!("{MARKER}{i}\n")).ok_or_else(|| "gdb stopped before this".to_owned())?;
            let rest = &text[start + MARKER.len() + i.to_string().len() + 1..];
            let end = rest.find(MARKER).unwrap_or(rest.len());
            let value = rest[..end].trim();
            let is_error = value.starts_with("No symbol")
                || value.starts_with("Cannot access memory")
                || value.starts_with("A syntax error")
                || value.starts_with("There is no member")
                || value.contains("not defined in")
                || value.is_empty();
            if is_error { Err(value.to_owned()) } else { Ok(value.to_owned()) }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_gets_the_files_glued_to_their_options_then_the_extra_options() {
        let extra = ["-batch".to_owned(), "-ex".to_owned(), "thread apply all bt".to_owned()];
        let cmd = gdb_command("/bin/prog".as_ref(), "/tmp/S1.core".as_ref(), &extra);
        assert_eq!(cmd.get_program(), "gdb");
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(
            args,
            ["-q", "--se=/bin/prog", "--core=/tmp/S1.core", "-batch", "-ex", "thread apply all bt"]
        );
        // A program path that reads like an option stays a path.
        let cmd = gdb_command("--eval-command=shell id".as_ref(), "c".as_ref(), &[]);
        assert_eq!(cmd.get_args().nth(1).unwrap(), "--se=--eval-command=shell id");
        let alone = gdb_command("".as_ref(), "c".as_ref(), &[]);
        assert_eq!(alone.get_args().collect::<Vec<_>>(), ["-q", "--core=c"]);
    }

    #[test]
    fn outputs_split_at_markers() {
        let text = "[New LWP 5]\n\n@@sdt-expr 0\n{1, 2, 3}\n@@sdt-expr 1\nNo symbol \"nosuch\" in current \
                    context.\n\n@@sdt-expr 2\n0x5637d0d3302e \"transfer\"\n@@sdt-expr end\n";
        let got = parse_outputs(text, 4);
        assert_eq!(got[0], Ok("{1, 2, 3}".to_owned()));
        assert_eq!(got[1], Err("No symbol \"nosuch\" in current context.".to_owned()));
        assert_eq!(got[2], Ok("0x5637d0d3302e \"transfer\"".to_owned()));
        assert!(got[3].is_err());
    }
}
