//! Session steps on a long-lived socket: a WebSocket (`ws`) or a
//! server-sent-event stream (`sse`) a user opens, sends messages on, waits
//! for messages from, holds and closes.
//!
//! Each measured step is an entry of the plan's requests, so it has a name,
//! counts, error classes and an HDR histogram like any request: the
//! handshake (a GET, sent as one), and every `expect` — whose latency is
//! the round trip from the send (or the time waited, without a send).
//! The messages' match rules are that entry's checks, run on the message
//! as on a body; its extractions take values from the matching message.

use super::template::Template;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketKind {
    WebSocket,
    EventStream,
    /// A gRPC stream (`grpc_stream`) on an HTTP/2 connection.
    Grpc,
}

#[derive(Clone, Debug)]
pub enum SocketStep {
    /// Open the user's socket with handshake request `handshake`
    /// (closing one it already has), then wait for `expect` if given.
    Open {
        kind: SocketKind,
        handshake: usize,
        expect: Option<MessageExpect>,
    },
    /// Send a message (a text frame, or a binary one whose `payload`
    /// renders to base64), then wait for `expect` if given.
    Send {
        payload: Template,
        binary: bool,
        expect: Option<MessageExpect>,
    },
    /// Wait for a matching message without sending.
    Expect(MessageExpect),
    /// Stay connected this long, receiving (and answering pings); with
    /// `ping`, pinging the server too.
    Hold { pause: Duration, ping: Option<Ping> },
    /// Close with this code and wait (bounded) for the server's close.
    Close(u16),
}

/// Waiting for the first incoming message that passes every check of
/// request entry `entry` (none: any message), within `within`.
#[derive(Clone, Debug)]
pub struct MessageExpect {
    pub entry: usize,
    pub within: Duration,
}

/// Pings sent while holding a WebSocket: one every `every`, its round
/// trip recorded as request entry `entry`; no pong before the next is due
/// is `ping_timeout`, and the socket is given up.
#[derive(Clone, Debug)]
pub struct Ping {
    pub every: Duration,
    pub entry: usize,
}

/// How long a close waits for the server's close frame.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Browsers' wait before an event stream reconnects, when the server
/// sets no `retry:`.
pub const SSE_RECONNECT: Duration = Duration::from_secs(3);
