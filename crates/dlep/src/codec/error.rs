use thiserror::Error;

/// Why a byte string is not a valid DLEP signal, message or data item.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseError {
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("{what} has {extra} bytes after its declared length")]
    Trailing { what: &'static str, extra: usize },
    #[error("signal does not start with the \"DLEP\" prefix")]
    BadPrefix,
    #[error("data item type {ty}: length {len} is not valid ({expected})")]
    BadLength {
        ty: u16,
        len: usize,
        expected: &'static str,
    },
    #[error("data item type {ty}: {what} value {value} is out of range")]
    OutOfRange {
        ty: u16,
        what: &'static str,
        value: u64,
    },
    #[error("more than {limit} data items in one {what}")]
    TooManyItems { what: &'static str, limit: usize },
}

/// Why a value cannot be written as DLEP bytes (every length field is 16 bits).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EmitError {
    #[error("{what} of {len} bytes does not fit a 16-bit length field")]
    TooLong { what: &'static str, len: usize },
    #[error("{what} value {value} is out of range")]
    OutOfRange { what: &'static str, value: u64 },
}
