//! The DLEP wire format (RFC 8175 §11, §13; RFC 8651 §3; RFC 8757 §3): zero-copy views for
//! framing ([`MessagePacket`], [`SignalPacket`], [`Items`]) and owned, typed values
//! ([`Message`], [`Signal`], [`DataItem`]) with parse and emit. Parsers take any byte string and
//! return a value or a [`ParseError`]; they never panic and allocate at most in proportion to
//! their input.

mod error;
pub mod ids;
mod item;
mod mac;
mod message;
mod packet;
mod queue;

pub use error::{EmitError, ParseError};
pub use ids::StatusCode;
pub use item::DataItem;
pub use mac::Mac;
pub use message::{parse_items, Message, Signal};
pub use packet::{
    emit_item, message_frame_len, ItemView, Items, MessagePacket, SignalPacket, ITEM_HEADER_LEN,
    MAX_ITEMS, MAX_MESSAGE_LEN, MESSAGE_HEADER_LEN, SIGNAL_HEADER_LEN, SIGNAL_PREFIX,
};
pub use queue::{QueueParameter, QueueParameters, QUEUE_PARAMETER_SUB_ITEM};
