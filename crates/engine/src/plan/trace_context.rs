//! W3C Trace Context (`traceparent`, and `tracestate` when given) on every
//! request of a run that asks for it. headroom is the trace's root: each
//! request (or each session iteration) starts a trace, and each request
//! is a span of it whose ID is `traceparent`'s parent-id. The IDs are kept
//! with the request's outcome, so the run's slowest requests lead to
//! their traces (see `metrics::exemplars`).

use crate::metrics::exemplars::TraceIds;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a run sends trace context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    pub per: TracePer,
    /// `traceparent`'s sampled flag: asks the server's tracer to record.
    pub sampled: bool,
    /// Sent as `tracestate` on every request, as given.
    pub tracestate: Option<String>,
    /// Where a trace ID leads (a URL with `{id}`): for the report; the
    /// engine does not use it.
    pub url: Option<String>,
}

/// Which requests share a trace ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TracePer {
    /// A fresh trace for every request.
    #[default]
    Request,
    /// One trace per session iteration: its requests are spans of it.
    Iteration,
}

impl TracePer {
    pub const NAMES: &'static [&'static str] = &["request", "iteration"];

    pub fn name(self) -> &'static str {
        match self {
            TracePer::Request => "request",
            TracePer::Iteration => "iteration",
        }
    }

    pub fn from_name(name: &str) -> Option<TracePer> {
        [TracePer::Request, TracePer::Iteration]
            .into_iter()
            .find(|per| per.name() == name)
    }
}

/// Fresh IDs: random, never 0 (the specification's invalid value).
pub fn new_trace_id(rng: &mut fastrand::Rng) -> u128 {
    loop {
        let id = rng.u128(..);
        if id != 0 {
            return id;
        }
    }
}

pub fn new_span_id(rng: &mut fastrand::Rng) -> u64 {
    loop {
        let id = rng.u64(..);
        if id != 0 {
            return id;
        }
    }
}

/// `traceparent`'s value: `00-{trace-id}-{parent-id}-{flags}`, 55 bytes.
pub struct Traceparent([u8; 55]);

impl Traceparent {
    pub fn new(ids: TraceIds, sampled: bool) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
        for i in 0..32 {
            out[3 + i] = HEX[((ids.trace_id >> (124 - 4 * i)) & 0xf) as usize];
        }
        for i in 0..16 {
            out[36 + i] = HEX[((ids.span_id >> (60 - 4 * i)) & 0xf) as usize];
        }
        if sampled {
            out[54] = b'1';
        }
        Traceparent(out)
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits and dashes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_version_00_with_both_ids_in_lower_case_hex() {
        let ids = TraceIds {
            trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            span_id: 0x00f067aa0ba902b7,
        };
        // The specification's own example.
        assert_eq!(
            Traceparent::new(ids, true).as_str(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(
            Traceparent::new(ids, false).as_str(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        );
        assert_eq!(ids.trace_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn ids_are_never_zero() {
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..1000 {
            assert_ne!(new_trace_id(&mut rng), 0);
            assert_ne!(new_span_id(&mut rng), 0);
        }
    }
}
