//! Real-time drivers of the link model: UDP relay.
