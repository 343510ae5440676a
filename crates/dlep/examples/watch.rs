//! Prints what a modem says: `cargo run -p aerotp-dlep --example watch -- 127.0.0.1:854`
//! (or `--example watch -- discover` for Peer Discovery on 224.0.0.117:854). RUST_LOG=debug
//! shows the protocol's own log.

use aerotp_dlep::{spawn, ClientConfig, Discovery};

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "aerotp_dlep=info".into()),
        )
        .init();
    let arg = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:854".into());
    let cfg = if arg == "discover" {
        ClientConfig::discover(Discovery::default())
    } else {
        match arg.parse() {
            Ok(a) => ClientConfig::connect(a),
            Err(e) => {
                eprintln!("usage: watch ADDR:PORT | discover ({e})");
                std::process::exit(2);
            }
        }
    };
    let (client, mut events) = spawn(cfg);
    loop {
        tokio::select! {
            e = events.recv() => match e {
                Some(e) => println!("{e:?}"),
                None => break,
            },
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    client.shutdown().await;
}
