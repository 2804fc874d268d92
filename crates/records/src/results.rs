//! `results.json`: the run's record and the contract other tools read
//! (`report`, `compare`, shard merge, studies). Field names carry units.
//! Stable fields (do not rename): `requests.{total,ok,failed}`,
//! `throughput_rps`, `duration_s`, `bytes_received`, `latency_ms.*`,
//! `latency_ms_ok.*`, `status_codes`, `errors`, `timeline`,
//! `target_rate_rps`, `send_lag_ms.*`, `meta`, `histograms`.
//!
//! Over 1,000 lines: results.json's whole contract — every field any
//! reader relies on, documented where it is defined, and the JSON Schema
//! derived from it — in one place.

use crate::server::findings::{ClientFacts, SEND_LAG_LATE_MS};
use crate::server::machine::Machine;
use crate::server::ServerReport;
use hdrhistogram::Histogram;
use headroom_metrics::aggregate::TimelinePoint;
use headroom_metrics::{histogram, ConnectionEvent, ErrorClass, Stats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Default response-time distribution bounds, as in Gatling's report.
pub const DEFAULT_BUCKETS_MS: [u64; 2] = [800, 1200];

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Results {
    pub meta: Meta,
    pub config: RunConfig,
    /// Totals over all requests.
    #[serde(flatten)]
    pub summary: Summary,
    pub duration_s: f64,
    /// Latency from the actual send (what coordinated-omission-prone tools
    /// report); equals `latency_ms` in a closed run.
    pub service_time_ms: LatencySummary,
    /// Open model: the requested rate (mean over the schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate_rps: Option<f64>,
    /// Open model: requests sent per second of the schedule (late sends
    /// past its end lower it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rate_rps: Option<f64>,
    /// Open model: how late sends were after their intended time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag_ms: Option<LatencySummary>,
    /// Open model: arrivals that found every connection busy and the pool
    /// at its cap (`--connections`, `max_connections`), so they waited in
    /// the generator before being sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_for_connection: Option<u64>,
    /// Per request name, the same shape as the totals.
    pub per_request: BTreeMap<String, Summary>,
    pub timeline: Vec<TimelinePoint>,
    /// A run with trace context (`--trace`): the slowest requests with
    /// the trace IDs they were sent with — each name's 5 slowest in each
    /// second, and the run's 100 slowest ranked (see `exemplars`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exemplars: Vec<crate::exemplars::Exemplar>,
    pub connections_opened: u64,
    /// What happened to connections: opened, reconnects after the server
    /// closed an idle keep-alive connection, requests sent again after a
    /// reused connection turned out closed, connections closed because the
    /// server sent bytes nobody asked for.
    #[serde(default)]
    pub connections: Connections,
    /// WebSockets and server-sent-event streams (sessions' `ws` / `sse`
    /// steps): sockets opened and most open at once, messages and bytes
    /// each way, and how sockets closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<Sockets>,
    /// The scenario's scripts, per function or inline piece (and `setup`,
    /// `teardown`): calls, errors with where and why, `after` failures,
    /// and the generator CPU they took — to see when a script, not the
    /// server, limits the run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scripts: BTreeMap<String, ScriptFunction>,
    /// How often a per-user memory bound was reached (each also warned
    /// about): bodies that reached the 1 MiB capture limit (checks saw their
    /// start), cookies not stored because the user's jar held 64.
    #[serde(default)]
    pub limits_reached: LimitsReached,
    /// Stopped by Ctrl-C / SIGTERM before its planned end.
    pub interrupted: bool,
    /// Why the run ended early, when it did (e.g. a feeder ran dry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    pub warnings: Vec<String>,
    /// The figures describe the generator's limit rather than the
    /// server's (see `generator_bound_reasons` and `server.findings`).
    #[serde(default)]
    pub generator_bound: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generator_bound_reasons: Vec<String>,
    /// `--threshold`s and the scenario's `[thresholds]`, each checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<headroom_objectives::slo::BoundCheck>,
    /// The server (process tree), the machine and the generator, sampled
    /// on the run's clock; with findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerReport>,
    /// `run --shard K/N`: which part of which plan this file measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// `run --start-at`: the shared start time, and how late this run
    /// began after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<StartAt>,
    /// A merged file: the server and machine as each shard's generator saw
    /// them, keyed by shard (`"2/3"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shard_servers: BTreeMap<String, ServerReport>,
    /// Events during the run (`--event`, `[[event]]`): when each ran, how
    /// it ended, and what users saw after it and before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<crate::events::EventRecord>,
    /// The threshold that stopped the run early (`stop_reason` is then
    /// "threshold").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<AbortRecord>,
    pub histograms: Histograms,
}

/// `abort` in results.json: which threshold stopped the run, and when.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct AbortRecord {
    pub threshold: String,
    /// The figure over the window, in the threshold's unit.
    pub actual: f64,
    pub window_s: f64,
    /// When it was judged, s from the start.
    pub at_s: f64,
}

/// `shard` in results.json.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ShardInfo {
    /// 1-based, as in `--shard K/N`.
    pub index: u32,
    pub count: u32,
    /// The plan's fingerprint (SHA-256): equal in every shard of one plan.
    pub plan_hash: String,
}

impl ShardInfo {
    /// `K/N`, as on the command line.
    pub fn label(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }
}

/// `start_at` in results.json.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct StartAt {
    /// RFC 3339, UTC, to the millisecond.
    pub at: String,
    /// How long after `at` the run actually began; open-model arrivals due
    /// meanwhile are counted `not_sent`.
    pub late_ms: f64,
}

/// `connections` in results.json (see [`ConnectionEvent`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Connections {
    pub opened: u64,
    /// The server closed a kept-alive connection while it sat idle (its
    /// keep-alive timeout was shorter than the pause); a new one was opened
    /// before sending.
    pub reconnects_idle_closed: u64,
    /// A request on a reused connection met EOF/RST before any response
    /// byte (the server had closed it as the request left) and was sent
    /// once more on a new connection.
    pub retried_stale: u64,
    /// The server sent bytes while no request was outstanding; the
    /// connection was closed.
    pub closed_unrequested_bytes: u64,
    /// Connections opened by the protocol they agreed on: `http/1.1`,
    /// `h2`, `h3`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_protocol: BTreeMap<String, u64>,
    /// HTTP/2 streams the server refused (REFUSED_STREAM) whose request
    /// was sent once more on another connection.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub h2_refused: u64,
    /// HTTP/2 streams above a GOAWAY's last stream id whose request was
    /// sent once more on another connection.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub h2_goaway_unprocessed: u64,
    /// HTTP/3 streams the server rejected (H3_REQUEST_REJECTED) whose
    /// request was sent once more on another connection.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub h3_refused: u64,
    /// HTTP/3 requests not sent before the server's GOAWAY, sent once more
    /// on another connection.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub h3_goaway_unprocessed: u64,
    /// HTTP/3 with 0-RTT: requests sent as early data that the server
    /// refused, sent once more on another connection.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quic_0rtt_rejected: u64,
    /// HTTP/3: what QUIC counted on the run's connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicSummary>,
}

impl std::ops::AddAssign<&Connections> for Connections {
    /// Another shard's (or run's) connections added: every field named, so
    /// a new one does not compile until it says how it adds up.
    fn add_assign(&mut self, other: &Connections) {
        let Connections {
            opened,
            reconnects_idle_closed,
            retried_stale,
            closed_unrequested_bytes,
            by_protocol,
            h2_refused,
            h2_goaway_unprocessed,
            h3_refused,
            h3_goaway_unprocessed,
            quic_0rtt_rejected,
            quic,
        } = other;
        self.opened += opened;
        self.reconnects_idle_closed += reconnects_idle_closed;
        self.retried_stale += retried_stale;
        self.closed_unrequested_bytes += closed_unrequested_bytes;
        for (protocol, n) in by_protocol {
            *self.by_protocol.entry(protocol.clone()).or_default() += n;
        }
        self.h2_refused += h2_refused;
        self.h2_goaway_unprocessed += h2_goaway_unprocessed;
        self.h3_refused += h3_refused;
        self.h3_goaway_unprocessed += h3_goaway_unprocessed;
        self.quic_0rtt_rejected += quic_0rtt_rejected;
        self.quic = QuicSummary::merge(self.quic.as_ref(), quic.as_ref());
    }
}

/// One function's entry in `scripts` (see [`headroom_metrics::ScriptStats`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ScriptFunction {
    pub calls: u64,
    /// Calls that threw, or were stopped at their time or memory budget.
    pub errors: u64,
    /// `after` hooks that reported a failure.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u64,
    /// The generator CPU its calls took, all together (ms), and per call
    /// (µs).
    pub cpu_ms_total: f64,
    pub cpu_us_mean: f64,
    pub cpu_us_p99: f64,
    pub cpu_us_max: f64,
    /// Errors by `file:line: message` (at most 20 kinds; the rest under
    /// "(other messages)").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_messages: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_messages: BTreeMap<String, u64>,
    /// The CPU-time histogram (ns; HdrHistogram V2 + DEFLATE, base64), so
    /// shards merge exactly.
    pub cpu_ns_histogram: String,
}

impl ScriptFunction {
    pub fn from_stats(s: &headroom_metrics::ScriptStats) -> BTreeMap<String, ScriptFunction> {
        s.functions
            .iter()
            .map(|(name, f)| {
                let h = &f.cpu_ns;
                let us = |ns: u64| ns as f64 / 1000.0;
                let total_ns = h.mean() * h.len() as f64;
                let entry = ScriptFunction {
                    calls: f.calls,
                    errors: f.errors,
                    failures: f.failures,
                    cpu_ms_total: total_ns / 1e6,
                    cpu_us_mean: h.mean() / 1000.0,
                    cpu_us_p99: us(h.value_at_quantile(0.99)),
                    cpu_us_max: us(h.max()),
                    error_messages: f.error_messages.clone(),
                    failure_messages: f.failure_messages.clone(),
                    cpu_ns_histogram: headroom_metrics::histogram::to_base64(h),
                };
                (name.clone(), entry)
            })
            .collect()
    }

    /// Shards' entries added up (histograms merged exactly).
    pub fn merge(parts: &[&BTreeMap<String, ScriptFunction>]) -> BTreeMap<String, ScriptFunction> {
        let mut stats = headroom_metrics::ScriptStats::default();
        for part in parts {
            let wire = part
                .iter()
                .map(|(name, f)| {
                    let w = headroom_metrics::scripts::FunctionWire {
                        calls: f.calls,
                        errors: f.errors,
                        failures: f.failures,
                        cpu_ns: f.cpu_ns_histogram.clone(),
                        error_messages: f.error_messages.clone(),
                        failure_messages: f.failure_messages.clone(),
                    };
                    (name.clone(), w)
                })
                .collect();
            if let Ok(s) = headroom_metrics::ScriptStats::from_wire(&wire) {
                stats += &s;
            }
        }
        ScriptFunction::from_stats(&stats)
    }
}

/// `sockets` in results.json (see [`headroom_metrics::SocketStats`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Sockets {
    /// WebSockets upgraded (a `101` with a valid accept key).
    pub websockets_opened: u64,
    /// Event streams opened (2xx `text/event-stream`), reconnects included.
    pub event_streams_opened: u64,
    /// Event streams opened again after the server ended one, with
    /// `Last-Event-ID`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub event_stream_reconnects: u64,
    /// gRPC streaming calls opened (server, client or bidirectional); their
    /// messages are counted with the sockets' below.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub grpc_streams_opened: u64,
    /// Most sockets open at once in any second (the timeline's `sockets_open`).
    pub open_peak: u32,
    /// Data messages (WebSocket text and binary frames) sent, and their
    /// payload bytes; what the server should have received.
    pub messages_sent: u64,
    pub bytes_sent: u64,
    /// Data messages and events received, and their payload bytes.
    pub messages_received: u64,
    pub bytes_received: u64,
    /// Received messages no `expect` took: pushed by the server unasked,
    /// or passed over while a step waited for another.
    pub unmatched: u64,
    /// Pings from the server (each answered with a pong).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pings_received: u64,
    /// Messages sent and received per second of the run.
    pub messages_sent_per_s: f64,
    pub messages_received_per_s: f64,
    /// Sockets closed, by who and how: `client:<code>` (a `close` step, or
    /// 1000 when a session ended with its socket open), `server:<code>`,
    /// `server:no_code` (a close frame without a code),
    /// `server:no_close_frame`, `server:ended` (an event stream),
    /// `error:<class>`; a gRPC stream: `server:<status>` (`server:ok`,
    /// `server:unavailable`, …; `server:no_status`), `client:cancelled`
    /// (reset at its deadline, or by the run's stop), `error:<class>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub closes: BTreeMap<String, u64>,
}

impl Sockets {
    pub fn from_stats(
        s: &headroom_metrics::SocketStats,
        timeline: &[TimelinePoint],
        duration_s: f64,
    ) -> Option<Sockets> {
        if s.is_empty() {
            return None;
        }
        let per_s = |n: u64| {
            if duration_s > 0.0 {
                n as f64 / duration_s
            } else {
                0.0
            }
        };
        Some(Sockets {
            websockets_opened: s.opened_ws,
            event_streams_opened: s.opened_sse,
            event_stream_reconnects: s.sse_reconnects,
            grpc_streams_opened: s.opened_grpc,
            open_peak: timeline
                .iter()
                .filter_map(|p| p.sockets_open)
                .max()
                .unwrap_or(0),
            messages_sent: s.messages_sent,
            bytes_sent: s.bytes_sent,
            messages_received: s.messages_received,
            bytes_received: s.bytes_received,
            unmatched: s.unmatched,
            pings_received: s.pings_received,
            messages_sent_per_s: per_s(s.messages_sent),
            messages_received_per_s: per_s(s.messages_received),
            closes: s.closes.clone(),
        })
    }

    /// The counts of shards added; rates and the peak from the merged
    /// run's duration and timeline.
    pub fn merge(
        parts: &[Option<&Sockets>],
        timeline: &[TimelinePoint],
        duration_s: f64,
    ) -> Option<Sockets> {
        let mut stats = headroom_metrics::SocketStats::default();
        for p in parts.iter().flatten() {
            stats += &headroom_metrics::SocketStats {
                opened_ws: p.websockets_opened,
                opened_sse: p.event_streams_opened,
                sse_reconnects: p.event_stream_reconnects,
                opened_grpc: p.grpc_streams_opened,
                messages_sent: p.messages_sent,
                bytes_sent: p.bytes_sent,
                messages_received: p.messages_received,
                bytes_received: p.bytes_received,
                unmatched: p.unmatched,
                pings_received: p.pings_received,
                closes: p.closes.clone(),
            };
        }
        Sockets::from_stats(&stats, timeline, duration_s)
    }
}

/// `connections.quic` in results.json: the QUIC handshakes (1-RTT), the
/// packets quinn sent and declared lost, stream resets by HTTP/3 error
/// code, and how connections closed.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct QuicSummary {
    pub handshakes: u64,
    /// Of the handshakes, resumed with 0-RTT (`--0rtt`); the server
    /// accepted the early data on `zero_rtt_accepted`, refused it on
    /// `zero_rtt_rejected`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub handshakes_0rtt: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zero_rtt_accepted: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zero_rtt_rejected: u64,
    /// Time until a connection could carry requests: the 1-RTT handshake,
    /// or (0-RTT) until its early data could go.
    pub handshake_ms_mean: f64,
    pub handshake_ms_max: f64,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub bytes_lost: u64,
    pub congestion_events: u64,
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// Streams the server reset, by HTTP/3 error code (`H3_REQUEST_REJECTED`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stream_resets: BTreeMap<String, u64>,
    /// Connections that closed other than by us: `by_server:<HTTP/3 code>`,
    /// `transport_error`, `idle_timeout`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub closed: BTreeMap<String, u64>,
    /// Time to first byte: from a request's stream opened and its head
    /// queued to its response head read (the server's think time and one
    /// round trip, without the generator's queueing), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_ms: Option<LatencySummary>,
    /// The same as an HdrHistogram (V2, DEFLATE, base64, µs), so shards
    /// merge exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_hdr: Option<String>,
}

impl QuicSummary {
    pub fn from_stats(q: &headroom_metrics::QuicStats) -> Option<QuicSummary> {
        if q.handshakes == 0 {
            return None;
        }
        let named = |counts: &[u64]| -> BTreeMap<String, u64> {
            counts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| (headroom_metrics::h3_code_name(i).to_string(), *n))
                .collect()
        };
        let mut closed: BTreeMap<String, u64> = named(&q.closed_by_server)
            .into_iter()
            .map(|(code, n)| (format!("by_server:{code}"), n))
            .collect();
        for (key, n) in [
            ("transport_error", q.closed_transport_error),
            ("idle_timeout", q.closed_idle_timeout),
        ] {
            if n > 0 {
                closed.insert(key.to_string(), n);
            }
        }
        Some(QuicSummary {
            handshakes: q.handshakes,
            handshakes_0rtt: q.handshakes_0rtt,
            zero_rtt_accepted: q.zero_rtt_accepted,
            zero_rtt_rejected: q.zero_rtt_rejected,
            handshake_ms_mean: q.handshake_us_sum as f64 / q.handshakes as f64 / 1000.0,
            handshake_ms_max: q.handshake_us_max as f64 / 1000.0,
            packets_sent: q.packets_sent,
            packets_lost: q.packets_lost,
            bytes_lost: q.bytes_lost,
            congestion_events: q.congestion_events,
            datagrams_sent: q.datagrams_sent,
            datagrams_received: q.datagrams_received,
            stream_resets: named(&q.stream_resets),
            closed,
            ttfb_ms: q.ttfb.as_deref().map(LatencySummary::from_histogram),
            ttfb_hdr: q.ttfb.as_deref().map(histogram::to_base64),
        })
    }

    /// Two shards' (or runs') figures as one.
    pub fn merge(a: Option<&QuicSummary>, b: Option<&QuicSummary>) -> Option<QuicSummary> {
        let (a, b) = match (a, b) {
            (None, None) => return None,
            (Some(x), None) | (None, Some(x)) => return Some(x.clone()),
            (Some(a), Some(b)) => (a, b),
        };
        let handshakes = a.handshakes + b.handshakes;
        let mut merged = QuicSummary {
            handshakes,
            handshakes_0rtt: a.handshakes_0rtt + b.handshakes_0rtt,
            zero_rtt_accepted: a.zero_rtt_accepted + b.zero_rtt_accepted,
            zero_rtt_rejected: a.zero_rtt_rejected + b.zero_rtt_rejected,
            handshake_ms_mean: (a.handshake_ms_mean * a.handshakes as f64
                + b.handshake_ms_mean * b.handshakes as f64)
                / handshakes.max(1) as f64,
            handshake_ms_max: a.handshake_ms_max.max(b.handshake_ms_max),
            packets_sent: a.packets_sent + b.packets_sent,
            packets_lost: a.packets_lost + b.packets_lost,
            bytes_lost: a.bytes_lost + b.bytes_lost,
            congestion_events: a.congestion_events + b.congestion_events,
            datagrams_sent: a.datagrams_sent + b.datagrams_sent,
            datagrams_received: a.datagrams_received + b.datagrams_received,
            stream_resets: a.stream_resets.clone(),
            closed: a.closed.clone(),
            ttfb_ms: None,
            ttfb_hdr: None,
        };
        let decoded = |s: &QuicSummary| {
            s.ttfb_hdr
                .as_deref()
                .and_then(|t| histogram::from_base64(t).ok())
        };
        let ttfb = match (decoded(a), decoded(b)) {
            (Some(mut x), Some(y)) => {
                histogram::add(&mut x, &y);
                Some(x)
            }
            (x, y) => x.or(y),
        };
        merged.ttfb_ms = ttfb.as_ref().map(LatencySummary::from_histogram);
        merged.ttfb_hdr = ttfb.as_ref().map(histogram::to_base64);
        for (k, n) in &b.stream_resets {
            *merged.stream_resets.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &b.closed {
            *merged.closed.entry(k.clone()).or_default() += n;
        }
        Some(merged)
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Connections {
    pub fn from_stats(stats: &Stats) -> Connections {
        Connections {
            opened: stats.connection_count(ConnectionEvent::Opened),
            reconnects_idle_closed: stats.connection_count(ConnectionEvent::ReconnectIdleClosed),
            retried_stale: stats.connection_count(ConnectionEvent::RetriedStale),
            closed_unrequested_bytes: stats.connection_count(ConnectionEvent::UnrequestedBytes),
            by_protocol: Self::by_protocol(stats),
            h2_refused: stats.connection_count(ConnectionEvent::RetriedH2Refused),
            h2_goaway_unprocessed: stats.connection_count(ConnectionEvent::RetriedH2Goaway),
            h3_refused: stats.connection_count(ConnectionEvent::RetriedH3Refused),
            h3_goaway_unprocessed: stats.connection_count(ConnectionEvent::RetriedH3Goaway),
            quic_0rtt_rejected: stats.connection_count(ConnectionEvent::RetriedZeroRttRejected),
            quic: QuicSummary::from_stats(&stats.quic),
        }
    }

    /// Connections opened so far by protocol (`http/1.1`, `h2`, `h3`).
    pub fn by_protocol(stats: &Stats) -> BTreeMap<String, u64> {
        let opened = stats.connection_count(ConnectionEvent::Opened);
        let h2 = stats.connection_count(ConnectionEvent::OpenedHttp2);
        let h3 = stats.connection_count(ConnectionEvent::OpenedHttp3);
        [("http/1.1", opened - h2 - h3), ("h2", h2), ("h3", h3)]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.to_string(), n))
            .collect()
    }
}

/// `limits_reached` in results.json (see [`LimitReached`]).
#[derive(
    Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
pub struct LimitsReached {
    pub body_capture: u64,
    pub cookie_jar: u64,
}

impl std::ops::AddAssign for LimitsReached {
    fn add_assign(&mut self, other: LimitsReached) {
        let LimitsReached {
            body_capture,
            cookie_jar,
        } = other;
        self.body_capture += body_capture;
        self.cookie_jar += cookie_jar;
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Meta {
    pub headroom_version: String,
    pub command: Vec<String>,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub machine: Machine,
    pub generator_threads: usize,
    /// How the users ran: `event_loop` (plain requests of a closed load,
    /// the fast path) or `tasks` (a task per user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_engine: Option<String>,
    /// Open-files limit of the generator (soft, hard).
    pub fd_limit: [u64; 2],
    /// `started_at` to the millisecond (Unix time), so shards' timelines
    /// can be laid on one axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_unix_ms: Option<u64>,
    /// A merged file: the shard files it was made from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardInput>,
    /// The HTTP version asked for: `1.1`, `2` or `auto` (what connections
    /// agreed on: `connections.by_protocol`).
    #[serde(default = "http_1_1")]
    pub http_version: String,
}

/// One input of a merge (`meta.shards`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ShardInput {
    pub file: String,
    /// `K/N`.
    pub shard: String,
    pub host: String,
    pub started_at: String,
    pub requests: u64,
    #[serde(default)]
    pub late_ms: f64,
}

/// The load as it was run, so results are a reproducible record.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RunConfig {
    pub url: String,
    /// "closed" or "open".
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_up_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    /// Open model: what arrives — `requests` (one from the mix each) or
    /// `users` (each runs a session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<String>,
    /// Open model: arrivals per second, when constant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// The load's stages in order: arrivals per second (open model) or
    /// user counts (closed model with stages), from → to over each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<LoadStage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_connections_per_host: Option<u32>,
    /// HTTP/2: most streams in flight per connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_streams: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_duration_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u64>,
    pub keep_alive: bool,
    pub connect_timeout_s: f64,
    pub request_timeout_s: f64,
    pub requests: Vec<RequestConfig>,
    /// The trace context sent (`--trace`, `[trace]`), when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceConfig>,
}

/// `config.trace`: how the run sent W3C trace context.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct TraceConfig {
    /// "request" (a fresh trace per request) or "iteration".
    pub per: String,
    /// `traceparent`'s sampled flag.
    pub sampled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// Where a trace ID leads: a URL with `{id}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

fn http_1_1() -> String {
    "1.1".into()
}

/// One stage of the load: `from` → `to` (equal for a hold) over
/// `duration_s`, in `unit` (`req/s`, `users/s` or `users`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct LoadStage {
    pub duration_s: f64,
    pub from: f64,
    pub to: f64,
    pub unit: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RequestConfig {
    pub name: String,
    pub method: String,
    pub target: String,
    pub weight: u32,
    /// Statuses that count as OK, e.g. "200" or "200-299,404".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<String>,
}

/// The figures of a set of requests: the JMeter aggregate row, the Gatling
/// distribution, statuses and errors.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Summary {
    pub requests: Requests,
    pub throughput_rps: f64,
    pub bytes_received: u64,
    /// Received KiB per second (JMeter's "Received KB/sec", 1 KB = 1024 B).
    pub received_kib_per_s: f64,
    /// All requests, OK and failed (as JMeter), from the intended send time.
    pub latency_ms: LatencySummary,
    pub latency_ms_ok: LatencySummary,
    pub distribution: Vec<Bucket>,
    pub status_codes: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Requests {
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    /// Of the failed: never reached the server (connect failures, refused
    /// header values, not sent, cut off by the stop before they left).
    /// `total - not_delivered` requests reached the server.
    pub not_delivered: u64,
    pub error_rate: f64,
    /// Request heads written on the wire, first sends and retries alike:
    /// what the server counts. `attempts = total - not_delivered +
    /// retried`, less a retried request whose first send never left.
    #[serde(default)]
    pub attempts: u64,
    /// Requests sent once more, by why (see `connections`).
    #[serde(default)]
    pub retried: Retried,
}

/// `requests.retried` in results.json: each reason a request was sent once
/// more, one field per [`ConnectionEvent`] that retries.
#[derive(
    Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema,
)]
pub struct Retried {
    /// A reused connection closed as the request went out.
    pub stale: u64,
    /// An HTTP/2 stream the server refused (REFUSED_STREAM).
    pub h2_refused: u64,
    /// An HTTP/2 stream a GOAWAY left unprocessed.
    pub h2_goaway_unprocessed: u64,
    /// An HTTP/3 stream the server rejected (H3_REQUEST_REJECTED).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub h3_refused: u64,
    /// An HTTP/3 request not sent before the server's GOAWAY.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub h3_goaway_unprocessed: u64,
    /// A request sent as 0-RTT early data that the server refused.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quic_0rtt_rejected: u64,
}

impl Retried {
    pub fn from_stats(stats: &Stats) -> Retried {
        let n = |event| stats.connection_count(event);
        Retried {
            stale: n(ConnectionEvent::RetriedStale),
            h2_refused: n(ConnectionEvent::RetriedH2Refused),
            h2_goaway_unprocessed: n(ConnectionEvent::RetriedH2Goaway),
            h3_refused: n(ConnectionEvent::RetriedH3Refused),
            h3_goaway_unprocessed: n(ConnectionEvent::RetriedH3Goaway),
            quic_0rtt_rejected: n(ConnectionEvent::RetriedZeroRttRejected),
        }
    }
}

impl std::ops::AddAssign for Retried {
    // Every field named: a new reason does not compile until it is added.
    fn add_assign(&mut self, other: Retried) {
        let Retried {
            stale,
            h2_refused,
            h2_goaway_unprocessed,
            h3_refused,
            h3_goaway_unprocessed,
            quic_0rtt_rejected,
        } = other;
        self.stale += stale;
        self.h2_refused += h2_refused;
        self.h2_goaway_unprocessed += h2_goaway_unprocessed;
        self.h3_refused += h3_refused;
        self.h3_goaway_unprocessed += h3_goaway_unprocessed;
        self.quic_0rtt_rejected += quic_0rtt_rejected;
    }
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct LatencySummary {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatencySummary {
    /// The figure kept for quantile `q`: one of 0.5, 0.75, 0.9, 0.95,
    /// 0.99 and 0.999 (`None` for any other).
    pub fn at_quantile(&self, q: f64) -> Option<f64> {
        let kept = [
            (0.5, self.p50),
            (0.75, self.p75),
            (0.9, self.p90),
            (0.95, self.p95),
            (0.99, self.p99),
            (0.999, self.p999),
        ];
        kept.iter()
            .find(|(at, _)| (at - q).abs() < 1e-9)
            .map(|(_, v)| *v)
    }

    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let q = |q: f64| histogram::ms(h.value_at_quantile(q));
        LatencySummary {
            count: h.len(),
            min: histogram::ms(h.min()),
            mean: h.mean() / 1000.0,
            stddev: h.stdev() / 1000.0,
            p50: q(0.5),
            p75: q(0.75),
            p90: q(0.9),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            max: histogram::ms(h.max()),
        }
    }
}

/// One bar of the response-time distribution (OK requests by latency, and
/// the failed ones), as in Gatling's report.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Bucket {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<u64>,
    pub count: u64,
    pub percent: f64,
}

/// HdrHistogram V2 + DEFLATE, base64, microseconds: merge these, not
/// percentiles.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Histograms {
    pub unit: String,
    pub latency: String,
    pub latency_ok: String,
    pub service_time: String,
    pub send_lag: String,
    /// Sharded runs (so a merge is exact per request and per second): each
    /// request's latency histograms, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_request: BTreeMap<String, RequestHistograms>,
    /// Sharded runs: each timeline second's latency histogram, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_second: Vec<String>,
}

/// One request's histograms (`histograms.per_request`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RequestHistograms {
    pub latency: String,
    pub latency_ok: String,
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

pub fn distribution(stats: &Stats, bounds_ms: &[u64]) -> Vec<Bucket> {
    let mut counts = vec![0u64; bounds_ms.len() + 1];
    for v in stats.latency_ok.iter_recorded() {
        let ms = v.value_iterated_to() as f64 / 1000.0;
        let slot = bounds_ms.partition_point(|&b| (b as f64) <= ms);
        counts[slot] += v.count_at_value();
    }
    let mut buckets = Vec::new();
    for (i, count) in counts.into_iter().enumerate() {
        let from = i.checked_sub(1).map(|j| bounds_ms[j]);
        let to = bounds_ms.get(i).copied();
        let label = match (from, to) {
            (None, Some(t)) => format!("t < {t} ms"),
            (Some(f), Some(t)) => format!("{f} ms ≤ t < {t} ms"),
            (Some(f), None) => format!("t ≥ {f} ms"),
            (None, None) => "all".to_string(),
        };
        buckets.push(Bucket {
            label,
            from_ms: from,
            to_ms: to,
            count,
            percent: percent(count, stats.requests),
        });
    }
    buckets.push(Bucket {
        label: "failed".into(),
        from_ms: None,
        to_ms: None,
        count: stats.failed,
        percent: percent(stats.failed, stats.requests),
    });
    buckets
}

/// Error classes for results: a failed check is named (`check: <request>:
/// <check>`) rather than lumped together, so the counts still add up to
/// `requests.failed`.
pub fn error_map(stats: &Stats, check_names: &[String]) -> BTreeMap<String, u64> {
    let mut map = BTreeMap::new();
    for (class, n) in stats.error_counts() {
        if class != ErrorClass::CheckFailed {
            map.insert(class.key().to_string(), n);
        }
    }
    let mut named = 0;
    for (id, &n) in stats.checks.iter().enumerate().filter(|(_, &n)| n > 0) {
        let name = check_names.get(id).map_or("unnamed", String::as_str);
        map.insert(format!("check: {name}"), n);
        named += n;
    }
    let unnamed = stats
        .error_count(ErrorClass::CheckFailed)
        .saturating_sub(named);
    if unnamed > 0 {
        map.insert(ErrorClass::CheckFailed.key().to_string(), unnamed);
    }
    map
}

impl Summary {
    pub fn new(
        stats: &Stats,
        duration: Duration,
        bounds_ms: &[u64],
        check_names: &[String],
    ) -> Summary {
        let secs = duration.as_secs_f64();
        let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let not_delivered = stats
            .error_counts()
            .filter(|(c, _)| c.never_reached_server())
            .map(|(_, n)| n)
            .sum();
        Summary {
            requests: Requests {
                total: stats.requests,
                ok: stats.ok,
                failed: stats.failed,
                not_delivered,
                error_rate: percent(stats.failed, stats.requests) / 100.0,
                attempts: stats.attempts,
                retried: Retried::from_stats(stats),
            },
            throughput_rps: per_s(stats.requests as f64),
            bytes_received: stats.bytes,
            received_kib_per_s: per_s(stats.bytes as f64 / 1024.0),
            latency_ms: LatencySummary::from_histogram(&stats.latency),
            latency_ms_ok: LatencySummary::from_histogram(&stats.latency_ok),
            distribution: distribution(stats, bounds_ms),
            status_codes: stats
                .status_counts()
                .map(|(code, n)| (code.to_string(), n))
                .collect(),
            errors: error_map(stats, check_names),
        }
    }
}

impl Results {
    /// What the client saw that bears on whether the generator kept up.
    pub fn client_facts(&self) -> ClientFacts {
        let errors = &self.summary.errors;
        // The whole-run send-lag histogram counts the late sends exactly.
        let lag = histogram::from_base64(&self.histograms.send_lag).ok();
        let late_us = (SEND_LAG_LATE_MS * 1000.0) as u64;
        let (late_sends, sends) = lag.map_or((0, 0), |h| {
            let sends = h.len();
            let on_time = h.count_between(0, late_us);
            (sends - on_time, sends)
        });
        ClientFacts {
            open: self.config.model == "open",
            target_rate_rps: self.target_rate_rps,
            achieved_rate_rps: self.achieved_rate_rps,
            send_lag_p99_ms: self.send_lag_ms.map(|l| l.p99),
            late_sends,
            sends,
            waited_for_connection: self.waited_for_connection.unwrap_or(0),
            not_sent: errors.get(ErrorClass::NotSent.key()).copied().unwrap_or(0),
            too_many_open_files: errors
                .get(ErrorClass::TooManyOpenFiles.key())
                .copied()
                .unwrap_or(0),
            bad_gateway: self.summary.status_codes.get("502").copied().unwrap_or(0),
            unavailable: self.summary.status_codes.get("503").copied().unwrap_or(0),
            first_5xx_s: self
                .timeline
                .iter()
                .find(|p| p.errors.contains_key(ErrorClass::Http5xx.key()))
                .map(|p| (p.t_s - 1) as f64),
            script_share: self.script_share(),
        }
    }

    /// The share of the worker threads' time the scripts took.
    fn script_share(&self) -> f64 {
        let busy_ms: f64 = self.scripts.values().map(|f| f.cpu_ms_total).sum();
        let available_ms = 1000.0 * self.duration_s * self.meta.generator_threads.max(1) as f64;
        if available_ms > 0.0 {
            busy_ms / available_ms
        } else {
            0.0
        }
    }

    pub fn attach_server(&mut self, report: ServerReport) {
        self.generator_bound = report.generator_bound;
        self.generator_bound_reasons = report.generator_bound_reasons.clone();
        self.server = Some(report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_buckets_follow_gatling() {
        let mut s = Stats::new();
        for ms in [10u64, 799, 800, 1199, 1200, 5000] {
            s.requests += 1;
            s.ok += 1;
            s.latency_ok.record(ms * 1000).unwrap();
        }
        s.requests += 1;
        s.failed += 1;
        let b = distribution(&s, &DEFAULT_BUCKETS_MS);
        let counts: Vec<u64> = b.iter().map(|b| b.count).collect();
        assert_eq!(counts, vec![2, 2, 2, 1]);
        assert_eq!(b[0].label, "t < 800 ms");
        assert_eq!(b[1].label, "800 ms ≤ t < 1200 ms");
        assert_eq!(b[2].label, "t ≥ 1200 ms");
        assert_eq!(b[3].label, "failed");
        let total: f64 = b.iter().map(|b| b.percent).sum();
        assert!((total - 100.0).abs() < 1e-9);
    }
}
