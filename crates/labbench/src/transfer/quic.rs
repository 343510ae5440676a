//! QUIC (quinn) with a self-signed certificate the receiver hands the sender.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use tokio::time::timeout_at;

use super::io::{deadline_of, report_bound, write_blocks, Ready, CLOSE_GRACE};
use crate::payload::{Clock, Sink, Source};

fn quic_server(addr: SocketAddr) -> Result<(quinn::Endpoint, Vec<u8>)> {
    let cert = rcgen::generate_simple_self_signed(vec!["aerotp-lab".into()])?;
    let der = cert.cert.der().to_vec();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(der.clone())],
            key,
        )?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)?;
    let cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let ep = quinn::Endpoint::server(cfg, addr)?;
    Ok((ep, der))
}

pub(super) async fn recv_quic(
    addr: SocketAddr,
    sink: &mut Sink,
    clock: Clock,
    cap: Duration,
    ready: Ready,
) -> Result<Instant> {
    let bound = quic_server(addr).map(|(ep, der)| (ep, Some(Arc::new(der))));
    let ep = report_bound(bound, "QUIC server", &ready)?;
    let deadline = deadline_of(cap);
    let result = async {
        let incoming = timeout_at(deadline, ep.accept())
            .await
            .map_err(|_| anyhow!("no connection within the time cap"))?
            .ok_or_else(|| anyhow!("endpoint closed"))?;
        let conn = timeout_at(deadline, incoming)
            .await
            .map_err(|_| anyhow!("handshake not done within the time cap"))??;
        let mut rs = timeout_at(deadline, conn.accept_uni())
            .await
            .map_err(|_| anyhow!("no stream within the time cap"))??;
        loop {
            match timeout_at(deadline, rs.read_chunk(64 << 10, true)).await {
                Err(_) => bail!("time cap reached"),
                Ok(Err(e)) => return Err(anyhow::Error::from(e)),
                Ok(Ok(None)) => {
                    let end = Instant::now();
                    conn.close(0u32.into(), b"done");
                    return Ok(end);
                }
                Ok(Ok(Some(c))) => sink.stream(&clock, Instant::now(), &c.bytes),
            }
        }
    }
    .await;
    let _ = tokio::time::timeout(CLOSE_GRACE, ep.wait_idle()).await;
    result
}

pub(super) async fn send_quic(
    local: SocketAddr,
    remote: SocketAddr,
    cert: Option<Arc<Vec<u8>>>,
    src: &mut Source,
    clock: Clock,
    deadline: tokio::time::Instant,
) -> Result<()> {
    let der = cert.ok_or_else(|| anyhow!("no server certificate"))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from(der.to_vec()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut ep = quinn::Endpoint::client(local)?;
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let conn = timeout_at(deadline, ep.connect(remote, "aerotp-lab")?)
        .await
        .map_err(|_| anyhow!("time cap reached during the handshake"))??;
    let mut s = conn.open_uni().await?;
    write_blocks(&mut s, src, clock, deadline).await?;
    s.finish()?;
    // The receiver closes the connection once it has read the end of the stream.
    let _ = timeout_at(deadline, conn.closed()).await;
    ep.close(0u32.into(), b"");
    Ok(())
}
