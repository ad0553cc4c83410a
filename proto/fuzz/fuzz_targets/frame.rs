//! Fuzzes `decode_replication_message` (CopyData payloads) and, for every
//! XLogData it accepts, the pgoutput decoder on the carried data.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use walrelay_proto::frame::{decode_replication_message, ReplicationMessage};
use walrelay_proto::pgoutput::decode_message;

fuzz_target!(|data: &[u8]| {
    if let Ok(ReplicationMessage::XLogData(x)) =
        decode_replication_message(Bytes::copy_from_slice(data))
    {
        for v in 1..=4 {
            for in_stream in [false, true] {
                let _ = decode_message(x.data.clone(), v, in_stream);
            }
        }
    }
});
