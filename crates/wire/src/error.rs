use thiserror::Error;

/// Why a byte string is not a valid TPDU (or part of one).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("unsupported version {0} (this implementation speaks version 1)")]
    Version(u8),
    #[error("unknown transfer mode {0} (valid: 0..=6)")]
    Mode(u8),
    #[error("header check (HEC) failed: header corrupted")]
    HeaderCheck,
    #[error("payload CRC-32C failed: body corrupted")]
    BodyCheck,
    #[error("{what} count {count} exceeds the limit {limit}")]
    TooMany {
        what: &'static str,
        count: usize,
        limit: usize,
    },
    #[error("body of {0} bytes does not fit the 16-bit length field")]
    BodyTooLong(usize),
    #[error("a body announced as {announced} bytes was written as {written} (a serialiser bug: its length and its bytes disagree)")]
    BodyLengthMismatch { announced: usize, written: usize },
    #[error("control body has {0} unexpected trailing bytes")]
    Trailing(usize),
    #[error("RST reason is not UTF-8 or longer than 256 bytes")]
    BadReason,
    #[error(
        "a repair, CHALLENGE or ECHO TPDU (flags exactly RST|RPT, ASYN|RST or ASYN|RPT) has \
         no control body: read it as what it is"
    )]
    NotControl,
    #[error("CHALLENGE kind {0} is unknown (0 = challenge, 1 = retry)")]
    BadKind(u8),
    #[error("a {what} body must be exactly {need} bytes, this one has {have}")]
    BadLength {
        what: &'static str,
        need: usize,
        have: usize,
    },
}
