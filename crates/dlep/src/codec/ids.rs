//! Numbers from the IANA DLEP registries (RFC 8175 §15, RFC 8651 §5, RFC 8757 §5) and the
//! private-use ids MIT-LL's LL-DLEP uses for the drafts it implemented.

/// Signal types (UDP, RFC 8175 §15.2).
pub mod signal {
    pub const PEER_DISCOVERY: u16 = 1;
    pub const PEER_OFFER: u16 = 2;
}

/// Message types (TCP session, RFC 8175 §15.3).
pub mod message {
    pub const SESSION_INITIALIZATION: u16 = 1;
    pub const SESSION_INITIALIZATION_RESPONSE: u16 = 2;
    pub const SESSION_UPDATE: u16 = 3;
    pub const SESSION_UPDATE_RESPONSE: u16 = 4;
    pub const SESSION_TERMINATION: u16 = 5;
    pub const SESSION_TERMINATION_RESPONSE: u16 = 6;
    pub const DESTINATION_UP: u16 = 7;
    pub const DESTINATION_UP_RESPONSE: u16 = 8;
    pub const DESTINATION_ANNOUNCE: u16 = 9;
    pub const DESTINATION_ANNOUNCE_RESPONSE: u16 = 10;
    pub const DESTINATION_DOWN: u16 = 11;
    pub const DESTINATION_DOWN_RESPONSE: u16 = 12;
    pub const DESTINATION_UPDATE: u16 = 13;
    pub const LINK_CHARACTERISTICS_REQUEST: u16 = 14;
    pub const LINK_CHARACTERISTICS_RESPONSE: u16 = 15;
    pub const HEARTBEAT: u16 = 16;

    /// The message's name for logs; `None` for a type this implementation does not know.
    pub fn name(ty: u16) -> Option<&'static str> {
        Some(match ty {
            SESSION_INITIALIZATION => "Session Initialization",
            SESSION_INITIALIZATION_RESPONSE => "Session Initialization Response",
            SESSION_UPDATE => "Session Update",
            SESSION_UPDATE_RESPONSE => "Session Update Response",
            SESSION_TERMINATION => "Session Termination",
            SESSION_TERMINATION_RESPONSE => "Session Termination Response",
            DESTINATION_UP => "Destination Up",
            DESTINATION_UP_RESPONSE => "Destination Up Response",
            DESTINATION_ANNOUNCE => "Destination Announce",
            DESTINATION_ANNOUNCE_RESPONSE => "Destination Announce Response",
            DESTINATION_DOWN => "Destination Down",
            DESTINATION_DOWN_RESPONSE => "Destination Down Response",
            DESTINATION_UPDATE => "Destination Update",
            LINK_CHARACTERISTICS_REQUEST => "Link Characteristics Request",
            LINK_CHARACTERISTICS_RESPONSE => "Link Characteristics Response",
            HEARTBEAT => "Heartbeat",
            _ => return None,
        })
    }
}

/// Data item types (RFC 8175 §15.4; 21..=28 from the extension RFCs).
pub mod item {
    pub const STATUS: u16 = 1;
    pub const IPV4_CONNECTION_POINT: u16 = 2;
    pub const IPV6_CONNECTION_POINT: u16 = 3;
    pub const PEER_TYPE: u16 = 4;
    pub const HEARTBEAT_INTERVAL: u16 = 5;
    pub const EXTENSIONS_SUPPORTED: u16 = 6;
    pub const MAC_ADDRESS: u16 = 7;
    pub const IPV4_ADDRESS: u16 = 8;
    pub const IPV6_ADDRESS: u16 = 9;
    pub const IPV4_ATTACHED_SUBNET: u16 = 10;
    pub const IPV6_ATTACHED_SUBNET: u16 = 11;
    pub const MAX_DATA_RATE_RX: u16 = 12;
    pub const MAX_DATA_RATE_TX: u16 = 13;
    pub const CURRENT_DATA_RATE_RX: u16 = 14;
    pub const CURRENT_DATA_RATE_TX: u16 = 15;
    pub const LATENCY: u16 = 16;
    pub const RESOURCES: u16 = 17;
    pub const RELATIVE_LINK_QUALITY_RX: u16 = 18;
    pub const RELATIVE_LINK_QUALITY_TX: u16 = 19;
    pub const MTU: u16 = 20;
    /// RFC 8629 (multi-hop); kept raw here.
    pub const HOP_COUNT: u16 = 21;
    /// RFC 8629 (multi-hop); kept raw here.
    pub const HOP_CONTROL: u16 = 22;
    /// RFC 8651 §3.1.
    pub const QUEUE_PARAMETERS: u16 = 23;
    /// RFC 8651 §3.2.
    pub const PAUSE: u16 = 24;
    /// RFC 8651 §3.3.
    pub const RESTART: u16 = 25;
    /// RFC 8703 (link identifiers); kept raw here.
    pub const LINK_IDENTIFIER_LENGTH: u16 = 26;
    /// RFC 8703 (link identifiers); kept raw here.
    pub const LINK_IDENTIFIER: u16 = 27;
    /// RFC 8757 §3.
    pub const LATENCY_RANGE: u16 = 28;
    /// LL-DLEP (184e148) sends the latency-range draft (-03) under this private-use id, with the
    /// same value layout as RFC 8757 (two u64 microsecond values); see
    /// `config/protocol/latency-range-03.xml` in its archive.
    pub const LL_DLEP_LATENCY_RANGE: u16 = 65411;
}

/// Extension types for the Extensions Supported data item (RFC 8175 §15.6).
pub mod extension {
    pub const MULTI_HOP: u16 = 1;
    /// RFC 8651 control-plane-based pause.
    pub const PAUSE: u16 = 2;
    pub const LINK_IDENTIFIERS: u16 = 3;
    /// RFC 8757 latency range.
    pub const LATENCY_RANGE: u16 = 4;
    /// LL-DLEP's private id for the latency-range draft (its `latency-range-03.xml`).
    pub const LL_DLEP_LATENCY_RANGE: u16 = 65521;
    /// LL-DLEP's private id for the multi-hop draft (its `multi-hop-06.xml`).
    pub const LL_DLEP_MULTI_HOP: u16 = 65524;
}

/// A Status data item's code (RFC 8175 §15.5). Codes of 128 and above terminate the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StatusCode(pub u8);

impl StatusCode {
    pub const SUCCESS: StatusCode = StatusCode(0);
    pub const NOT_INTERESTED: StatusCode = StatusCode(1);
    pub const REQUEST_DENIED: StatusCode = StatusCode(2);
    pub const INCONSISTENT_DATA: StatusCode = StatusCode(3);
    pub const UNKNOWN_MESSAGE: StatusCode = StatusCode(128);
    pub const UNEXPECTED_MESSAGE: StatusCode = StatusCode(129);
    pub const INVALID_DATA: StatusCode = StatusCode(130);
    pub const INVALID_DESTINATION: StatusCode = StatusCode(131);
    pub const TIMED_OUT: StatusCode = StatusCode(132);
    pub const SHUTTING_DOWN: StatusCode = StatusCode(255);

    /// RFC 8175 §15.5: codes 0..=127 let the session continue, 128..=255 end it.
    pub fn terminates(self) -> bool {
        self.0 >= 128
    }

    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "Success",
            1 => "Not Interested",
            2 => "Request Denied",
            3 => "Inconsistent Data",
            128 => "Unknown Message",
            129 => "Unexpected Message",
            130 => "Invalid Data",
            131 => "Invalid Destination",
            132 => "Timed Out",
            255 => "Shutting Down",
            _ => "unassigned",
        }
    }
}

impl std::fmt::Display for StatusCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.0, self.name())
    }
}
