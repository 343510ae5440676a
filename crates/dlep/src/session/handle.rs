//! What the router does with each message the modem sends (RFC 8175 §12).

use std::time::Duration;

use super::digest::{apply_addresses, apply_pause, Digest};
use super::event::{Anomaly, Event, LostReason};
use super::types::{Addresses, Destination, PeerInfo};
use super::{Session, State};
use crate::codec::ids::{extension, item, message as msg};
use crate::codec::{DataItem, Mac, Message, MessagePacket, StatusCode};

impl Session {
    pub(super) fn handle_message(&mut self, now: Duration, bytes: &[u8]) {
        // The type decides first: an unknown message is Unknown Message whatever its items.
        if let Ok(p) = MessagePacket::new_checked(bytes) {
            if msg::name(p.message_type()).is_none() {
                self.last_rx = now;
                return self.unexpected(now, p.message_type());
            }
        }
        let m = match Message::parse(bytes) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!("DLEP: malformed message from the modem: {e}");
                let detail = format!("malformed message: {e}");
                return self.protocol_error(now, StatusCode::INVALID_DATA, detail);
            }
        };
        self.stats.messages_in += 1;
        self.last_rx = now;
        tracing::trace!(
            "DLEP: received {}",
            msg::name(m.ty).unwrap_or("unknown message")
        );
        match (self.state, m.ty) {
            (State::Closed, _) => {}
            (_, msg::SESSION_TERMINATION) => self.on_termination(now, &m),
            (State::Terminating { .. }, msg::SESSION_TERMINATION_RESPONSE) => {
                self.state = State::Closed
            }
            // Nothing else is read once this side terminates.
            (State::Terminating { .. }, _) => {}
            (State::AwaitInit { .. }, msg::SESSION_INITIALIZATION_RESPONSE) => {
                self.on_init_response(now, &m)
            }
            (State::AwaitInit { .. }, ty) => self.unexpected(now, ty),
            (State::Up, msg::HEARTBEAT) => {}
            (State::Up, msg::SESSION_UPDATE) => self.on_session_update(&m),
            (State::Up, msg::DESTINATION_UP) => self.on_destination_up(now, &m),
            (State::Up, msg::DESTINATION_UPDATE) => self.on_destination_update(now, &m, false),
            (State::Up, msg::LINK_CHARACTERISTICS_RESPONSE) => {
                self.on_destination_update(now, &m, true)
            }
            (State::Up, msg::DESTINATION_DOWN) => self.on_destination_down(now, &m),
            // Responses to requests this side does not make (or made before a race): harmless.
            (
                State::Up,
                ty @ (msg::SESSION_UPDATE_RESPONSE
                | msg::DESTINATION_ANNOUNCE_RESPONSE
                | msg::DESTINATION_DOWN_RESPONSE
                | msg::SESSION_TERMINATION_RESPONSE
                | msg::SESSION_INITIALIZATION_RESPONSE),
            ) => self.anomaly(Anomaly::StrayResponse { message: ty }),
            (State::Up, ty) => self.unexpected(now, ty),
        }
    }

    /// A known type the router never receives is Unexpected; an unknown type is Unknown
    /// (RFC 8175 §15.5): both end the session.
    fn unexpected(&mut self, now: Duration, ty: u16) {
        let (status, what) = match msg::name(ty) {
            Some(name) => (StatusCode::UNEXPECTED_MESSAGE, format!("unexpected {name}")),
            None => (
                StatusCode::UNKNOWN_MESSAGE,
                format!("unknown message type {ty}"),
            ),
        };
        tracing::warn!("DLEP: {what} from the modem");
        self.protocol_error(now, status, what);
    }

    pub(super) fn protocol_error(&mut self, now: Duration, status: StatusCode, detail: String) {
        let text = detail.chars().take(200).collect::<String>();
        self.terminate(
            now,
            status,
            &text,
            LostReason::ProtocolError { status, detail },
        );
    }

    fn digest(&mut self, m: &Message) -> Digest {
        let ll = self
            .peer
            .as_ref()
            .is_some_and(|p| p.extensions.contains(&extension::LL_DLEP_LATENCY_RANGE));
        let mut anomalies = Vec::new();
        let d = Digest::of(&m.items, &self.cfg, ll, &mut anomalies);
        for a in anomalies {
            self.anomaly(a);
        }
        d
    }

    fn on_termination(&mut self, _now: Duration, m: &Message) {
        let (status, text) = m
            .find(|i| match i {
                DataItem::Status { code, text } => Some((*code, text.clone())),
                _ => None,
            })
            .unwrap_or((StatusCode::SUCCESS, String::new()));
        tracing::info!("DLEP: modem terminated the session: {status} {text:?}");
        self.send(Message::new(msg::SESSION_TERMINATION_RESPONSE, vec![]));
        if matches!(self.state, State::Terminating { .. }) {
            // Both sides terminated at once: our reason stands.
            self.state = State::Closed;
            return;
        }
        self.lose(LostReason::PeerTerminated { status, text });
        self.state = State::Closed;
    }

    fn on_init_response(&mut self, now: Duration, m: &Message) {
        // Extensions first: they decide how the metrics read.
        let extensions = m
            .find(|i| match i {
                DataItem::ExtensionsSupported(e) => Some(e.clone()),
                _ => None,
            })
            .unwrap_or_default();
        self.peer = Some(PeerInfo {
            peer_type: String::new(),
            heartbeat_interval: Duration::ZERO,
            extensions,
            metrics: Default::default(),
            addresses: Addresses::default(),
            queues: None,
        });
        let d = self.digest(m);
        let (status, text) = d.status.clone().unwrap_or_else(|| {
            self.anomaly(Anomaly::MissingItem {
                message: m.ty,
                item: item::STATUS,
            });
            (StatusCode::SUCCESS, String::new())
        });
        if status != StatusCode::SUCCESS {
            tracing::warn!("DLEP: modem refused the session: {status} {text:?}");
            self.peer = None;
            return self.terminate(
                now,
                StatusCode::SUCCESS,
                "session refused",
                LostReason::InitRejected { status, text },
            );
        }
        let interval = self.peer_heartbeat(m, d.heartbeat_ms);
        let mut addresses = Addresses::default();
        if !apply_addresses(&mut addresses, &d.addresses, self.cfg.max_addresses) {
            self.anomaly(Anomaly::TooManyAddresses { mac: None });
        }
        let Some(peer) = self.peer.as_mut() else {
            return;
        };
        peer.peer_type = d.peer_type.unwrap_or_default();
        peer.heartbeat_interval = interval;
        peer.metrics = d.metrics;
        peer.addresses = addresses;
        peer.queues = d.queues;
        let info = peer.clone();
        tracing::info!(
            "DLEP: session up with {:?} (heartbeat {:?}, extensions {:?})",
            info.peer_type,
            interval,
            info.extensions
        );
        self.state = State::Up;
        self.last_rx = now;
        self.next_heartbeat = now.saturating_add(self.cfg.heartbeat_interval);
        self.emit(Event::SessionUp(info));
        if !d.pause.is_empty() {
            self.emit(Event::Pause {
                mac: None,
                queues: d.pause,
            });
        }
    }

    /// The heartbeat interval the modem announced in `m` (zero if it sends none, or did not
    /// say: an anomaly), and the interval its silence is judged by from now on.
    fn peer_heartbeat(&mut self, m: &Message, heartbeat_ms: Option<u32>) -> Duration {
        let interval = match heartbeat_ms {
            Some(ms) => Duration::from_millis(ms.into()),
            None => {
                self.anomaly(Anomaly::MissingItem {
                    message: m.ty,
                    item: item::HEARTBEAT_INTERVAL,
                });
                Duration::ZERO
            }
        };
        // A modem that sends no heartbeats is still watched, at our own interval: a silent
        // modem must not keep a dead session up forever.
        self.peer_interval = if interval.is_zero() {
            self.cfg.heartbeat_interval
        } else {
            interval
        };
        interval
    }

    fn on_session_update(&mut self, m: &Message) {
        let d = self.digest(m);
        let cap = self.cfg.max_addresses;
        let mut too_many = false;
        let metrics = match self.peer.as_mut() {
            Some(p) => {
                p.metrics.overlay(&d.metrics);
                too_many = !apply_addresses(&mut p.addresses, &d.addresses, cap);
                if d.queues.is_some() {
                    p.queues = d.queues.clone();
                }
                p.metrics
            }
            None => d.metrics,
        };
        if too_many {
            self.anomaly(Anomaly::TooManyAddresses { mac: None });
        }
        self.send(Message::new(msg::SESSION_UPDATE_RESPONSE, vec![success()]));
        self.emit(Event::SessionUpdate { metrics });
        self.emit_pause(None, d.pause, d.restart);
    }

    fn emit_pause(&mut self, mac: Option<Mac>, pause: Vec<u8>, restart: Vec<u8>) {
        if !pause.is_empty() {
            tracing::info!("DLEP: pause {:?} queues {pause:?}", mac);
            self.emit(Event::Pause { mac, queues: pause });
        }
        if !restart.is_empty() {
            tracing::info!("DLEP: restart {:?} queues {restart:?}", mac);
            self.emit(Event::Restart {
                mac,
                queues: restart,
            });
        }
    }

    /// The MAC a destination message must carry; without one the message is Invalid Data.
    fn require_mac(&mut self, now: Duration, m: &Message, d: &Digest) -> Option<Mac> {
        if d.mac.is_none() {
            let what = msg::name(m.ty).unwrap_or("message");
            self.protocol_error(
                now,
                StatusCode::INVALID_DATA,
                format!("{what} without a MAC Address"),
            );
        }
        d.mac
    }

    fn on_destination_up(&mut self, now: Duration, m: &Message) {
        let d = self.digest(m);
        let Some(mac) = self.require_mac(now, m, &d) else {
            return;
        };
        if self.dests.contains_key(&mac) {
            self.anomaly(Anomaly::DuplicateDestinationUp { mac });
            self.send(dest_response(
                msg::DESTINATION_UP_RESPONSE,
                mac,
                StatusCode::SUCCESS,
            ));
            return self.update_destination(mac, d, false);
        }
        if self.dests.len() >= self.cfg.max_destinations {
            self.anomaly(Anomaly::DestinationTableFull { mac });
            self.send(dest_response(
                msg::DESTINATION_UP_RESPONSE,
                mac,
                StatusCode::REQUEST_DENIED,
            ));
            return;
        }
        let mut metrics = self.peer.as_ref().map(|p| p.metrics).unwrap_or_default();
        metrics.overlay(&d.metrics);
        let mut dest = Destination {
            mac,
            addresses: Addresses::default(),
            metrics,
            paused: Vec::new(),
        };
        if !apply_addresses(&mut dest.addresses, &d.addresses, self.cfg.max_addresses) {
            self.anomaly(Anomaly::TooManyAddresses { mac: Some(mac) });
        }
        apply_pause(&mut dest.paused, &d.pause, &d.restart);
        tracing::info!(
            "DLEP: destination up {mac} (current rate tx {:?} bit/s)",
            dest.metrics.current_rate_tx
        );
        self.dests.insert(mac, dest.clone());
        self.send(dest_response(
            msg::DESTINATION_UP_RESPONSE,
            mac,
            StatusCode::SUCCESS,
        ));
        self.emit(Event::DestinationUp(dest));
        self.emit_pause(Some(mac), d.pause, d.restart);
    }

    /// Destination Update, or (`link_char`) Link Characteristics Response.
    fn on_destination_update(&mut self, now: Duration, m: &Message, link_char: bool) {
        let d = self.digest(m);
        let Some(mac) = self.require_mac(now, m, &d) else {
            return;
        };
        if !self.dests.contains_key(&mac) {
            // Expected after a refused Destination Up or a race with Down: not worth the
            // session, so not the RFC's Invalid Destination.
            return self.anomaly(Anomaly::UnknownDestination { mac, message: m.ty });
        }
        if link_char {
            let status = d.status.as_ref().map_or(StatusCode::SUCCESS, |s| s.0);
            let metrics = d.metrics;
            self.update_destination(mac, d, true);
            self.emit(Event::LinkCharacteristics {
                mac,
                status,
                metrics,
            });
        } else {
            self.update_destination(mac, d, false);
        }
    }

    fn update_destination(&mut self, mac: Mac, d: Digest, quiet: bool) {
        let cap = self.cfg.max_addresses;
        let Some(dest) = self.dests.get_mut(&mac) else {
            return;
        };
        dest.metrics.overlay(&d.metrics);
        let all = apply_addresses(&mut dest.addresses, &d.addresses, cap);
        apply_pause(&mut dest.paused, &d.pause, &d.restart);
        let snapshot = dest.clone();
        if !all {
            self.anomaly(Anomaly::TooManyAddresses { mac: Some(mac) });
        }
        tracing::debug!(
            "DLEP: destination update {mac} (current rate tx {:?} bit/s)",
            snapshot.metrics.current_rate_tx
        );
        if !quiet || !d.metrics.is_empty() {
            self.emit(Event::DestinationUpdate(snapshot));
        }
        self.emit_pause(Some(mac), d.pause, d.restart);
    }

    fn on_destination_down(&mut self, now: Duration, m: &Message) {
        let d = self.digest(m);
        let Some(mac) = self.require_mac(now, m, &d) else {
            return;
        };
        self.send(dest_response(
            msg::DESTINATION_DOWN_RESPONSE,
            mac,
            StatusCode::SUCCESS,
        ));
        if self.dests.remove(&mac).is_some() {
            tracing::info!("DLEP: destination down {mac}");
            self.emit(Event::DestinationDown { mac });
        } else {
            self.anomaly(Anomaly::UnknownDestination { mac, message: m.ty });
        }
    }
}

fn success() -> DataItem {
    DataItem::Status {
        code: StatusCode::SUCCESS,
        text: String::new(),
    }
}

fn dest_response(ty: u16, mac: Mac, code: StatusCode) -> Message {
    Message::new(
        ty,
        vec![
            DataItem::MacAddress(mac),
            DataItem::Status {
                code,
                text: String::new(),
            },
        ],
    )
}
