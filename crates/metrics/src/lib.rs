//! Metrics: what one request's outcome is, how a worker records it without
//! sharing anything, and how recordings merge exactly.
//!
//! - [`ErrorClass`]: every way a request can fail, counted in a fixed array
//!   (never formatted or boxed on the hot path).
//! - [`Stats`]: mergeable counters + HDR histograms (`AddAssign`), the unit
//!   of everything: a worker's second, the run's total, one request name.
//! - [`Recorder`]: per-worker; files each outcome into the one-second
//!   [`Interval`] its completion falls in.
//! - [`trace`]: every completion around planned events, for exact gaps.
//! - [`exemplars`]: the slowest traced requests, per second and per run.
//! - [`aggregate`]: merges the workers' intervals into the run's totals and
//!   per-second timeline.

pub mod aggregate;
pub mod exemplars;
pub mod histogram;
mod recorder;
pub mod scripts;
pub mod spill;
pub mod trace;
pub mod wire;

pub use recorder::{Interval, Outcome, Recorder, RequestCounts, WorkerReport};
pub use scripts::ScriptStats;

use hdrhistogram::Histogram;
use std::ops::AddAssign;

/// Why a request failed. The order is the display order; `key()` is the
/// stable name used in `results.json` (`errors` object).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The server's port refused the connection (nothing listening).
    ConnectRefused,
    /// No TCP handshake within the connect timeout.
    ConnectTimeout,
    /// The generator ran out of file descriptors (EMFILE/ENFILE).
    TooManyOpenFiles,
    /// Any other connect failure (no route, ports exhausted, ...).
    ConnectError,
    /// The TLS handshake failed (certificate not trusted, wrong name, ...).
    TlsHandshake,
    /// The URL's host name did not resolve (no `--connect-to`/`--resolve`
    /// override, and the system resolver found no address).
    ResolveFailed,
    /// A URL rendered from a template or a feeder is not a valid
    /// `http://` / `https://` URL.
    InvalidUrl,
    /// No complete response within the request timeout.
    RequestTimeout,
    /// The connection was reset (RST, broken pipe).
    ConnectionReset,
    /// The server closed the connection before sending any response byte.
    ClosedBeforeResponse,
    /// The server closed the connection in the middle of a response.
    ClosedMidResponse,
    /// Bytes that are not a valid HTTP/1.x response.
    MalformedResponse,
    /// A rendered request that is no valid HTTP request (a template or a
    /// feeder value put bytes in a name or value that no field may hold);
    /// HTTP/2 refuses to send it.
    MalformedRequest,
    /// A header value rendered from a template, a feeder or an extraction
    /// held a line break, a NUL or another control character: the request
    /// was not sent (it would have injected a header, ended the head early
    /// or been invalid).
    InvalidHeaderValue,
    /// The request's `before` script threw, or ran past its time or
    /// memory budget: the request was not sent. (An `after` script that
    /// fails fails the request's check of that name: the server had it.)
    ScriptError,
    /// HTTP/2: the server reset the stream with REFUSED_STREAM (it never
    /// reached the application), and it was not sent again.
    H2Refused,
    /// HTTP/2: the stream was above the last stream id of the server's
    /// GOAWAY (never processed), and it was not sent again.
    H2GoawayUnprocessed,
    /// HTTP/2: the server reset the stream (RST_STREAM other than
    /// REFUSED_STREAM).
    H2StreamReset,
    /// HTTP/2: a connection error — a GOAWAY with an error code, or frames
    /// that break the protocol (a broken frame, flow control, a header
    /// block past the limit).
    H2ProtocolError,
    /// HTTP/2 was asked for (`--http2`, `version = "2"`) over TLS, and the
    /// server did not agree to it in ALPN.
    H2NotNegotiated,
    /// HTTP/3: the server reset the stream with H3_REQUEST_REJECTED (it
    /// never reached the application), and it was not sent again.
    H3Refused,
    /// HTTP/3: the server's GOAWAY came before the stream was sent, and it
    /// was not sent again.
    H3GoawayUnprocessed,
    /// HTTP/3: the server reset the stream (RESET_STREAM or STOP_SENDING
    /// with a code other than H3_REQUEST_REJECTED).
    H3StreamReset,
    /// HTTP/3: the QUIC connection was closed under the stream — by the
    /// server (an application or transport error code), or for a protocol
    /// error.
    H3ConnectionError,
    /// HTTP/3 was asked for (`--http3`, `version = "3"`) and the server
    /// answered QUIC without agreeing to `h3` in ALPN.
    H3NotNegotiated,
    /// HTTP/3: no packet from the server within the QUIC idle timeout; the
    /// connection and its streams were given up.
    QuicIdleTimeout,
    /// HTTP/3 with 0-RTT: the server refused the early data a request went
    /// in (it never reached the application), and it was not sent again.
    QuicZeroRttRejected,
    /// A 4xx status that the scenario did not expect.
    /// WebSocket: the upgrade was not accepted (no `101` with the right
    /// `Sec-WebSocket-Accept`); its status is counted.
    WsUpgradeRefused,
    /// Server-sent events: the answer was not a 2xx `text/event-stream`.
    SseRefused,
    /// A WebSocket frame broke RFC 6455 (masked by the server, reserved
    /// bits or opcodes, invalid UTF-8, bad fragmentation).
    WsProtocolError,
    /// A WebSocket message or frame larger than the limit.
    WsMessageTooBig,
    /// No message matching the step's `expect` came within its `within`.
    MessageTimeout,
    /// The server closed the socket (or the stream ended) while a message
    /// was awaited.
    SocketClosed,
    /// No pong to a ping (`ping_every` on a `hold`) before the next was due.
    PingTimeout,
    /// gRPC status 1: the call was cancelled (CANCELLED).
    GrpcCancelled,
    /// gRPC status 2: UNKNOWN: the server's handler failed.
    GrpcUnknown,
    /// gRPC status 3: INVALID_ARGUMENT: the server refused the message.
    GrpcInvalidArgument,
    /// gRPC status 4: DEADLINE_EXCEEDED: the call's deadline (grpc-timeout) passed.
    GrpcDeadlineExceeded,
    /// gRPC status 5: NOT_FOUND.
    GrpcNotFound,
    /// gRPC status 6: ALREADY_EXISTS.
    GrpcAlreadyExists,
    /// gRPC status 7: PERMISSION_DENIED.
    GrpcPermissionDenied,
    /// gRPC status 8: RESOURCE_EXHAUSTED: a quota or the server's capacity ran out.
    GrpcResourceExhausted,
    /// gRPC status 9: FAILED_PRECONDITION.
    GrpcFailedPrecondition,
    /// gRPC status 10: ABORTED.
    GrpcAborted,
    /// gRPC status 11: OUT_OF_RANGE.
    GrpcOutOfRange,
    /// gRPC status 12: UNIMPLEMENTED: the server has no such method.
    GrpcUnimplemented,
    /// gRPC status 13: INTERNAL: the server's error.
    GrpcInternal,
    /// gRPC status 14: UNAVAILABLE: the service could not take the call.
    GrpcUnavailable,
    /// gRPC status 15: DATA_LOSS.
    GrpcDataLoss,
    /// gRPC status 16: UNAUTHENTICATED.
    GrpcUnauthenticated,
    /// gRPC: an HTTP 200 answer without a `grpc-status`, a status past
    /// 16, or messages that are not the method's.
    GrpcMalformed,
    Http4xx,
    /// A 5xx status that the scenario did not expect.
    Http5xx,
    /// Any other status the scenario did not expect (e.g. 200 when 404 was).
    UnexpectedStatus,
    /// A scenario check (body, JSON path, header, response time) or an
    /// extraction failed; `Stats::checks` says which.
    CheckFailed,
    /// In flight when the run's hard stop came (end of the graceful stop, or
    /// an interrupt): sent, but cut off before its response.
    Aborted,
    /// Never sent before the run's hard stop: due in an open-model run while
    /// every allowed connection was busy, or still connecting (a TLS
    /// handshake that never finished) when the stop came. Counted so a
    /// stall is never hidden.
    NotSent,
}

impl ErrorClass {
    pub const COUNT: usize = 57;
    pub const ALL: [ErrorClass; Self::COUNT] = [
        Self::ConnectRefused,
        Self::ConnectTimeout,
        Self::TooManyOpenFiles,
        Self::ConnectError,
        Self::TlsHandshake,
        Self::ResolveFailed,
        Self::InvalidUrl,
        Self::RequestTimeout,
        Self::ConnectionReset,
        Self::ClosedBeforeResponse,
        Self::ClosedMidResponse,
        Self::MalformedResponse,
        Self::MalformedRequest,
        Self::InvalidHeaderValue,
        Self::ScriptError,
        Self::H2Refused,
        Self::H2GoawayUnprocessed,
        Self::H2StreamReset,
        Self::H2ProtocolError,
        Self::H2NotNegotiated,
        Self::H3Refused,
        Self::H3GoawayUnprocessed,
        Self::H3StreamReset,
        Self::H3ConnectionError,
        Self::H3NotNegotiated,
        Self::QuicIdleTimeout,
        Self::QuicZeroRttRejected,
        Self::WsUpgradeRefused,
        Self::SseRefused,
        Self::WsProtocolError,
        Self::WsMessageTooBig,
        Self::MessageTimeout,
        Self::SocketClosed,
        Self::PingTimeout,
        Self::GrpcCancelled,
        Self::GrpcUnknown,
        Self::GrpcInvalidArgument,
        Self::GrpcDeadlineExceeded,
        Self::GrpcNotFound,
        Self::GrpcAlreadyExists,
        Self::GrpcPermissionDenied,
        Self::GrpcResourceExhausted,
        Self::GrpcFailedPrecondition,
        Self::GrpcAborted,
        Self::GrpcOutOfRange,
        Self::GrpcUnimplemented,
        Self::GrpcInternal,
        Self::GrpcUnavailable,
        Self::GrpcDataLoss,
        Self::GrpcUnauthenticated,
        Self::GrpcMalformed,
        Self::Http4xx,
        Self::Http5xx,
        Self::UnexpectedStatus,
        Self::CheckFailed,
        Self::Aborted,
        Self::NotSent,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// The class of a gRPC status: `None` for OK (0), each other code its
    /// own class, a code past 16 `grpc_malformed`.
    pub fn of_grpc_status(code: u32) -> Option<ErrorClass> {
        const BY_CODE: [ErrorClass; 16] = [
            ErrorClass::GrpcCancelled,
            ErrorClass::GrpcUnknown,
            ErrorClass::GrpcInvalidArgument,
            ErrorClass::GrpcDeadlineExceeded,
            ErrorClass::GrpcNotFound,
            ErrorClass::GrpcAlreadyExists,
            ErrorClass::GrpcPermissionDenied,
            ErrorClass::GrpcResourceExhausted,
            ErrorClass::GrpcFailedPrecondition,
            ErrorClass::GrpcAborted,
            ErrorClass::GrpcOutOfRange,
            ErrorClass::GrpcUnimplemented,
            ErrorClass::GrpcInternal,
            ErrorClass::GrpcUnavailable,
            ErrorClass::GrpcDataLoss,
            ErrorClass::GrpcUnauthenticated,
        ];
        match code {
            0 => None,
            1..=16 => Some(BY_CODE[code as usize - 1]),
            _ => Some(ErrorClass::GrpcMalformed),
        }
    }

    /// Stable key in results files.
    pub fn key(self) -> &'static str {
        match self {
            Self::ConnectRefused => "connect_refused",
            Self::ConnectTimeout => "connect_timeout",
            Self::TooManyOpenFiles => "too_many_open_files",
            Self::ConnectError => "connect_error",
            Self::TlsHandshake => "tls_handshake",
            Self::ResolveFailed => "resolve_failed",
            Self::InvalidUrl => "invalid_url",
            Self::RequestTimeout => "request_timeout",
            Self::ConnectionReset => "connection_reset",
            Self::ClosedBeforeResponse => "closed_before_response",
            Self::ClosedMidResponse => "closed_mid_response",
            Self::MalformedResponse => "malformed_response",
            Self::MalformedRequest => "malformed_request",
            Self::InvalidHeaderValue => "invalid_header_value",
            Self::ScriptError => "script_error",
            Self::H2Refused => "h2_refused",
            Self::H2GoawayUnprocessed => "h2_goaway_unprocessed",
            Self::H2StreamReset => "h2_stream_reset",
            Self::H2ProtocolError => "h2_protocol_error",
            Self::H2NotNegotiated => "h2_not_negotiated",
            Self::H3Refused => "h3_refused",
            Self::H3GoawayUnprocessed => "h3_goaway_unprocessed",
            Self::H3StreamReset => "h3_stream_reset",
            Self::H3ConnectionError => "h3_connection_error",
            Self::H3NotNegotiated => "h3_not_negotiated",
            Self::QuicIdleTimeout => "quic_idle_timeout",
            Self::QuicZeroRttRejected => "quic_0rtt_rejected",
            Self::WsUpgradeRefused => "ws_upgrade_refused",
            Self::SseRefused => "sse_refused",
            Self::WsProtocolError => "ws_protocol_error",
            Self::WsMessageTooBig => "ws_message_too_big",
            Self::MessageTimeout => "message_timeout",
            Self::SocketClosed => "socket_closed",
            Self::PingTimeout => "ping_timeout",
            Self::GrpcCancelled => "grpc_cancelled",
            Self::GrpcUnknown => "grpc_unknown",
            Self::GrpcInvalidArgument => "grpc_invalid_argument",
            Self::GrpcDeadlineExceeded => "grpc_deadline_exceeded",
            Self::GrpcNotFound => "grpc_not_found",
            Self::GrpcAlreadyExists => "grpc_already_exists",
            Self::GrpcPermissionDenied => "grpc_permission_denied",
            Self::GrpcResourceExhausted => "grpc_resource_exhausted",
            Self::GrpcFailedPrecondition => "grpc_failed_precondition",
            Self::GrpcAborted => "grpc_aborted",
            Self::GrpcOutOfRange => "grpc_out_of_range",
            Self::GrpcUnimplemented => "grpc_unimplemented",
            Self::GrpcInternal => "grpc_internal",
            Self::GrpcUnavailable => "grpc_unavailable",
            Self::GrpcDataLoss => "grpc_data_loss",
            Self::GrpcUnauthenticated => "grpc_unauthenticated",
            Self::GrpcMalformed => "grpc_malformed",
            Self::Http4xx => "http_4xx",
            Self::Http5xx => "http_5xx",
            Self::UnexpectedStatus => "unexpected_status",
            Self::CheckFailed => "check_failed",
            Self::Aborted => "aborted",
            Self::NotSent => "not_sent",
        }
    }

    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.key() == key)
    }

    /// One line a person reads in the summary.
    pub fn describe(self) -> &'static str {
        match self {
            Self::ConnectRefused => "connection refused: nothing listening on the port",
            Self::ConnectTimeout => "no TCP handshake within the connect timeout",
            Self::TooManyOpenFiles => {
                "the generator ran out of file descriptors (raise `ulimit -n`)"
            }
            Self::ConnectError => "could not connect",
            Self::TlsHandshake => "TLS handshake failed (certificate not trusted or wrong name?)",
            Self::ResolveFailed => "host name did not resolve (try --connect-to or --resolve)",
            Self::InvalidUrl => "a rendered URL is not a valid http:// or https:// URL",
            Self::RequestTimeout => "no complete response within the request timeout",
            Self::ConnectionReset => "connection reset by the server",
            Self::ClosedBeforeResponse => "server closed the connection before responding",
            Self::ClosedMidResponse => "server closed the connection mid-response",
            Self::MalformedResponse => "response is not valid HTTP/1.x",
            Self::MalformedRequest => {
                "a rendered request is not valid HTTP (bytes no field may hold)"
            }
            Self::InvalidHeaderValue => {
                "a rendered header value held a line break or control character: not sent"
            }
            Self::ScriptError => "the request's before script failed: not sent (see scripts)",
            Self::H2Refused => "HTTP/2 stream refused by the server (REFUSED_STREAM), not retried",
            Self::H2GoawayUnprocessed => {
                "HTTP/2 stream left unprocessed by the server's GOAWAY, not retried"
            }
            Self::H2StreamReset => "HTTP/2 stream reset by the server (RST_STREAM)",
            Self::H2ProtocolError => {
                "HTTP/2 connection error (GOAWAY with an error, broken frames, limits)"
            }
            Self::H2NotNegotiated => "the server did not agree to HTTP/2 in TLS (ALPN)",
            Self::H3Refused => {
                "HTTP/3 stream rejected by the server (H3_REQUEST_REJECTED), not retried"
            }
            Self::H3GoawayUnprocessed => {
                "HTTP/3 stream not sent: the server's GOAWAY came first, not retried"
            }
            Self::H3StreamReset => "HTTP/3 stream reset by the server",
            Self::H3ConnectionError => {
                "HTTP/3 connection closed under the stream (by the server, or a protocol error)"
            }
            Self::H3NotNegotiated => {
                "the server answered QUIC but did not agree to HTTP/3 (ALPN h3)"
            }
            Self::QuicIdleTimeout => {
                "QUIC connection idle past its timeout: the server stopped answering"
            }
            Self::QuicZeroRttRejected => {
                "sent as 0-RTT early data, which the server refused; not retried"
            }
            Self::WsUpgradeRefused => {
                "the server did not switch to WebSocket (no 101 with a valid Sec-WebSocket-Accept)"
            }
            Self::SseRefused => "the server did not answer with a text/event-stream (2xx)",
            Self::WsProtocolError => {
                "a WebSocket frame broke the protocol (masked by the server, bad opcode or UTF-8, bad fragments)"
            }
            Self::WsMessageTooBig => "a WebSocket message or frame larger than the limit",
            Self::MessageTimeout => "no matching message within the step's `within`",
            Self::SocketClosed => "the server closed the socket while a message was awaited",
            Self::PingTimeout => "no pong to a WebSocket ping before the next was due",
            Self::GrpcCancelled => "gRPC the call was cancelled (CANCELLED)",
            Self::GrpcUnknown => "gRPC UNKNOWN: the server's handler failed",
            Self::GrpcInvalidArgument => "gRPC INVALID_ARGUMENT: the server refused the message",
            Self::GrpcDeadlineExceeded => "gRPC DEADLINE_EXCEEDED: the call's deadline (grpc-timeout) passed",
            Self::GrpcNotFound => "gRPC NOT_FOUND",
            Self::GrpcAlreadyExists => "gRPC ALREADY_EXISTS",
            Self::GrpcPermissionDenied => "gRPC PERMISSION_DENIED",
            Self::GrpcResourceExhausted => "gRPC RESOURCE_EXHAUSTED: a quota or the server's capacity ran out",
            Self::GrpcFailedPrecondition => "gRPC FAILED_PRECONDITION",
            Self::GrpcAborted => "gRPC ABORTED",
            Self::GrpcOutOfRange => "gRPC OUT_OF_RANGE",
            Self::GrpcUnimplemented => "gRPC UNIMPLEMENTED: the server has no such method",
            Self::GrpcInternal => "gRPC INTERNAL: the server's error",
            Self::GrpcUnavailable => "gRPC UNAVAILABLE: the service could not take the call",
            Self::GrpcDataLoss => "gRPC DATA_LOSS",
            Self::GrpcUnauthenticated => "gRPC UNAUTHENTICATED",
            Self::GrpcMalformed => {
                "gRPC: an answer without grpc-status, or messages not of the method's type"
            }
            Self::Http4xx => "client error status (4xx) not expected",
            Self::Http5xx => "server error status (5xx) not expected",
            Self::UnexpectedStatus => "status not in the expected set",
            Self::CheckFailed => "a check or extraction failed",
            Self::Aborted => "cut off in flight when the run stopped",
            Self::NotSent => "never sent before the stop: connections busy, or still connecting",
        }
    }

    /// The request never reached the server: it could not connect, or was
    /// never sent. Client total minus these is what the server received.
    pub fn never_reached_server(self) -> bool {
        matches!(
            self,
            Self::ConnectRefused
                | Self::ConnectTimeout
                | Self::TooManyOpenFiles
                | Self::ConnectError
                | Self::TlsHandshake
                | Self::ResolveFailed
                | Self::InvalidUrl
                | Self::MalformedRequest
                | Self::InvalidHeaderValue
                | Self::ScriptError
                | Self::H2Refused
                | Self::H2GoawayUnprocessed
                | Self::H2NotNegotiated
                | Self::H3Refused
                | Self::H3GoawayUnprocessed
                | Self::H3NotNegotiated
                | Self::QuicZeroRttRejected
                | Self::NotSent
        )
    }
}

/// Highest status code we count individually; anything above is malformed.
pub const MAX_STATUS: usize = 999;

/// Counters and histograms for a set of requests. Merging two `Stats` with
/// `+=` is exact: counts add, histograms add bucket by bucket.
#[derive(Clone, Debug)]
pub struct Stats {
    pub requests: u64,
    /// Request heads written on the wire, first sends and retries: what a
    /// server counts.
    pub attempts: u64,
    pub ok: u64,
    pub failed: u64,
    /// Response bytes read from the socket (head + body), like wrk's transfer.
    pub bytes: u64,
    /// Latency of every request, OK or failed, from its intended send time.
    pub latency: Histogram<u64>,
    /// Latency of OK requests only.
    pub latency_ok: Histogram<u64>,
    /// Time from the actual send to completion (what coordinated-omission-
    /// prone tools report). Equal to `latency` in a closed model.
    pub service_time: Histogram<u64>,
    /// How late each request was sent after its intended time (open model).
    pub send_lag: Histogram<u64>,
    /// Count per status code, index = code (0..=999).
    pub status: Vec<u64>,
    pub errors: [u64; ErrorClass::COUNT],
    /// Failures per scenario check (index = check id); their sum is
    /// `errors[CheckFailed]`. Grows on first use.
    pub checks: Vec<u64>,
    /// What happened to kept-alive connections (see [`ConnectionEvent`]).
    pub connection_events: [u64; ConnectionEvent::COUNT],
    /// How often a per-user memory bound was reached (see [`LimitReached`]).
    pub limits_reached: [u64; LimitReached::COUNT],
    /// HTTP/3: what QUIC counted on the connections (added as each closes).
    pub quic: QuicStats,
    /// WebSocket and server-sent-event streams (see [`SocketStats`]).
    pub sockets: SocketStats,
    /// The scenario's scripts, per function (see [`ScriptStats`]).
    pub scripts: ScriptStats,
}

/// What a run's WebSockets and server-sent-event streams carried, counted
/// as it happened: sockets opened, messages and bytes each way, and how
/// sockets closed. Added up exactly, as every other count.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SocketStats {
    /// WebSockets upgraded (101 with a valid accept key).
    pub opened_ws: u64,
    /// Event streams opened (a 2xx text/event-stream), reconnects included.
    pub opened_sse: u64,
    /// Event streams opened again after the server ended one (with
    /// `Last-Event-ID`).
    pub sse_reconnects: u64,
    /// gRPC streaming calls opened (server, client or bidirectional).
    pub opened_grpc: u64,
    /// Data frames (text and binary) sent; their payload bytes.
    pub messages_sent: u64,
    pub bytes_sent: u64,
    /// Data messages (WebSocket) or events (SSE) received; their payload bytes.
    pub messages_received: u64,
    pub bytes_received: u64,
    /// Received messages no `expect` took: pushed by the server unasked,
    /// or passed over while a step waited for another.
    pub unmatched: u64,
    /// Pings from the server (each answered with a pong).
    pub pings_received: u64,
    /// Sockets closed, by who and how: `client:<code>`, `server:<code>`,
    /// `server:no_close_frame` (the TCP connection ended without one),
    /// `error:<class>` (given up on an error), `stopped` (the run ended).
    pub closes: std::collections::BTreeMap<String, u64>,
}

impl SocketStats {
    pub fn is_empty(&self) -> bool {
        *self == SocketStats::default()
    }

    pub fn close(&mut self, how: impl Into<String>) {
        *self.closes.entry(how.into()).or_default() += 1;
    }
}

impl AddAssign<&SocketStats> for SocketStats {
    fn add_assign(&mut self, o: &SocketStats) {
        let SocketStats {
            opened_ws,
            opened_sse,
            sse_reconnects,
            opened_grpc,
            messages_sent,
            bytes_sent,
            messages_received,
            bytes_received,
            unmatched,
            pings_received,
            closes,
        } = o;
        self.opened_ws += opened_ws;
        self.opened_sse += opened_sse;
        self.sse_reconnects += sse_reconnects;
        self.opened_grpc += opened_grpc;
        self.messages_sent += messages_sent;
        self.bytes_sent += bytes_sent;
        self.messages_received += messages_received;
        self.bytes_received += bytes_received;
        self.unmatched += unmatched;
        self.pings_received += pings_received;
        for (k, n) in closes {
            *self.closes.entry(k.clone()).or_default() += n;
        }
    }
}

/// What QUIC counted on a run's HTTP/3 connections: handshakes, packets
/// (as quinn counts them), stream resets by HTTP/3 error code, and how the
/// connections closed. Added up exactly, as every other count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuicStats {
    /// QUIC connections opened (1-RTT, or resumed with 0-RTT).
    pub handshakes: u64,
    /// Of those, resumed with 0-RTT (`--0rtt`), and how the server took
    /// the early data.
    pub handshakes_0rtt: u64,
    pub zero_rtt_accepted: u64,
    pub zero_rtt_rejected: u64,
    pub handshake_us_sum: u64,
    pub handshake_us_max: u64,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub bytes_lost: u64,
    pub congestion_events: u64,
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// Stream resets from the server by HTTP/3 error code (index: code −
    /// 0x100, H3_NO_ERROR … H3_VERSION_FALLBACK; the last: any other code).
    pub stream_resets: [u64; H3_CODES + 1],
    /// Connections the server closed with an HTTP/3 application error code
    /// (indexed as `stream_resets`).
    pub closed_by_server: [u64; H3_CODES + 1],
    /// Connections closed by a QUIC transport error (either side).
    pub closed_transport_error: u64,
    /// Connections given up idle: no packet from the server in time.
    pub closed_idle_timeout: u64,
    /// Time to first byte: from a request's stream opened and its head
    /// queued to the response head read, µs (none until a response came).
    pub ttfb: Option<Box<Histogram<u64>>>,
}

/// HTTP/3's own error codes (RFC 9114 §8.1): 0x100 to 0x110.
pub const H3_CODES: usize = 17;

/// RFC 9114 §8.1's name of an HTTP/3 error code index (code − 0x100).
pub fn h3_code_name(index: usize) -> &'static str {
    const NAMES: [&str; H3_CODES] = [
        "H3_NO_ERROR",
        "H3_GENERAL_PROTOCOL_ERROR",
        "H3_INTERNAL_ERROR",
        "H3_STREAM_CREATION_ERROR",
        "H3_CLOSED_CRITICAL_STREAM",
        "H3_FRAME_UNEXPECTED",
        "H3_FRAME_ERROR",
        "H3_EXCESSIVE_LOAD",
        "H3_ID_ERROR",
        "H3_SETTINGS_ERROR",
        "H3_MISSING_SETTINGS",
        "H3_REQUEST_REJECTED",
        "H3_REQUEST_CANCELLED",
        "H3_REQUEST_INCOMPLETE",
        "H3_MESSAGE_ERROR",
        "H3_CONNECT_ERROR",
        "H3_VERSION_FALLBACK",
    ];
    NAMES.get(index).copied().unwrap_or("other")
}

/// The index of HTTP/3 error `code` in [`QuicStats::stream_resets`].
pub fn h3_code_index(code: u64) -> usize {
    match code.checked_sub(0x100) {
        Some(i) if (i as usize) < H3_CODES => i as usize,
        _ => H3_CODES,
    }
}

impl AddAssign<&QuicStats> for QuicStats {
    fn add_assign(&mut self, o: &QuicStats) {
        let QuicStats {
            handshakes,
            handshakes_0rtt,
            zero_rtt_accepted,
            zero_rtt_rejected,
            handshake_us_sum,
            handshake_us_max,
            packets_sent,
            packets_lost,
            bytes_lost,
            congestion_events,
            datagrams_sent,
            datagrams_received,
            stream_resets,
            closed_by_server,
            closed_transport_error,
            closed_idle_timeout,
            ttfb,
        } = o;
        self.handshakes += handshakes;
        self.handshakes_0rtt += handshakes_0rtt;
        self.zero_rtt_accepted += zero_rtt_accepted;
        self.zero_rtt_rejected += zero_rtt_rejected;
        self.handshake_us_sum += handshake_us_sum;
        self.handshake_us_max = self.handshake_us_max.max(*handshake_us_max);
        self.packets_sent += packets_sent;
        self.packets_lost += packets_lost;
        self.bytes_lost += bytes_lost;
        self.congestion_events += congestion_events;
        self.datagrams_sent += datagrams_sent;
        self.datagrams_received += datagrams_received;
        add_counts(&mut self.stream_resets, stream_resets);
        add_counts(&mut self.closed_by_server, closed_by_server);
        self.closed_transport_error += closed_transport_error;
        self.closed_idle_timeout += closed_idle_timeout;
        match (&mut self.ttfb, ttfb) {
            (Some(into), Some(other)) => histogram::add(into, other),
            (into @ None, Some(other)) => *into = Some(other.clone()),
            _ => {}
        }
    }
}

/// A per-user memory bound the generator reached (see `plan::limits` and
/// `headroom_http::MAX_CAPTURED_BODY`). Counted, and warned about, so a
/// bound never changes figures silently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitReached {
    /// A body kept for checks reached the capture limit: checks saw its start.
    BodyCapture,
    /// A cookie was not stored: the user's jar was full.
    CookieJar,
}

impl LimitReached {
    pub const COUNT: usize = 2;
}

/// Things that happen to a connection rather than to a request. Counted
/// when they happen (not when the request finishes), so a request cut off
/// by the stop keeps its connection's story.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// A TCP (and TLS) connection was opened.
    Opened,
    /// A kept-alive connection was found closed by the server while idle
    /// (its keep-alive timeout was shorter than the pause) and replaced
    /// before the request was sent.
    ReconnectIdleClosed,
    /// A request on a reused connection got EOF/RST before any response
    /// byte and was sent once more on a new connection (RFC 9112 §9.3.1).
    RetriedStale,
    /// The server sent bytes while no request was outstanding; the
    /// connection was closed.
    UnrequestedBytes,
    /// A connection opened (counted in `Opened` too) agreed on HTTP/2.
    OpenedHttp2,
    /// An HTTP/2 stream was refused (REFUSED_STREAM) and its request sent
    /// once more on another connection.
    RetriedH2Refused,
    /// An HTTP/2 stream above a GOAWAY's last stream id was sent once more
    /// on another connection.
    RetriedH2Goaway,
    /// A connection opened (counted in `Opened` too) was HTTP/3 over QUIC.
    OpenedHttp3,
    /// An HTTP/3 stream was rejected (H3_REQUEST_REJECTED) and its request
    /// sent once more on another connection.
    RetriedH3Refused,
    /// An HTTP/3 request not sent before the server's GOAWAY was sent once
    /// more on another connection.
    RetriedH3Goaway,
    /// A request sent as 0-RTT early data that the server refused was sent
    /// once more on another connection.
    RetriedZeroRttRejected,
}

impl ConnectionEvent {
    pub const COUNT: usize = 11;
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    pub fn new() -> Self {
        Stats {
            requests: 0,
            attempts: 0,
            ok: 0,
            failed: 0,
            bytes: 0,
            latency: histogram::new(),
            latency_ok: histogram::new(),
            service_time: histogram::new(),
            send_lag: histogram::new(),
            status: vec![0; MAX_STATUS + 1],
            errors: [0; ErrorClass::COUNT],
            checks: Vec::new(),
            connection_events: [0; ConnectionEvent::COUNT],
            limits_reached: [0; LimitReached::COUNT],
            quic: QuicStats::default(),
            sockets: SocketStats::default(),
            scripts: ScriptStats::default(),
        }
    }

    pub fn error_count(&self, class: ErrorClass) -> u64 {
        self.errors[class.index()]
    }

    pub fn limit_count(&self, limit: LimitReached) -> u64 {
        self.limits_reached[limit as usize]
    }

    /// TCP (and TLS) connections the generator opened successfully.
    pub fn connections_opened(&self) -> u64 {
        self.connection_count(ConnectionEvent::Opened)
    }

    pub fn connection_count(&self, event: ConnectionEvent) -> u64 {
        self.connection_events[event as usize]
    }

    /// (code, count) for every status seen, ascending.
    pub fn status_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (code as u16, n))
    }

    /// (class, count) for every error class seen, in display order.
    pub fn error_counts(&self) -> impl Iterator<Item = (ErrorClass, u64)> + '_ {
        ErrorClass::ALL
            .into_iter()
            .map(|c| (c, self.errors[c.index()]))
            .filter(|(_, n)| *n > 0)
    }
}

impl AddAssign<&Stats> for Stats {
    /// Every field named: a counted figure added to `Stats` does not
    /// compile until it says how workers' (and shards') counts add up.
    fn add_assign(&mut self, other: &Stats) {
        let Stats {
            requests,
            attempts,
            ok,
            failed,
            bytes,
            latency,
            latency_ok,
            service_time,
            send_lag,
            status,
            errors,
            checks,
            connection_events,
            limits_reached,
            quic,
            sockets,
            scripts,
        } = other;
        self.requests += requests;
        self.attempts += attempts;
        self.ok += ok;
        self.failed += failed;
        self.bytes += bytes;
        histogram::add(&mut self.latency, latency);
        histogram::add(&mut self.latency_ok, latency_ok);
        histogram::add(&mut self.service_time, service_time);
        histogram::add(&mut self.send_lag, send_lag);
        add_counts(&mut self.status, status);
        add_counts(&mut self.errors, errors);
        if self.checks.len() < checks.len() {
            self.checks.resize(checks.len(), 0);
        }
        add_counts(&mut self.checks, checks);
        add_counts(&mut self.connection_events, connection_events);
        add_counts(&mut self.limits_reached, limits_reached);
        self.quic += quic;
        self.sockets += sockets;
        self.scripts += scripts;
    }
}

/// Counts indexed alike (by status, class, event, …) added one by one.
fn add_counts(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_keys_round_trip_and_are_unique() {
        let mut keys: Vec<_> = ErrorClass::ALL.iter().map(|c| c.key()).collect();
        for c in ErrorClass::ALL {
            assert_eq!(ErrorClass::from_key(c.key()), Some(c));
            assert_eq!(ErrorClass::ALL[c.index()], c);
        }
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), ErrorClass::COUNT);
    }

    #[test]
    fn merge_adds_counts_and_histograms() {
        let mut a = Stats::new();
        a.requests = 2;
        a.ok = 1;
        a.failed = 1;
        a.status[200] = 1;
        a.errors[ErrorClass::Http5xx.index()] = 1;
        a.latency.record(1000).unwrap();
        a.latency.record(3000).unwrap();
        let mut b = Stats::new();
        b.requests = 1;
        b.ok = 1;
        b.status[200] = 1;
        b.latency.record(2_000_000).unwrap();
        a += &b;
        assert_eq!((a.requests, a.ok, a.failed), (3, 2, 1));
        assert_eq!(a.status[200], 2);
        assert_eq!(a.latency.len(), 3);
        assert!(a.latency.max() >= 2_000_000);
    }
}
