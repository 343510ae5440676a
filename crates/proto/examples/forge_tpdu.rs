//! Prints, in hex, one forged reliable-mode TPDU without a key: a RST (reason "forged: go
//! away") or an empty AFIN, with the ports, TPDU number, timestamp and tag given. For the
//! loopback attack `scripts/forged-reset-loopback.py` (docs/results/security.md), which
//! sends it from a spoofed address.
//!
//! `forge_tpdu rst|afin SRC_PORT DST_PORT SEQ TIMESTAMP TAG`

use aerotp_wire::{ControlBody, Flags, Header, Mode};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 7 {
        eprintln!("usage: forge_tpdu rst|afin SRC_PORT DST_PORT SEQ TIMESTAMP TAG");
        std::process::exit(2);
    }
    let n = |i: usize| -> u64 {
        a[i].parse().unwrap_or_else(|_| {
            eprintln!("not a number: {}", a[i]);
            std::process::exit(2)
        })
    };
    let (flags, body) = match a[1].as_str() {
        "rst" => {
            let mut b = Vec::new();
            let reset = ControlBody {
                reset: Some("forged: go away".into()),
                ..Default::default()
            };
            reset.emit(&mut b).expect("a short reason");
            (Flags::RST, b)
        }
        _ => (Flags::AFIN, Vec::new()),
    };
    let h = Header {
        mode: Mode::Reliable,
        flags,
        src_port: n(2) as u16,
        dst_port: n(3) as u16,
        seq: n(4) as u32,
        timestamp: n(5) as u32,
        fec: 0,
        tag: n(6) as u8,
        len: 0,
    };
    let mut out = Vec::new();
    aerotp_wire::emit_tpdu(h, &body, &mut out).expect("a small TPDU");
    println!(
        "{}",
        out.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
}
