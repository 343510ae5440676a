//! `aerotp trace FILE`: a trace written with `--qlog`, or a pcapng capture written with
//! `--pcap`, as a time-sequence chart (PNG: TPDU numbers against time for the endpoint that
//! sent the most data, first transmissions, retransmissions, repair TPDUs and the cumulative
//! acknowledgement it received) and a summary (docs/qlog.md).

use std::path::PathBuf;

use anyhow::{Context, Result};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A trace written with `--qlog` (`sim`, `send`, `recv`, `gw`), or a capture written with
    /// `--pcap` (the datagrams only: no engine events).
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
    let open =
        || std::fs::File::open(&a.file).with_context(|| format!("opening {}", a.file.display()));
    let mut magic = [0u8; 4];
    let is_pcapng =
        std::io::Read::read_exact(&mut open()?, &mut magic).is_ok() && magic == PCAPNG_MAGIC;
    let records = if is_pcapng {
        from_capture(&a.file)?
    } else {
        let mut records = Vec::new();
        aerotp_qlog::reader::for_each_record(open()?, &a.file.display().to_string(), |r| {
            records.push(r)
        })?;
        records
    };
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

/// First four bytes of a pcapng file (a Section Header Block).
const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

/// The datagram events of a capture: each packet, decoded as in a trace; the endpoint is
/// the packet's source address for what an interface saw leaving (`sent`, a link's `in`) and
/// its destination for what arrived (`received`, `arrived`, a link's `out`). Times start at
/// the first packet.
fn from_capture(path: &std::path::Path) -> Result<Vec<aerotp_qlog::Record>> {
    let (names, packets) = aerotp_capture::read_capture(path)
        .with_context(|| format!("reading the capture {}", path.display()))?;
    let t0 = packets.first().map_or(std::time::Duration::ZERO, |p| p.at);
    let mut log = aerotp_qlog::TpduLog::new();
    Ok(packets
        .iter()
        .map(|p| {
            let name = names.get(p.iface as usize).map_or("", String::as_str);
            let sent = name == "sent" || name == "in" || name.ends_with(" in");
            let at = if sent { p.src } else { p.dst }.to_string();
            log.record(p.at.saturating_sub(t0), sent, &at, p.src, p.dst, &p.payload)
        })
        .collect())
}
