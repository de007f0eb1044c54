//! `sdt completions` and `sdt manpages`: shell completions and man pages generated from
//! the command line's own definition, so that they never drift from it.

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::{CompletionsOpt, ManpagesOpt, Opt};

pub fn completions(opt: CompletionsOpt) {
    clap_complete::generate(opt.shell, &mut Opt::command(), "sdt", &mut std::io::stdout());
}

/// Writes `sdt.1` and one page per subcommand (`sdt-run.1`, `sdt-export-core.1`, …).
pub fn manpages(opt: ManpagesOpt) -> Result<()> {
    std::fs::create_dir_all(&opt.out).with_context(|| format!("creating {}", opt.out.display()))?;
    let mut command = Opt::command();
    command.build();
    write_pages(&command, "sdt", &opt.out)
}

fn write_pages(command: &clap::Command, name: &str, dir: &Path) -> Result<()> {
    let command = command.clone().name(name.to_owned());
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut page)?;
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(())
}
