//! Starting gdb on an exported core.

use std::path::Path;
use std::process::Command;

/// `gdb -q EXTRA… PROGRAM CORE`: gdb with `program`'s symbols, opening `core` (from
/// [`export_core`](crate::export_core)). `extra` holds gdb options such as `-batch` or
/// `-ex bt`, passed before the two files. The shared libraries come from the paths in the
/// core's `NT_FILE`, so they must still be the ones the snapshot mapped.
pub fn gdb_command(program: &Path, core: &Path, extra: &[String]) -> Command {
    let mut gdb = Command::new("gdb");
    gdb.arg("-q").args(extra).arg(program).arg(core);
    gdb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_gets_options_then_program_then_core() {
        let extra = ["-batch".to_owned(), "-ex".to_owned(), "thread apply all bt".to_owned()];
        let cmd = gdb_command("/bin/prog".as_ref(), "/tmp/S1.core".as_ref(), &extra);
        assert_eq!(cmd.get_program(), "gdb");
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(args, ["-q", "-batch", "-ex", "thread apply all bt", "/bin/prog", "/tmp/S1.core"]);
    }
}
