//! The rules of one HTTP/1.1 exchange, written once. Both ways headroom
//! runs HTTP/1.1 ask them — the task path's [`Connection::exchange`]
//! (crate::Connection) and the event loop's slots (`engine/src/event_loop`)
//! — and neither holds a rule of its own: what a server closing early
//! counts as, when a head counts as an attempt, when a request goes once
//! more, what a request cut off by the stop or its timeout counts as.
//! Pure functions and small values: tested here without sockets.
//!
//! A new rule of an exchange goes here, and both paths call it.

use crate::Failure;
use headroom_metrics::{ConnectionEvent, ErrorClass};
use std::cell::Cell;
use std::io;

/// Whether a request that met a connection the server had already closed
/// (EOF or RST before any response byte, on a reused keep-alive
/// connection) is sent once more on a new connection. RFC 9112 §9.3.1
/// allows it for idempotent methods, as browsers and HTTP clients do.
/// `--stale-connection-retry`, `[http] stale_connection_retry`.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum StaleRetry {
    /// GET, HEAD, PUT, DELETE, OPTIONS, TRACE.
    #[default]
    Idempotent,
    /// Every method (the server never saw the request, but a non-idempotent
    /// one might have been half-processed by a server that closed mid-way).
    All,
    /// Never: the request fails as `closed_before_response` /
    /// `connection_reset`.
    Never,
}

impl StaleRetry {
    /// Every choice: the one list the flag, the file and the schema use.
    pub const ALL: [StaleRetry; 3] = [Self::Idempotent, Self::All, Self::Never];

    /// Their names as written (`--stale-connection-retry`'s values).
    pub const NAMES: [&'static str; 3] = {
        let mut names = [""; 3];
        let mut i = 0;
        while i < names.len() {
            names[i] = Self::ALL[i].as_str();
            i += 1;
        }
        names
    };

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Idempotent => "idempotent",
            Self::All => "all",
            Self::Never => "never",
        }
    }

    pub fn parse(text: &str) -> Option<StaleRetry> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }

    pub fn allows(self, method: &str) -> bool {
        match self {
            Self::Idempotent => crate::is_idempotent(method),
            Self::All => true,
            Self::Never => false,
        }
    }
}

/// The server closed the connection before a whole response: before any
/// byte of one, or in the middle (`answered`: a byte of it had come back).
pub fn closed_early(answered: bool) -> Failure {
    if !answered {
        Failure::ClosedBeforeResponse
    } else {
        Failure::ClosedMidResponse
    }
}

/// A read failed with `kind` before any byte of answer: a reset then
/// means the server's kernel discarded the request unread — it resets a
/// connection closed with data unread (RFC 2525 §2.17) — so the head never
/// reached the server and is not an attempt.
pub fn head_discarded(kind: io::ErrorKind, answered: bool) -> bool {
    kind == io::ErrorKind::ConnectionReset && !answered
}

/// Where an HTTP/1.1 request's head ends: after its blank line (the whole
/// request when there is none).
pub fn head_end(request: &[u8]) -> usize {
    memchr::memmem::find(request, b"\r\n\r\n").map_or(request.len(), |at| at + 4)
}

/// Request heads on the wire, first sends and retries alike: what the
/// server counts (`requests.attempts`). Shared by the request's record
/// and the code sending it (a cell: the task path's in-flight guard reads
/// it when the stop cuts the request off).
#[derive(Debug, Default)]
pub struct Attempts {
    heads: Cell<u32>,
    /// The head of the write under way has been counted.
    head_out: Cell<bool>,
}

impl Attempts {
    pub fn count(&self) -> u32 {
        self.heads.get()
    }

    /// A new request: none yet.
    pub fn reset(&self) {
        self.heads.set(0);
        self.head_out.set(false);
    }

    /// The request is written (again, on a retry): its head not out yet.
    pub fn writing(&self) {
        self.head_out.set(false);
    }

    /// `written` bytes of `request` are on the socket: once they cover its
    /// head, the head counts (once) — before the body is out, so an upload
    /// the server never reads, cut off by the stop or failing later, is the
    /// attempt it is: the server got its head.
    pub fn wrote(&self, written: usize, request: &[u8]) {
        // A request written whole (nearly every one) needs no look for
        // where its head ends.
        if !self.head_out.get() && (written >= request.len() || written >= head_end(request)) {
            self.head_sent();
        }
    }

    /// A head went out whole (a request written in one piece, a stream's
    /// HEADERS).
    pub fn head_sent(&self) {
        self.heads.set(self.heads.get() + 1);
        self.head_out.set(true);
    }

    /// The server answered though the write failed (an early `413` while
    /// the body was still going out): its head got there, counted once.
    pub fn answered_anyway(&self) {
        if !self.head_out.get() {
            self.head_sent();
        }
    }

    /// The last head never reached the server ([`head_discarded`]).
    pub fn head_discarded(&self) {
        self.heads.set(self.heads.get().saturating_sub(1));
    }

    /// What a request cut off by the stop counts as: `aborted` if a head
    /// of it went out (the server may be working on it), else `not_sent`
    /// (never sent, or still connecting: it never reached the server).
    pub fn cut_off(&self) -> ErrorClass {
        match self.count() {
            0 => ErrorClass::NotSent,
            _ => ErrorClass::Aborted,
        }
    }
}

/// RFC 9112 §9.3.1: a failure on a reused connection before any byte of
/// answer means the server had closed it before the request reached it.
pub fn is_stale(reused: bool, answered: bool, failure: Failure) -> bool {
    reused
        && !answered
        && matches!(
            failure,
            Failure::ClosedBeforeResponse | Failure::ConnectionReset
        )
}

/// A request's one retry: whether a failed exchange goes once more on a
/// new connection. Asked of the method only when it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    spent: bool,
}

impl Default for Retry {
    fn default() -> Self {
        Retry::new()
    }
}

impl Retry {
    pub const fn new() -> Retry {
        Retry { spent: false }
    }

    /// `stale` ([`is_stale`]) and the policy allows `method`: the request
    /// goes again (once; the caller counts `RetriedStale`). Otherwise it
    /// fails with the failure it met.
    pub fn again(&mut self, stale: bool, policy: StaleRetry, method: &str) -> bool {
        let again = stale && !self.spent && policy.allows(method);
        self.spent |= again;
        again
    }
}

/// HTTP/2 and HTTP/3: a stream the server never processed — refused,
/// above a GOAWAY's last id, or early data it turned down — may go once
/// more on another connection (with [`Retry::again`]); the event it is
/// counted as. `None`: the failure stands.
pub fn unprocessed(failure: Failure) -> Option<ConnectionEvent> {
    Some(match failure {
        Failure::H2Refused => ConnectionEvent::RetriedH2Refused,
        Failure::H2GoawayUnprocessed => ConnectionEvent::RetriedH2Goaway,
        Failure::H3Refused => ConnectionEvent::RetriedH3Refused,
        Failure::H3GoawayUnprocessed => ConnectionEvent::RetriedH3Goaway,
        Failure::QuicZeroRttRejected => ConnectionEvent::RetriedZeroRttRejected,
        _ => return None,
    })
}

/// HTTP/2 and HTTP/3: whether new streams may still go on a connection
/// after one of its streams failed so. A refused or reset stream is the
/// stream's alone; past a GOAWAY or a connection error, nothing new goes
/// on it.
pub fn connection_goes_on(failure: Failure) -> bool {
    matches!(
        failure,
        Failure::H2Refused | Failure::H2StreamReset | Failure::H3Refused | Failure::H3StreamReset
    )
}

/// Where an exchange was when its time ran out. The connect has a timeout
/// of its own (`connect_timeout`); the exchange's runs from when its
/// connection is open (a connection waited for in a pool: from when it
/// was had), never from the connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Opening the connection: TCP, then TLS.
    Connecting,
    /// Writing the request or reading its response.
    Exchanging,
}

/// What a request whose time ran out in `phase` fails as.
pub fn timed_out(phase: Phase) -> Failure {
    match phase {
        Phase::Connecting => Failure::ConnectTimeout,
        Phase::Exchanging => Failure::RequestTimeout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_closing_early_is_told_by_what_came_back() {
        assert_eq!(closed_early(false), Failure::ClosedBeforeResponse);
        assert_eq!(closed_early(true), Failure::ClosedMidResponse);
    }

    #[test]
    fn only_a_reset_before_any_answer_discards_the_head() {
        assert!(head_discarded(io::ErrorKind::ConnectionReset, false));
        assert!(!head_discarded(io::ErrorKind::ConnectionReset, true));
        assert!(!head_discarded(io::ErrorKind::BrokenPipe, false));
        let attempts = Attempts::default();
        attempts.head_discarded();
        assert_eq!(attempts.count(), 0, "never below none");
        attempts.head_sent();
        attempts.head_sent();
        attempts.head_discarded();
        assert_eq!(attempts.count(), 1);
        attempts.reset();
        assert_eq!(attempts.count(), 0);
    }

    #[test]
    fn a_head_counts_once_written_before_its_body_and_only_once() {
        let request = b"POST /up HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody";
        assert_eq!(head_end(request), request.len() - 4);
        assert_eq!(
            head_end(b"GET / HTTP/1.1\r\n"),
            16,
            "no blank line: all of it"
        );
        let attempts = Attempts::default();
        attempts.writing();
        attempts.wrote(10, request);
        assert_eq!(attempts.count(), 0, "half a head is not a request");
        attempts.wrote(head_end(request), request);
        assert_eq!(attempts.count(), 1, "the head is out, the body waits");
        assert_eq!(attempts.cut_off(), ErrorClass::Aborted);
        attempts.wrote(request.len(), request);
        attempts.answered_anyway();
        assert_eq!(attempts.count(), 1, "one head, counted once");
        // A retry writes it again: a second head.
        attempts.writing();
        attempts.wrote(request.len(), request);
        assert_eq!(attempts.count(), 2);
        // Answered early though the write failed before the head was
        // counted: the answer says it got there.
        let early = Attempts::default();
        early.writing();
        early.answered_anyway();
        assert_eq!(early.count(), 1);
    }

    #[test]
    fn a_request_cut_off_is_aborted_only_once_a_head_left() {
        let attempts = Attempts::default();
        assert_eq!(attempts.cut_off(), ErrorClass::NotSent);
        attempts.head_sent();
        assert_eq!(attempts.cut_off(), ErrorClass::Aborted);
        attempts.head_sent();
        assert_eq!(attempts.cut_off(), ErrorClass::Aborted);
    }

    #[test]
    fn stale_means_reused_unanswered_and_closed_or_reset() {
        assert!(is_stale(true, false, Failure::ClosedBeforeResponse));
        assert!(is_stale(true, false, Failure::ConnectionReset));
        assert!(
            !is_stale(false, false, Failure::ClosedBeforeResponse),
            "a new connection"
        );
        assert!(
            !is_stale(true, true, Failure::ConnectionReset),
            "answered in part"
        );
        assert!(!is_stale(true, false, Failure::RequestTimeout));
        assert!(!is_stale(true, false, Failure::ClosedMidResponse));
    }

    #[test]
    fn a_stale_request_goes_again_once_as_the_policy_allows() {
        let mut retry = Retry::new();
        assert!(!retry.again(false, StaleRetry::All, "GET"), "not stale");
        assert!(retry.again(true, StaleRetry::Idempotent, "GET"));
        assert!(!retry.again(true, StaleRetry::Idempotent, "GET"), "once");
        let mut retry = Retry::new();
        assert!(!retry.again(true, StaleRetry::Idempotent, "POST"));
        assert!(
            retry.again(true, StaleRetry::All, "POST"),
            "a refusal spends nothing"
        );
        assert!(!Retry::new().again(true, StaleRetry::Never, "GET"));
    }

    #[test]
    fn unprocessed_streams_go_again_and_only_stream_failures_keep_the_connection() {
        assert_eq!(
            unprocessed(Failure::H2GoawayUnprocessed),
            Some(ConnectionEvent::RetriedH2Goaway)
        );
        assert_eq!(
            unprocessed(Failure::QuicZeroRttRejected),
            Some(ConnectionEvent::RetriedZeroRttRejected)
        );
        assert_eq!(
            unprocessed(Failure::H2StreamReset),
            None,
            "the server saw it"
        );
        assert!(connection_goes_on(Failure::H2Refused));
        assert!(connection_goes_on(Failure::H3StreamReset));
        assert!(!connection_goes_on(Failure::H2GoawayUnprocessed));
        assert!(!connection_goes_on(Failure::H2ProtocolError));
    }

    #[test]
    fn time_runs_out_on_the_connect_or_the_exchange() {
        assert_eq!(timed_out(Phase::Connecting), Failure::ConnectTimeout);
        assert_eq!(timed_out(Phase::Exchanging), Failure::RequestTimeout);
        assert_eq!(
            ErrorClass::from(timed_out(Phase::Exchanging)),
            ErrorClass::RequestTimeout
        );
    }

    #[test]
    fn the_retry_policies_are_one_list() {
        for policy in StaleRetry::ALL {
            assert_eq!(StaleRetry::parse(policy.as_str()), Some(policy));
        }
        assert_eq!(StaleRetry::NAMES, ["idempotent", "all", "never"]);
        let json = serde_json::to_string(&StaleRetry::All).unwrap();
        assert_eq!(json, "\"all\"");
    }
}
