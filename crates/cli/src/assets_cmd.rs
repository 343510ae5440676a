//! `AEROTP_GEN_ASSETS=DIR aerotp` (feature `assets`, off by default): writes the manual pages
//! and shell completions of this build's commands, generated from their clap definitions, for
//! the Debian package. scripts/package.sh builds it with the field build's features, so the
//! pages describe the deployed commands (docs/packaging.md); the binary that is shipped is
//! built without this feature and does not carry the generators. An environment variable and
//! not a hidden subcommand: clap_complete would list a hidden subcommand in the completions.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap_complete::Shell;

/// The variable naming the output directory: man/ (aerotp.1 and one page per subcommand) and
/// completions/ (aerotp.bash, _aerotp for zsh, aerotp.fish), created if missing.
pub const ENV: &str = "AEROTP_GEN_ASSETS";

pub fn run(out: PathBuf, cmd: clap::Command) -> Result<()> {
    let man = out.join("man");
    let completions = out.join("completions");
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    clap_mangen::generate_to(cmd.clone(), &man)
        .with_context(|| format!("writing man pages into {}", man.display()))?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut cmd = cmd.clone();
        clap_complete::generate_to(shell, &mut cmd, "aerotp", &completions).with_context(|| {
            format!("writing {shell} completions into {}", completions.display())
        })?;
    }
    print_tree(&out)
}

/// Lists what was written, one path a line (the packaging script installs these).
fn print_tree(out: &Path) -> Result<()> {
    for sub in ["man", "completions"] {
        let dir = out.join(sub);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()?;
        names.sort();
        for n in names {
            println!("{}", dir.join(n).display());
        }
    }
    Ok(())
}
