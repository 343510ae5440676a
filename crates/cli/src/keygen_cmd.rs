//! `aerotp keygen PATH`: writes a new pre-shared key file (mode 600), or rotates the keys of
//! an existing one (docs/security.md, "Rotation").

use std::path::PathBuf;

use aerotp_net::keyfile::{self, WriteMode};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Key file to write. Refused if it exists, unless --force, --rotate or --retire.
    path: PathBuf,
    /// Replace an existing file with a new key (peers holding the old one are cut off).
    #[arg(long, conflicts_with_all = ["rotate", "retire"])]
    force: bool,
    /// Add a new current key (next id) and keep the current one as previous: copy the file
    /// to every peer; receivers accept both while senders move to the new one.
    #[arg(long, conflicts_with = "retire")]
    rotate: bool,
    /// Drop the previous key once every peer has the current one.
    #[arg(long)]
    retire: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let how = if args.force {
        WriteMode::Force
    } else if args.rotate {
        WriteMode::Rotate
    } else if args.retire {
        WriteMode::Retire
    } else {
        WriteMode::New
    };
    let keys = keyfile::write(&args.path, how)?;
    match &keys.previous {
        Some(p) => println!(
            "{}: current key id {}, previous key id {} (still accepted)",
            args.path.display(),
            keys.current.id(),
            p.id()
        ),
        None => println!(
            "{}: current key id {}",
            args.path.display(),
            keys.current.id()
        ),
    }
    Ok(())
}
