//! Server-sent events (the HTML standard's `text/event-stream`): the
//! parser, pure and fed bytes as they come, and the stream the engine
//! reads events from once [`Connection::open_stream`] has read the
//! response head.

use crate::response::{ChunkedDecoder, Framing, Head};
use crate::{exchange_error_class, Connection, Failure, Stream};
use tokio::io::AsyncReadExt;

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, `message` when none was given.
    pub name: String,
    pub data: String,
    /// The last event id the stream set (carried over to later events).
    pub id: Option<String>,
}

/// The longest event (its lines buffered) taken before the stream is
/// counted as broken: a server that never sends a blank line cannot make
/// the generator hold its whole body.
pub const MAX_EVENT: usize = 16 << 20;

/// The event-stream parser (HTML § 9.2.6): lines end in CRLF, LF or CR;
/// `data` lines join with line feeds; a blank line dispatches; `:` starts a
/// comment; `id` and `retry` are remembered.
#[derive(Debug, Default)]
pub struct EventParser {
    line: Vec<u8>,
    /// The previous byte was a CR (a LF right after it ends nothing).
    after_cr: bool,
    started: bool,
    name: String,
    data: String,
    has_data: bool,
    /// The last event id: sent back as `Last-Event-ID` on a reconnect.
    pub last_id: Option<String>,
    /// The reconnection time the server asked for, in ms.
    pub retry_ms: Option<u64>,
    pending: usize,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("an event longer than {MAX_EVENT} bytes")]
pub struct TooLong;

impl EventParser {
    /// A parser for a stream reopened after event `last_id`.
    pub fn resuming(last_id: Option<String>) -> EventParser {
        EventParser {
            last_id,
            ..Default::default()
        }
    }

    /// Feeds `bytes`; each event completed is handed to `on_event`.
    pub fn feed(&mut self, bytes: &[u8], mut on_event: impl FnMut(Event)) -> Result<(), TooLong> {
        for &b in bytes {
            if b == b'\n' && self.after_cr {
                self.after_cr = false;
                continue;
            }
            self.after_cr = b == b'\r';
            if b == b'\n' || b == b'\r' {
                let line = std::mem::take(&mut self.line);
                if let Some(event) = self.line_done(&line) {
                    on_event(event);
                }
                self.line = line;
                self.line.clear();
            } else {
                self.line.push(b);
                self.pending += 1;
                if self.pending > MAX_EVENT {
                    return Err(TooLong);
                }
            }
        }
        Ok(())
    }

    fn line_done(&mut self, line: &[u8]) -> Option<Event> {
        let mut line = line;
        if !self.started {
            self.started = true;
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            self.pending = 0;
            let name = std::mem::take(&mut self.name);
            if !std::mem::take(&mut self.has_data) {
                return None;
            }
            let mut data = std::mem::take(&mut self.data);
            if data.ends_with('\n') {
                data.pop();
            }
            return Some(Event {
                name: if name.is_empty() {
                    "message".into()
                } else {
                    name
                },
                data,
                id: self.last_id.clone(),
            });
        }
        if line[0] == b':' {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        match field {
            "event" => self.name = value.to_string(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        None
    }
}

/// Whether a response opens an event stream: 2xx and
/// `Content-Type: text/event-stream`.
pub fn is_event_stream(status: u16, content_type: Option<&str>) -> bool {
    (200..300).contains(&status)
        && content_type.is_some_and(|t| {
            t.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// What the next read gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Event(Event),
    /// The server ended the stream (a reconnect may follow).
    Ended,
}

/// An open event stream: the body after the head, decoded by its framing
/// and parsed into events.
pub struct EventStream {
    stream: Stream,
    buf: Vec<u8>,
    framing: Framing,
    chunked: ChunkedDecoder,
    /// `Content-Length` bodies: bytes still to come.
    remaining: u64,
    pub parser: EventParser,
    ready: std::collections::VecDeque<Event>,
    ended: bool,
    /// Body bytes read (after decoding the framing).
    pub bytes: u64,
}

impl EventStream {
    /// The stream over a connection whose response head `head` was read.
    pub fn over(connection: Connection, head: &Head, parser: EventParser) -> EventStream {
        let (stream, mut buf) = connection.into_parts();
        // The connection's 8 KiB read buffer, down to what it holds.
        buf.shrink_to_fit();
        EventStream {
            stream,
            buf,
            framing: head.framing,
            chunked: ChunkedDecoder::default(),
            remaining: match head.framing {
                Framing::Length(n) => n,
                _ => 0,
            },
            parser,
            ready: Default::default(),
            ended: matches!(head.framing, Framing::Empty),
            bytes: 0,
        }
    }

    /// The next event, or the end of the stream. Waits as long as it
    /// takes: the caller bounds it.
    pub async fn next_event(&mut self) -> Result<Next, Failure> {
        {
            loop {
                if let Some(event) = self.ready.pop_front() {
                    return Ok(Next::Event(event));
                }
                if self.ended {
                    return Ok(Next::Ended);
                }
                if self.buf.is_empty() {
                    // Into the buffer itself: a chunk on the stack would sit
                    // in every waiting user's future.
                    self.buf.reserve(4096);
                    let n = self
                        .stream
                        .read_buf(&mut self.buf)
                        .await
                        .map_err(|e| exchange_error_class(&e))?;
                    if n == 0 {
                        // The server ended it: what was parsed goes out
                        // first, an unfinished event is dropped.
                        self.ended = true;
                        continue;
                    }
                }
                self.decode()?;
            }
        }
    }

    /// Moves what is buffered through the body's framing into the parser.
    fn decode(&mut self) -> Result<(), Failure> {
        let mut body = Vec::new();
        match self.framing {
            Framing::Empty => self.buf.clear(),
            Framing::UntilClose => body = std::mem::take(&mut self.buf),
            Framing::Length(_) => {
                let take = (self.buf.len() as u64).min(self.remaining) as usize;
                body.extend(self.buf.drain(..take));
                self.remaining -= take as u64;
                if self.remaining == 0 {
                    self.ended = true;
                    self.buf.clear();
                }
            }
            Framing::Chunked => {
                let used = self
                    .chunked
                    .feed_into(&self.buf, Some((&mut body, usize::MAX)))
                    .map_err(|_| Failure::MalformedResponse)?;
                self.buf.drain(..used);
                if self.chunked.is_done() {
                    self.ended = true;
                    self.buf.clear();
                }
            }
        }
        self.bytes += body.len() as u64;
        let ready = &mut self.ready;
        self.parser
            .feed(&body, |e| ready.push_back(e))
            .map_err(|_| Failure::MalformedResponse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&str]) -> (Vec<Event>, EventParser) {
        let mut p = EventParser::default();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c.as_bytes(), |e| out.push(e)).unwrap();
        }
        (out, p)
    }

    #[test]
    fn events_follow_the_standard() {
        // Split anywhere, CRLF/CR/LF line ends, comments, multi-line data,
        // named events, ids carried over, retry remembered.
        let (events, p) = parse(&[
            "\u{feff}: hello\r\n",
            "data: one\r",
            "\n\r\nevent: tick\nda",
            "ta:two\ndata:  three\nid: 7\n\n",
            "retry: 1500\ndata\n\n",
            "id: 8\n\nevent: lost\n",
        ]);
        let e = |name: &str, data: &str, id: Option<&str>| Event {
            name: name.into(),
            data: data.into(),
            id: id.map(Into::into),
        };
        assert_eq!(
            events,
            vec![
                e("message", "one", None),
                e("tick", "two\n three", Some("7")),
                e("message", "", Some("7")),
            ]
        );
        // An id-only block dispatches nothing but sets the id; an
        // unfinished event is not dispatched.
        assert_eq!(p.last_id.as_deref(), Some("8"));
        assert_eq!(p.retry_ms, Some(1500));
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut p = EventParser::default();
        let big = vec![b'x'; MAX_EVENT + 1];
        assert_eq!(p.feed(&big, |_| {}), Err(TooLong));
    }

    #[test]
    fn only_an_event_stream_opens() {
        assert!(is_event_stream(
            200,
            Some("text/event-stream; charset=utf-8")
        ));
        assert!(!is_event_stream(200, Some("text/html")));
        assert!(!is_event_stream(204, None));
        assert!(!is_event_stream(500, Some("text/event-stream")));
    }
}
