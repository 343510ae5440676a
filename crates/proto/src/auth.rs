//! Authenticated (and optionally encrypted) TPDUs with a pre-shared key (docs/security.md,
//! wire layout in docs/spec.md §8).
//!
//! The endpoint seals every datagram it sends — data, ASYN, control, RST, datagram mode — and
//! opens every one it receives before anything acts on it. Sealing happens on the datagram a
//! connection has already cut: the parity is stripped, the body wrapped in the envelope, the
//! header's AUTH bit set, and the parity computed again over the sealed TPDU (seal, then FEC;
//! the receiver corrects, then verifies). The AEAD is AES-256-GCM from `ring`, chosen by
//! measurement (docs/results/security.md).
//!
//! Nonces: 4 bytes of sender instance (random per endpoint, from the caller's seed) and a
//! 64-bit packet number counting every TPDU the endpoint seals, from a random start below
//! 2^63. A nonce is never used twice by one endpoint; two endpoints sharing a key collide only
//! if 96 random bits land within each other's ranges (docs/security.md, "Nonces"). The
//! receiver keeps a sliding 4096-bit window per sender instance: a packet number seen before,
//! or older than the window, is a replay.

use crate::codec::{self, Received};
use aerotp_fec as fec;
use aerotp_wire::{crc32c, Envelope, Header, AUTH_OVERHEAD, HEADER_LEN, MAX_KEY_ID, NONCE_LEN};
use bytes::BytesMut;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use thiserror::Error;

/// Bytes of a pre-shared key (AES-256).
pub const KEY_LEN: usize = 32;
/// Packet numbers a replay window spans.
pub const REPLAY_WINDOW: u64 = 4096;
/// Sender instances whose windows are kept (≈ 540 bytes each, so ≤ 2.3 MB); the oldest is
/// forgotten first. Only authenticated TPDUs create windows, so no forger can fill the table.
pub const REPLAY_PEERS: usize = 4096;
const WORDS: usize = (REPLAY_WINDOW / 64) as usize;
/// Header, key byte and nonce: the associated data of an encrypted TPDU.
const PREFIX: usize = HEADER_LEN + 1 + NONCE_LEN;

/// One pre-shared key and its identifier (0–127), carried in every TPDU it seals.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey {
    id: u8,
    secret: [u8; KEY_LEN],
}

impl AuthKey {
    pub fn new(id: u8, secret: [u8; KEY_LEN]) -> Result<AuthKey, AuthError> {
        if id > MAX_KEY_ID {
            return Err(AuthError::KeyId(id));
        }
        Ok(AuthKey { id, secret })
    }
    pub fn id(&self) -> u8 {
        self.id
    }
    pub fn secret(&self) -> &[u8; KEY_LEN] {
        &self.secret
    }
}

/// Never prints the secret.
impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthKey {{ id: {}, secret: <hidden> }}", self.id)
    }
}

/// The keys an endpoint holds: it seals with `current` and opens with either, so a key can be
/// rotated without stopping (docs/security.md, "Rotation").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySet {
    pub current: AuthKey,
    pub previous: Option<AuthKey>,
}

impl KeySet {
    pub fn validate(&self) -> Result<(), AuthError> {
        match &self.previous {
            Some(p) if p.id == self.current.id => Err(AuthError::SameId(p.id)),
            _ => Ok(()),
        }
    }
}

/// The endpoint's authentication settings (`EndpointConfig::auth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthConfig {
    pub keys: KeySet,
    /// Encrypt bodies as well (otherwise they travel in clear, authenticated).
    pub encrypt: bool,
    /// Random bytes from the caller (the engine owns no random generator): the sender
    /// instance and the packet number's start. Must differ every time an endpoint is made
    /// with the same key: give it fresh OS randomness.
    pub nonce_seed: [u8; NONCE_LEN],
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    #[error("key id {0} is out of range: give 0 to 127")]
    KeyId(u8),
    #[error("the current and the previous key both have id {0}: a rotated key needs a new id")]
    SameId(u8),
    #[error("this endpoint was made without a key: give one in its configuration to authenticate")]
    NotEnabled,
}

/// Why a received datagram was dropped by authentication; each is a counter in
/// `EndpointStats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The tag did not verify: forged, or sealed with another key under the same id.
    Failed,
    /// A key id this endpoint does not hold (retired, or never shared).
    UnknownKey,
    /// A packet number seen before or older than the window.
    Replayed,
    /// No AUTH bit while this endpoint requires it.
    Missing,
    /// The envelope's CRC-32C failed even after FEC: it cannot be verified.
    Corrupted,
}

struct Keyed {
    id: u8,
    key: LessSafeKey,
}

impl Keyed {
    fn new(k: &AuthKey) -> Keyed {
        let key = UnboundKey::new(&AES_256_GCM, &k.secret)
            .expect("a 32-byte secret is exactly AES-256's key length");
        Keyed {
            id: k.id,
            key: LessSafeKey::new(key),
        }
    }
}

/// Sliding bitmap of the packet numbers seen from one sender instance (RFC 4303 §3.4.3 and
/// WireGuard keep the same structure).
#[derive(Clone)]
struct Window {
    top: u64,
    bits: [u64; WORDS],
}

impl Window {
    fn new(pn: u64) -> Window {
        let mut w = Window {
            top: pn,
            bits: [0; WORDS],
        };
        w.set(pn);
        w
    }
    fn slot(pn: u64) -> (usize, u64) {
        let i = pn % REPLAY_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }
    fn set(&mut self, pn: u64) {
        let (w, b) = Self::slot(pn);
        self.bits[w] |= b;
    }
    fn seen(&self, pn: u64) -> bool {
        if pn > self.top {
            return false;
        }
        if self.top - pn >= REPLAY_WINDOW {
            return true;
        }
        let (w, b) = Self::slot(pn);
        self.bits[w] & b != 0
    }
    fn insert(&mut self, pn: u64) {
        if pn > self.top {
            if pn - self.top >= REPLAY_WINDOW {
                self.bits = [0; WORDS];
            } else {
                for x in self.top + 1..pn {
                    let (w, b) = Self::slot(x);
                    self.bits[w] &= !b;
                }
            }
            self.top = pn;
        }
        self.set(pn);
    }
}

/// Who sealed a TPDU that verified: the sender endpoint's `instance` and the packet number
/// it used. Freshness is judged on it (`Auth::is_fresh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sealer {
    pub instance: u32,
    pub pn: u64,
}

/// What this endpoint knows of one sender instance: its replay window, and from which packet
/// number on its TPDUs are known to be fresh.
struct Heard {
    window: Window,
    /// The packet number of a TPDU of this instance that answered a challenge this endpoint
    /// made (an ECHO of a cookie it minted): every TPDU the instance sealed after it was
    /// sealed after this endpoint's challenge, so it is no recording from an earlier life of
    /// the endpoint. `None` until such an ECHO verified.
    fresh_after: Option<u64>,
    /// The address the latest such ECHO proved (its cookie is bound to it): a fresh TPDU
    /// proves a connection only from there. The mark says when a TPDU was sealed, not where
    /// it came from: from any other address it may be a copy an on-path attacker sent first
    /// (fuzz finding K2, docs/results/fuzz.md).
    fresh_at: Option<SocketAddr>,
}

/// Replay windows of the sender instances heard from, bounded by [`REPLAY_PEERS`].
#[derive(Default)]
struct ReplayTable {
    heard: HashMap<u32, Heard>,
    order: VecDeque<u32>,
}

impl ReplayTable {
    fn seen(&self, instance: u32, pn: u64) -> bool {
        self.heard.get(&instance).is_some_and(|h| h.window.seen(pn))
    }
    fn insert(&mut self, instance: u32, pn: u64) {
        if let Some(h) = self.heard.get_mut(&instance) {
            h.window.insert(pn);
            return;
        }
        if self.heard.len() >= REPLAY_PEERS {
            // Forgotten with its window goes its freshness: its next connection is
            // challenged again.
            if let Some(old) = self.order.pop_front() {
                self.heard.remove(&old);
            }
        }
        self.order.push_back(instance);
        let window = Window::new(pn);
        self.heard.insert(
            instance,
            Heard {
                window,
                fresh_after: None,
                fresh_at: None,
            },
        );
    }
}

/// An endpoint's sealing and opening state.
pub(crate) struct Auth {
    encrypt: bool,
    current: Keyed,
    previous: Option<Keyed>,
    instance: [u8; 4],
    next_pn: u64,
    replay: ReplayTable,
    /// The key id each peer address last sealed with, so answers go out in a key the peer
    /// holds while a rotation is under way (bounded by [`REPLAY_PEERS`]).
    peer_key: HashMap<SocketAddr, u8>,
    buf: Vec<u8>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("encrypt", &self.encrypt)
            .field("current_id", &self.current.id)
            .field("previous_id", &self.previous.as_ref().map(|k| k.id))
            .field("next_pn", &self.next_pn)
            .finish_non_exhaustive()
    }
}

impl Auth {
    pub(crate) fn new(cfg: &AuthConfig) -> Auth {
        let s = cfg.nonce_seed;
        let mut pn = [0u8; 8];
        pn.copy_from_slice(&s[4..]);
        Auth {
            encrypt: cfg.encrypt,
            current: Keyed::new(&cfg.keys.current),
            previous: cfg.keys.previous.as_ref().map(Keyed::new),
            instance: [s[0], s[1], s[2], s[3]],
            // Below 2^63: the number never wraps in an endpoint's life.
            next_pn: u64::from_be_bytes(pn) >> 1,
            replay: ReplayTable::default(),
            peer_key: HashMap::new(),
            buf: Vec::new(),
        }
    }

    /// Replaces the keys (rotation); the packet number and replay windows carry on.
    pub(crate) fn set_keys(&mut self, keys: &KeySet) {
        self.current = Keyed::new(&keys.current);
        self.previous = keys.previous.as_ref().map(Keyed::new);
    }

    /// Seals the plain datagram in `out[start..]` (header, body, CRC-32C, parity, as
    /// `codec::encode` wrote it), keeping its parity unless the sealed TPDU would then exceed
    /// `mtu`; what `out` holds before `start` is left alone. The sealed TPDU is built beside
    /// and copied back (one copy more than a plain TPDU: the envelope goes in front of the
    /// body, and encryption needs the body in its final place). False if it cannot be sealed
    /// (not a TPDU we made, or no room even without parity); `out` is then unchanged.
    pub(crate) fn seal(
        &mut self,
        out: &mut Vec<u8>,
        start: usize,
        mtu: usize,
        to: SocketAddr,
    ) -> bool {
        let Some(plain) = out.get(start..) else {
            return false;
        };
        let Ok(h) = Header::parse(plain) else {
            return false;
        };
        let n = usize::from(h.len);
        let Some(body) = plain.get(HEADER_LEN..HEADER_LEN + n) else {
            return false;
        };
        let mut p = h.fec;
        while p > 0 && codec::datagram_len(n + AUTH_OVERHEAD, p).is_none_or(|l| l > mtu) {
            p -= 1;
        }
        if codec::datagram_len(n + AUTH_OVERHEAD, p).is_none_or(|l| l > mtu) {
            return false;
        }
        let Ok(len) = u16::try_from(n + AUTH_OVERHEAD) else {
            return false;
        };
        let mut sh = h;
        sh.len = len;
        sh.fec = p;
        let mut buf = std::mem::take(&mut self.buf);
        if !self.seal_into(&sh, body, &mut buf, to) {
            self.buf = buf;
            return false;
        }
        out.truncate(start);
        out.extend_from_slice(&buf);
        self.buf = buf;
        true
    }

    /// Writes header, envelope, CRC-32C and parity of `h` (whose `len` and `fec` are final)
    /// around `body` into `buf`.
    fn seal_into(&mut self, h: &Header, body: &[u8], buf: &mut Vec<u8>, to: SocketAddr) -> bool {
        // The current key, unless this peer last sealed with the previous one (it has not
        // taken the rotated key yet): answer it in a key it holds.
        let key = match (self.peer_key.get(&to), &self.previous) {
            (Some(&id), Some(p)) if id == p.id => p,
            _ => &self.current,
        };
        let pn = self.next_pn;
        self.next_pn += 1;
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..4].copy_from_slice(&self.instance);
        nonce[4..].copy_from_slice(&pn.to_be_bytes());
        buf.clear();
        buf.extend_from_slice(&h.to_bytes_auth());
        buf.push(Envelope::key_byte(key.id, self.encrypt));
        buf.extend_from_slice(&nonce);
        buf.extend_from_slice(body);
        let n = Nonce::assume_unique_for_key(nonce);
        let tag = if self.encrypt {
            let (aad, text) = buf.split_at_mut(PREFIX);
            key.key
                .seal_in_place_separate_tag(n, Aad::from(&aad[..]), text)
        } else {
            // Authentication only: everything is associated data, the plaintext is empty.
            key.key
                .seal_in_place_separate_tag(n, Aad::from(&buf[..]), &mut [])
        };
        let Ok(tag) = tag else {
            return false;
        };
        buf.extend_from_slice(tag.as_ref());
        let crc = crc32c(&buf[HEADER_LEN..]);
        buf.extend_from_slice(&crc.to_be_bytes());
        if h.fec > 0 && fec::encode(h.fec, buf).is_err() {
            // `seal` chose a parity the code carries at this size; refuse rather than send
            // a TPDU whose header announces parity it lacks.
            return false;
        }
        true
    }

    /// Marks `s`'s instance fresh from `s.pn` on, at `at`: `s` sealed an ECHO of a cookie
    /// this endpoint minted for `at`, so it was sealed after this endpoint's challenge, by
    /// an instance that receives at `at`.
    pub(crate) fn mark_fresh(&mut self, s: Sealer, at: SocketAddr) {
        if let Some(h) = self.replay.heard.get_mut(&s.instance) {
            h.fresh_after = Some(h.fresh_after.map_or(s.pn, |f| f.min(s.pn)));
            h.fresh_at = Some(at);
        }
    }

    /// Whether `s` was sealed after its instance answered one of this endpoint's challenges,
    /// and came from the address that answer proved: then it cannot be a recording of a
    /// connection this endpoint heard in an earlier life (before a restart, or before the
    /// instance was forgotten), nor a copy raced in from an address that proved nothing. A
    /// recording made in this life is refused by the replay window instead.
    pub(crate) fn is_fresh(&self, s: Sealer, from: SocketAddr) -> bool {
        self.replay
            .heard
            .get(&s.instance)
            .is_some_and(|h| h.fresh_at == Some(from) && h.fresh_after.is_some_and(|f| s.pn > f))
    }

    /// Verifies and unwraps `r` (decoded, FEC already applied). On success `r` is the plain
    /// TPDU the connection expects and the result says who sealed it; on refusal nothing has
    /// changed — the replay window is updated only after the tag verified.
    pub(crate) fn open(&mut self, r: &mut Received, from: SocketAddr) -> Result<Sealer, Refusal> {
        if !r.auth {
            return Err(Refusal::Missing);
        }
        if r.quality == codec::Quality::Corrupted {
            return Err(Refusal::Corrupted);
        }
        let Ok(env) = Envelope::parse(&r.body) else {
            return Err(Refusal::Failed);
        };
        let key = if env.key_id == self.current.id {
            &self.current
        } else {
            match &self.previous {
                Some(k) if k.id == env.key_id => k,
                _ => return Err(Refusal::UnknownKey),
            }
        };
        let instance = u32::from_be_bytes([env.nonce[0], env.nonce[1], env.nonce[2], env.nonce[3]]);
        let mut pnb = [0u8; 8];
        pnb.copy_from_slice(&env.nonce[4..]);
        let pn = u64::from_be_bytes(pnb);
        if self.replay.seen(instance, pn) {
            return Err(Refusal::Replayed);
        }
        let (encrypted, key_id) = (env.encrypted, env.key_id);
        let nonce = Nonce::assume_unique_for_key(env.nonce);
        let n = env.body.len();
        let hdr = r.header.to_bytes_auth();
        let ok = if encrypted {
            let mut aad = [0u8; PREFIX];
            aad[..HEADER_LEN].copy_from_slice(&hdr);
            aad[HEADER_LEN..].copy_from_slice(&r.body[..1 + NONCE_LEN]);
            // Decrypted in place: in the body's own buffer if nothing else holds it, else in
            // a copy (a body sliced from a receive buffer other bodies share).
            let mut body = BytesMut::from(std::mem::take(&mut r.body));
            let ok = key
                .key
                .open_in_place(nonce, Aad::from(&aad[..]), &mut body[1 + NONCE_LEN..])
                .is_ok();
            r.body = body.freeze();
            ok
        } else {
            let buf = &mut self.buf;
            buf.clear();
            buf.extend_from_slice(&hdr);
            buf.extend_from_slice(&r.body[..1 + NONCE_LEN + n]);
            let mut tag = env.tag;
            key.key
                .open_in_place(nonce, Aad::from(&buf[..]), &mut tag)
                .is_ok()
        };
        if !ok {
            return Err(Refusal::Failed);
        }
        self.replay.insert(instance, pn);
        if self.peer_key.get(&from) != Some(&key_id) {
            if self.peer_key.len() >= REPLAY_PEERS && !self.peer_key.contains_key(&from) {
                // Forgetting means answering in the current key: what a peer that has
                // rotated holds anyway.
                self.peer_key.clear();
            }
            self.peer_key.insert(from, key_id);
        }
        r.body = r.body.slice(1 + NONCE_LEN..1 + NONCE_LEN + n);
        r.header.len = n as u16;
        Ok(Sealer { instance, pn })
    }

    /// Seals a TPDU the endpoint itself builds (RST, replies without a connection, datagram
    /// mode) from header and body.
    pub(crate) fn seal_new(
        &mut self,
        header: Header,
        body: &[u8],
        out: &mut Vec<u8>,
        to: SocketAddr,
    ) -> bool {
        out.clear();
        if codec::encode(header, body, out).is_err() {
            return false;
        }
        self.seal(out, 0, usize::from(u16::MAX), to)
    }
}

#[cfg(test)]
mod tests;
