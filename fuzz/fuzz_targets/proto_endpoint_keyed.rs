#![no_main]
//! Fuzz target `proto_endpoint_keyed`: the body is `aerotp_fuzz_corpus::target_proto_endpoint_keyed`, which the stable
//! replay test in crates/fuzz-corpus runs over the committed corpus too.

use libfuzzer_sys::fuzz_target;

// Counts heap bytes so targets with a memory bound can check it.
#[global_allocator]
static ALLOC: aerotp_fuzz_corpus::CountingAlloc = aerotp_fuzz_corpus::CountingAlloc;

fuzz_target!(|data: &[u8]| aerotp_fuzz_corpus::target_proto_endpoint_keyed(data));
