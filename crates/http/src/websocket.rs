//! WebSocket (RFC 6455) on a connection upgraded from HTTP/1.1. The
//! handshake request is the engine's (a rendered GET, with the session's
//! cookies and headers, sent by [`Connection::open_stream`]); this module
//! adds its key, checks the server's answer, and then frames messages with
//! tokio-tungstenite: send a text or binary message, take the next
//! incoming one (pings are answered), close with a code.

use crate::{exchange_error_class, Captured, Connection, Failure, Stream};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

/// The largest message (and frame) taken from a server; a bigger one is
/// `ws_message_too_big` and ends the socket.
pub const MAX_MESSAGE: usize = 16 << 20;

/// The headers an upgrade adds to the handshake GET, given its key.
pub fn upgrade_headers(key: &str) -> [(&'static str, String); 4] {
    [
        ("Upgrade", "websocket".to_string()),
        ("Connection", "Upgrade".to_string()),
        ("Sec-WebSocket-Version", "13".to_string()),
        ("Sec-WebSocket-Key", key.to_string()),
    ]
}

/// A fresh `Sec-WebSocket-Key` (16 random bytes, base64).
pub fn new_key() -> String {
    tokio_tungstenite::tungstenite::handshake::client::generate_key()
}

/// Whether the server switched to WebSocket: `101`, `Upgrade: websocket`
/// and the accept value RFC 6455 §4.2.2 derives from our key.
pub fn accepted(status: u16, key: &str, head: &Captured) -> bool {
    let expected = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    status == 101
        && head
            .header("upgrade")
            .is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket"))
        && head
            .header("sec-websocket-accept")
            .is_some_and(|a| a.trim() == expected)
}

/// What came from the server.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A whole data message (fragments joined), its payload.
    Message { data: Vec<u8>, text: bool },
    /// A ping (its pong is sent with the next read or write).
    Ping,
    /// A pong (the answer to our ping, or unasked).
    Pong,
    /// The server's close frame (its code, when it gave one).
    Closed(Option<u16>),
    /// The TCP connection ended without a close frame.
    Ended,
}

pub struct WebSocket {
    inner: WebSocketStream<Stream>,
}

impl WebSocket {
    /// The socket over an upgraded connection (bytes already read past
    /// the `101` are its first frames).
    pub async fn over(connection: Connection) -> WebSocket {
        let (stream, read) = connection.into_parts();
        // What came after the 101, in a buffer of its size: the
        // connection's 8 KiB read buffer would be kept as the socket's
        // (collected in place), 8 KiB per idle socket.
        let read = read.to_vec();
        let config = WebSocketConfig::default()
            // Small buffers: an idle socket holds little (thousands open);
            // a bigger message reserves what it needs.
            .read_buffer_size(1024)
            .write_buffer_size(0)
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let inner =
            WebSocketStream::from_partially_read(stream, read, Role::Client, Some(config)).await;
        WebSocket { inner }
    }

    /// Sends one message (a text or a binary frame) and flushes it.
    pub async fn send(&mut self, data: Vec<u8>, text: bool) -> Result<(), Failure> {
        let message = if text {
            match String::from_utf8(data) {
                Ok(s) => Message::text(s),
                Err(e) => Message::binary(e.into_bytes()),
            }
        } else {
            Message::binary(data)
        };
        self.inner.send(message).await.map_err(failure)
    }

    /// Sends a ping (an empty one) and flushes it.
    pub async fn ping(&mut self) -> Result<(), Failure> {
        self.inner
            .send(Message::Ping(Default::default()))
            .await
            .map_err(failure)
    }

    /// The next thing from the server. Waits as long as it takes: the
    /// caller bounds it.
    pub async fn next(&mut self) -> Result<Incoming, Failure> {
        loop {
            let Some(message) = self.inner.next().await else {
                return Ok(Incoming::Ended);
            };
            return match message {
                Ok(Message::Text(t)) => Ok(Incoming::Message {
                    data: t.as_bytes().to_vec(),
                    text: true,
                }),
                Ok(Message::Binary(b)) => Ok(Incoming::Message {
                    data: b.to_vec(),
                    text: false,
                }),
                Ok(Message::Ping(_)) => Ok(Incoming::Ping),
                Ok(Message::Pong(_)) => Ok(Incoming::Pong),
                Ok(Message::Frame(_)) => continue,
                // 1002 is a protocol error by its own name; tungstenite
                // also hands over a code no endpoint may send (below 1000,
                // 1004–1006, 1015, the unassigned range: RFC 6455 §7.4) as
                // 1002, having answered it so. Either fails the socket as a
                // protocol error, not as a close.
                Ok(Message::Close(Some(frame))) if frame.code == CloseCode::Protocol => {
                    Err(Failure::WsProtocolError)
                }
                Ok(Message::Close(frame)) => Ok(Incoming::Closed(frame.map(|f| f.code.into()))),
                Err(WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake))
                | Err(WsError::ConnectionClosed)
                | Err(WsError::AlreadyClosed) => Ok(Incoming::Ended),
                Err(e) => Err(failure(e)),
            };
        }
    }

    /// Sends a close frame with `code` and waits for the server's (the
    /// caller bounds the wait); data arriving meanwhile is counted by the
    /// caller through `on_message`. Returns the server's code.
    pub async fn close(
        &mut self,
        code: u16,
        mut on_message: impl FnMut(&Incoming),
    ) -> Result<Option<u16>, Failure> {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: "".into(),
        };
        match self.inner.close(Some(frame)).await {
            Ok(()) | Err(WsError::ConnectionClosed) | Err(WsError::AlreadyClosed) => {}
            Err(e) => return Err(failure(e)),
        }
        loop {
            match self.next().await? {
                Incoming::Closed(code) => return Ok(code),
                Incoming::Ended => return Ok(None),
                other => on_message(&other),
            }
        }
    }
}

/// The failure a tungstenite error counts as.
fn failure(e: WsError) -> Failure {
    match e {
        WsError::Io(e) => exchange_error_class(&e),
        WsError::Capacity(_) | WsError::WriteBufferFull(_) => Failure::WsMessageTooBig,
        WsError::ConnectionClosed | WsError::AlreadyClosed => Failure::SocketClosed,
        WsError::Tls(_) => Failure::TlsHandshake,
        _ => Failure::WsProtocolError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6455 §1.3's example key and accept value.
    #[test]
    fn the_accept_value_is_checked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let head = |accept: &str| Captured {
            headers: vec![
                ("Upgrade".into(), "websocket".into()),
                ("Sec-WebSocket-Accept".into(), accept.into()),
            ],
            ..Captured::default()
        };
        let good = head("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert!(accepted(101, key, &good));
        assert!(!accepted(200, key, &good));
        assert!(!accepted(101, key, &head("wrong=")));
        assert!(!accepted(101, key, &Captured::default()));
        assert_eq!(new_key().len(), 24);
        assert_ne!(new_key(), new_key());
    }
}
