#![no_main]
//! Fuzz target `dlep_parse`: the body is `aerotp_dlep::fuzz_parse` (every DLEP parser, the
//! emit/parse round trip of whatever parses, and a router session fed the bytes), which the
//! stable test crates/dlep/tests/fuzz_corpus.rs runs over the committed corpus too.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| aerotp_dlep::fuzz_parse(data));
