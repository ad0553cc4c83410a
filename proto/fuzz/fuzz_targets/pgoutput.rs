//! Fuzzes the pgoutput decoder: `decode_message` for protocol versions 1 to 4
//! inside and outside a stream block, and the stateful `decode` over the
//! input split into several messages (so stream start/stop state changes
//! between them).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use walrelay_proto::pgoutput::{decode, decode_message, DecoderState};

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    for v in 1..=4 {
        for in_stream in [false, true] {
            let _ = decode_message(buf.clone(), v, in_stream);
        }
    }
    // A 0xFF byte separates messages for the stateful decoder: fixtures seed
    // single messages, mutations join them.
    let mut state = DecoderState::new(4);
    for part in buf.split(|&b| b == 0xFF) {
        let _ = decode(&mut state, buf.slice_ref(part));
    }
});
