//! The requests of a batch: records grouped one per request or in
//! batch-mode chunks, each with its body, its headers (the record's under
//! the prefix, `Idempotency-Key`, the dead-letter mark) and the order keys
//! that must not be in flight together.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::answer::invalid_header;
use super::Http;
use crate::sink::queued::{Outcome, Outgoing};

/// walrelay's own headers.
pub(super) const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub(super) const DEAD_LETTER: &str = "x-walrelay-dead-letter";

/// A random (version 4) UUID.
fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Records that must not be in flight together: a destination and a key.
pub(super) type OrderKey = (Arc<str>, Option<Bytes>);

/// One request: the records it carries (indices into the batch, in order),
/// their order keys, its headers and body.
pub(super) struct Unit {
    pub(super) records: Vec<usize>,
    pub(super) keys: Vec<OrderKey>,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    /// Standard Webhooks `webhook-id`.
    pub(super) webhook_id: Option<String>,
    /// The token generation it carried (0: none).
    pub(super) generation: u64,
}

impl Http {
    /// The requests of `batch`, in order; records sent by none (a null
    /// value, a header HTTP cannot carry) have their outcome already.
    pub(super) fn plan(&self, batch: &[Outgoing], outcomes: &mut [Option<Outcome>]) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut chunk: Vec<usize> = Vec::new();
        for (i, record) in batch.iter().enumerate() {
            // Debezium Server sends nothing for a null value.
            if record.value.is_none() {
                outcomes[i] = Some(Outcome::Acked);
                continue;
            }
            match self.batch {
                None => match self.unit(batch, vec![i]) {
                    Ok(unit) => units.push(unit),
                    Err(outcome) => outcomes[i] = Some(outcome),
                },
                Some(max) => {
                    // A record for another destination (a dead-letter
                    // record) never shares a request.
                    if chunk
                        .first()
                        .is_some_and(|&f| batch[f].destination != record.destination)
                    {
                        self.push_chunk(batch, &mut chunk, &mut units, outcomes);
                    }
                    chunk.push(i);
                    if chunk.len() >= max {
                        self.push_chunk(batch, &mut chunk, &mut units, outcomes);
                    }
                }
            }
        }
        self.push_chunk(batch, &mut chunk, &mut units, outcomes);
        units
    }

    fn push_chunk(
        &self,
        batch: &[Outgoing],
        chunk: &mut Vec<usize>,
        units: &mut Vec<Unit>,
        outcomes: &mut [Option<Outcome>],
    ) {
        if chunk.is_empty() {
            return;
        }
        let records = std::mem::take(chunk);
        match self.unit(batch, records.clone()) {
            Ok(unit) => units.push(unit),
            Err(outcome) => {
                for i in records {
                    outcomes[i] = Some(outcome.clone());
                }
            }
        }
    }

    /// The request carrying `records` (one, or a batch-mode chunk: the
    /// values as a JSON array, the first record's headers).
    fn unit(&self, batch: &[Outgoing], records: Vec<usize>) -> Result<Unit, Outcome> {
        let first = &batch[records[0]];
        let body = if self.batch.is_none() {
            first.value.clone().unwrap_or_default()
        } else {
            let mut b = BytesMut::new();
            b.extend_from_slice(b"[");
            for (n, &i) in records.iter().enumerate() {
                if n > 0 {
                    b.extend_from_slice(b",");
                }
                b.extend_from_slice(batch[i].value.as_deref().unwrap_or_default());
            }
            b.extend_from_slice(b"]");
            b.freeze()
        };
        let ids: Vec<&str> = records
            .iter()
            .filter_map(|&i| batch[i].dedup_id.as_deref())
            .collect();
        let id = match ids.as_slice() {
            [] => None,
            [one] => Some((*one).to_owned()),
            [first, .., last] => Some(format!("{first}..{last}")),
        };
        let mut headers = self.extra.clone();
        headers.insert(header::CONTENT_TYPE, self.content_type.clone());
        for h in &first.headers {
            let Some(value) = &h.value else { continue };
            let name = format!("{}{}", self.prefix, h.name.to_uppercase());
            let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
                return Err(invalid_header(&h.name, "its name"));
            };
            let value = if self.base64 {
                HeaderValue::from_str(&openssl::base64::encode_block(value))
            } else {
                HeaderValue::from_bytes(value)
            };
            let Ok(value) = value else {
                return Err(invalid_header(&h.name, "its value"));
            };
            // Debezium Server collects them in a map: the last one wins.
            headers.insert(name, value);
        }
        if let (true, Some(id)) = (self.idempotency_key, &id) {
            if let Ok(v) = HeaderValue::from_str(id) {
                headers.insert(IDEMPOTENCY_KEY, v);
            }
        }
        if let Some((topic, value)) = &self.dead_letter {
            if *first.destination == **topic {
                headers.insert(DEAD_LETTER, value.clone());
            }
        }
        Ok(Unit {
            keys: records
                .iter()
                .map(|&i| (Arc::clone(&batch[i].destination), batch[i].key.clone()))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect(),
            webhook_id: self
                .ctx
                .webhook
                .as_ref()
                .map(|_| format!("msg_{}", id.clone().unwrap_or_else(random_uuid))),
            records,
            headers,
            body,
            generation: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4() {
        let u = random_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
    }
}
