//! Prints one summary line per mode at a few BERs (measurement aid).
use aerotp_sim::{run_many, Scenario, SimMode};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4);
    for mode in [
        "reliable",
        "quasi-reliable",
        "hybrid-nack",
        "hybrid-nack-mack",
        "udp",
        "datagram",
        "unreliable",
        "near-reliable",
    ] {
        for ber in [0.0, 1e-5, 1e-4] {
            let s = Scenario {
                mode: mode.parse::<SimMode>().unwrap(),
                ..Scenario::default()
            }
            .with_links(|l| l.ber = ber);
            let t = Instant::now();
            let m = run_many(&s, runs, 1).unwrap();
            println!(
                "{mode:17} ber={ber:<7} complete={}/{} goodput={:.3}Mb/s delivered={:.0} delay={:?} ovh={:.0} setup={:?} parity={:.1} retx={:.0} wall={:.2}s",
                m.complete_runs, m.runs, m.goodput_bps / 1e6, m.delivered_bytes, m.mean_delay_s, m.overhead_bytes, m.setup_delay_s, m.fec_parity, m.retransmissions, t.elapsed().as_secs_f64()
            );
        }
    }
}
