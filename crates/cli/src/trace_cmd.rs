//! `aerotp trace FILE`: a trace written with `--qlog` as a time-sequence chart (PNG: TPDU
//! numbers against time for the endpoint that sent the most data, first transmissions,
//! retransmissions, repair TPDUs and the cumulative acknowledgement it received) and a
//! summary (docs/qlog.md).

use std::path::PathBuf;

use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A trace file written with `--qlog` (`sim`, `send`, `recv`).
    file: PathBuf,
    /// Where to write the chart; default: FILE with the extension `.png`.
    #[arg(long, value_name = "PNG")]
    out: Option<PathBuf>,
    /// Write no chart, only the summary.
    #[arg(long, conflicts_with = "out")]
    no_plot: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<()> {
    let f =
        std::fs::File::open(&a.file).with_context(|| format!("opening {}", a.file.display()))?;
    let mut records = Vec::new();
    aerotp_qlog::reader::for_each_record(f, &a.file.display().to_string(), |r| records.push(r))?;
    let png = (!a.no_plot).then(|| {
        a.out
            .clone()
            .unwrap_or_else(|| a.file.with_extension("png"))
    });
    let title = format!("AeroTP time-sequence: {}", a.file.display());
    let s = aerotp_qlog::analyse(records, png.as_deref(), &title).with_context(|| {
        format!(
            "writing the chart {}",
            png.as_ref()
                .map_or(String::new(), |p| p.display().to_string())
        )
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{s}");
    }
    if let Some(p) = png {
        eprintln!("chart: {}", p.display());
    }
    Ok(())
}
