//! Response parsing, pure and incremental: each function says whether the
//! bytes so far are *incomplete* (read more) or *invalid* (malformed), so a
//! server that drips bytes or sends garbage is handled without guessing.

use std::cell::RefCell;

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body: HEAD, 1xx, 204, 304.
    Empty,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// No length: the body ends when the server closes the connection
    /// (Unicorn and Thin answer HTTP/1.0 clients and `Connection: close` so).
    UntilClose,
}

/// A parsed status line and headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Bytes of the status line and headers, including the blank line.
    pub len: usize,
    pub framing: Framing,
    /// The server lets us send the next request on this connection.
    pub keep_alive: bool,
    /// A `Set-Cookie` header is present (so the cookie jar must look).
    pub sets_cookie: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("invalid status line or header: {0}")]
    Syntax(httparse::Error),
    #[error("invalid Content-Length")]
    ContentLength,
    #[error("invalid chunked encoding")]
    Chunked,
    #[error("response head larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
}

pub const MAX_HEAD: usize = 64 * 1024;
/// Headers parsed without an allocation; a head with more (within
/// [`MAX_HEAD`]) is parsed again with room for all.
const MAX_HEADERS: usize = 100;

/// Parses the response head at the start of `buf` and hands it to `read`:
/// `Ok(None)` when incomplete. Obsolete line folding (RFC 9112 §5.2) is
/// accepted — the folded value keeps its line break, which readers of a
/// value replace with a space — and any number of headers within
/// [`MAX_HEAD`].
pub fn with_head<R>(
    buf: &[u8],
    read: impl FnOnce(&httparse::Response, usize) -> R,
) -> Result<Option<R>, Malformed> {
    let mut config = httparse::ParserConfig::default();
    config.allow_obsolete_multiline_headers_in_responses(true);
    // Left uninitialised: filling 100 empty headers (3 KiB) for every
    // response was the largest user-space cost of a plain GET.
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = config.parse_response_with_uninit_headers(&mut response, buf, &mut headers);
    if parsed != Err(httparse::Error::TooManyHeaders) {
        return Ok(head_length(parsed, buf.len())?.map(|len| read(&response, len)));
    }
    // Every header is a line of its own: room for as many as there are
    // lines, within the head's limit.
    let within = &buf[..buf.len().min(MAX_HEAD + 1)];
    let lines = within.iter().filter(|&&b| b == b'\n').count() + 1;
    let mut headers = vec![std::mem::MaybeUninit::uninit(); lines];
    let mut response = httparse::Response::new(&mut []);
    let parsed = config.parse_response_with_uninit_headers(&mut response, within, &mut headers);
    Ok(head_length(parsed, buf.len())?.map(|len| read(&response, len)))
}

/// The length of a complete head, `None` while it is incomplete (and
/// within [`MAX_HEAD`]; `buf_len` bytes have come).
fn head_length(
    parsed: httparse::Result<usize>,
    buf_len: usize,
) -> Result<Option<usize>, Malformed> {
    match parsed {
        Ok(httparse::Status::Complete(len)) => Ok(Some(len)),
        Ok(httparse::Status::Partial) if buf_len > MAX_HEAD => Err(Malformed::HeadTooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(Malformed::Syntax(e)),
    }
}

/// Parses a response head from the start of `buf`. `Ok(None)`: incomplete.
pub fn parse_head(buf: &[u8], request_was_head: bool) -> Result<Option<Head>, Malformed> {
    with_head(buf, |response, len| {
        let status = response.code.expect("complete response has a code");
        let mut fields = Fields::new(response.version == Some(1));
        for h in response.headers.iter() {
            fields.header(h.name.as_bytes(), h.value)?;
        }
        Ok(fields.finish(status, len, request_was_head))
    })?
    .transpose()
}

/// The last head parsed, and its bytes. A server answers a repeated
/// request with the same head byte for byte — but for `Date`, once a
/// second — and a head's parse depends on its bytes alone (the `response`
/// fuzzer checks it), so a head that starts the buffer again is not parsed
/// again: parsing was a quarter of a plain GET's user-space instructions
/// (callgrind, nginx's five-header answer). The connections to one server
/// share one (an `Rc`, within one worker thread): its head stays in the
/// CPU's cache however many connections there are, and no connection
/// holds a copy.
#[derive(Debug, Default)]
pub struct HeadCache {
    last: RefCell<Option<KeptHead>>,
}

#[derive(Debug)]
struct KeptHead {
    bytes: Vec<u8>,
    head: Head,
    /// It answered a HEAD request.
    head_request: bool,
}

impl HeadCache {
    /// Heads longer than this are parsed each time (an idle connection
    /// keeps at most this much).
    const MAX_KEPT: usize = 1024;

    /// [`parse_head`], from the cache when `buf` starts with the last head.
    pub fn parse(&self, buf: &[u8], request_was_head: bool) -> Result<Option<Head>, Malformed> {
        // Before the first read of an answer: nothing to parse yet.
        if buf.is_empty() {
            return Ok(None);
        }
        let mut last = self.last.borrow_mut();
        if let Some(kept) = &*last {
            if kept.head_request == request_was_head && buf.starts_with(&kept.bytes) {
                return Ok(Some(kept.head));
            }
        }
        let parsed = parse_head(buf, request_was_head)?;
        if let Some(head) = parsed.filter(|h| h.len <= Self::MAX_KEPT) {
            let kept = last.get_or_insert_with(|| KeptHead {
                bytes: Vec::new(),
                head,
                head_request: request_was_head,
            });
            kept.bytes.clear();
            kept.bytes.extend_from_slice(&buf[..head.len]);
            kept.head = head;
            kept.head_request = request_was_head;
        }
        Ok(parsed)
    }
}

/// What the headers say about framing and the connection, header by
/// header.
struct Fields {
    http11: bool,
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    sets_cookie: bool,
}

impl Fields {
    fn new(http11: bool) -> Fields {
        Fields {
            http11,
            content_length: None,
            chunked: false,
            close: !http11,
            sets_cookie: false,
        }
    }

    /// One header; only four names matter (told apart by length first).
    /// `name` is a token, as both parsers check.
    fn header(&mut self, name: &[u8], value: &[u8]) -> Result<(), Malformed> {
        match name.len() {
            10 if token_is(name, b"set-cookie") => self.sets_cookie = true,
            10 if token_is(name, b"connection") => {
                for token in value.split(|&b| b == b',') {
                    let token = trim(token);
                    if token.eq_ignore_ascii_case(b"close") {
                        self.close = true;
                    } else if !self.http11 && token.eq_ignore_ascii_case(b"keep-alive") {
                        self.close = false;
                    }
                }
            }
            14 if token_is(name, b"content-length") => {
                let length = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or(Malformed::ContentLength)?;
                // Repeated lengths must agree (RFC 9112 §6.3 item 5).
                if self.content_length.is_some_and(|old| old != length) {
                    return Err(Malformed::ContentLength);
                }
                self.content_length = Some(length);
            }
            // Chunked must be the final coding; anything else means the
            // body runs to the close.
            17 if token_is(name, b"transfer-encoding") => {
                self.chunked = last_token(value).eq_ignore_ascii_case(b"chunked");
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self, status: u16, len: usize, request_was_head: bool) -> Head {
        let framing =
            if request_was_head || (100..200).contains(&status) || status == 204 || status == 304 {
                Framing::Empty
            } else if self.chunked {
                Framing::Chunked
            } else if let Some(n) = self.content_length {
                Framing::Length(n)
            } else {
                Framing::UntilClose
            };
        Head {
            status,
            len,
            framing,
            keep_alive: !self.close && framing != Framing::UntilClose,
            sets_cookie: self.sets_cookie,
        }
    }
}

/// Token `name` is `lower` but for ASCII case. Setting bit 0x20 of a
/// token byte lowercases a letter and turns no other token byte into a
/// lowercase letter or `-` — cheaper than `eq_ignore_ascii_case`.
fn token_is(name: &[u8], lower: &[u8]) -> bool {
    name.len() == lower.len() && name.iter().zip(lower).all(|(&a, &b)| a | 0x20 == b)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn last_token(value: &[u8]) -> &[u8] {
    trim(value.rsplit(|&b| b == b',').next().unwrap_or(value))
}

/// Streaming decoder for a chunked body. It only skips the bytes (the
/// engine counts them); no copy of the body is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: ChunkState,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside chunk data: this many bytes left.
    Data(u64),
    /// Expecting the CRLF after chunk data.
    DataEnd,
    /// After the last chunk: trailer lines until an empty line.
    Trailer,
    Done,
}

impl ChunkedDecoder {
    /// Consumes from `buf` as much as can be decoded. Returns the number of
    /// bytes consumed; call again with more data until `is_done()`.
    pub fn feed(&mut self, buf: &[u8]) -> Result<usize, Malformed> {
        self.feed_into(buf, None)
    }

    /// As `feed`, appending the decoded body data to `sink` (up to `limit`
    /// bytes in all) when one is given.
    pub fn feed_into(
        &mut self,
        buf: &[u8],
        mut sink: Option<(&mut Vec<u8>, usize)>,
    ) -> Result<usize, Malformed> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                ChunkState::Done => return Ok(pos),
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        pos += used;
                        self.state = if size == 0 {
                            ChunkState::Trailer
                        } else {
                            ChunkState::Data(size)
                        };
                    }
                    Ok(httparse::Status::Partial) => {
                        if rest.len() > 4096 {
                            return Err(Malformed::Chunked);
                        }
                        return Ok(pos);
                    }
                    Err(_) => return Err(Malformed::Chunked),
                },
                ChunkState::Data(left) => {
                    if rest.is_empty() {
                        return Ok(pos);
                    }
                    let take = (rest.len() as u64).min(left);
                    if let Some((sink, limit)) = sink.as_mut() {
                        append_limited(sink, &rest[..take as usize], *limit);
                    }
                    pos += take as usize;
                    self.state = if take == left {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left - take)
                    };
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(pos);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(Malformed::Chunked);
                    }
                    pos += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailer => {
                    let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                        if rest.len() > MAX_HEAD {
                            return Err(Malformed::Chunked);
                        }
                        return Ok(pos);
                    };
                    pos += eol + 2;
                    if eol == 0 {
                        self.state = ChunkState::Done;
                    }
                }
            }
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }
}

/// Appends as much of `data` as fits under `limit` bytes in all.
pub fn append_limited(sink: &mut Vec<u8>, data: &[u8], limit: usize) {
    let room = limit.saturating_sub(sink.len());
    sink.extend_from_slice(&data[..data.len().min(room)]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn head(text: &str) -> Head {
        parse_head(text.as_bytes(), false).unwrap().unwrap()
    }

    #[test]
    fn framing_table() {
        let cases: &[(&str, Framing, bool)] = &[
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
                Framing::Length(5),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                Framing::Chunked,
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                Framing::Chunked,
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n",
                Framing::Chunked,
                true,
            ),
            ("HTTP/1.1 200 OK\r\n\r\n", Framing::UntilClose, false),
            (
                "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n",
                Framing::Length(5),
                false,
            ),
            (
                "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\n",
                Framing::Length(5),
                true,
            ),
            (
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\n",
                Framing::Length(5),
                false,
            ),
            (
                "HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 5\r\n\r\n",
                Framing::Length(5),
                false,
            ),
            ("HTTP/1.1 204 No Content\r\n\r\n", Framing::Empty, true),
            (
                "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
                Framing::Empty,
                true,
            ),
            ("HTTP/1.1 100 Continue\r\n\r\n", Framing::Empty, true),
        ];
        for (text, framing, keep_alive) in cases {
            let h = head(text);
            assert_eq!(
                (h.framing, h.keep_alive),
                (*framing, *keep_alive),
                "{text:?}"
            );
            assert_eq!(h.len, text.len());
        }
    }

    #[test]
    fn head_request_has_no_body() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Empty);
    }

    #[test]
    fn incomplete_versus_invalid() {
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Le", false),
            Ok(None)
        );
        assert_eq!(parse_head(b"", false), Ok(None));
        assert!(parse_head(b"garbage garbage\r\n\r\n", false).is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
        assert!(parse_head(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            false
        )
        .is_err());
        let huge = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD + 1));
        assert_eq!(
            parse_head(huge.as_bytes(), false),
            Err(Malformed::HeadTooLarge)
        );
    }

    const BODY: &[u8] =
        b"5\r\nhello\r\n1A;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\n";

    #[test]
    fn chunked_in_one_piece() {
        let mut d = ChunkedDecoder::default();
        assert_eq!(d.feed(BODY), Ok(BODY.len()));
        assert!(d.is_done());
    }

    #[test]
    fn chunked_body_is_decoded_into_a_sink() {
        let mut d = ChunkedDecoder::default();
        let mut body = Vec::new();
        assert_eq!(
            d.feed_into(BODY, Some((&mut body, 1 << 20))),
            Ok(BODY.len())
        );
        assert_eq!(body, b"helloabcdefghijklmnopqrstuvwxyz");
        let mut d = ChunkedDecoder::default();
        let mut short = Vec::new();
        d.feed_into(BODY, Some((&mut short, 7))).unwrap();
        assert_eq!(short, b"helloab");
    }

    #[test]
    fn chunked_garbage_is_malformed() {
        let mut d = ChunkedDecoder::default();
        assert!(d.feed(b"zz\r\n").is_err());
        let mut d = ChunkedDecoder::default();
        assert!(d.feed(b"2\r\nabXX").is_err());
    }

    proptest! {
        /// However the body is split across reads (a server dripping bytes),
        /// the decoder consumes exactly the body and finishes.
        #[test]
        fn chunked_any_split(cuts in proptest::collection::vec(0usize..BODY.len(), 0..8)) {
            let mut cuts = cuts;
            cuts.sort();
            cuts.push(BODY.len());
            let mut d = ChunkedDecoder::default();
            let mut pending: Vec<u8> = Vec::new();
            let mut last = 0;
            let mut consumed = 0;
            for cut in cuts {
                pending.extend_from_slice(&BODY[last..cut]);
                last = cut;
                let used = d.feed(&pending).unwrap();
                consumed += used;
                pending.drain(..used);
            }
            prop_assert!(d.is_done());
            prop_assert_eq!(consumed, BODY.len());
        }

        #[test]
        fn parse_head_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_head(&bytes, false);
            let mut d = ChunkedDecoder::default();
            let _ = d.feed(&bytes);
        }

        /// Whatever the cache holds, a buffer parses as it would without it:
        /// the same head again (with any body after it), a head that
        /// differs anywhere, a cut-off one.
        #[test]
        fn the_cache_answers_what_a_parse_would(
            first in 0usize..4,
            second in 0usize..4,
            cut in 0usize..200,
            flip in 0usize..200,
            head_requests: (bool, bool),
        ) {
            let date = |n| format!("HTTP/1.1 200 OK\r\nDate: Tue, 24 Nov 2026 09:04:4{n} GMT\r\nContent-Length: 5\r\n\r\nhello");
            let mut heads: Vec<Vec<u8>> = vec![
                date(8).into_bytes(),
                date(9).into_bytes(),
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
                b"HTTP/1.0 304 Not Modified\r\nContent-Length: 5\r\n\r\n".to_vec(),
            ];
            let mut second = heads[second].clone();
            second.truncate(second.len() - cut % 20);
            if let Some(b) = second.get_mut(flip) {
                *b ^= 0x20;
            }
            let cache = HeadCache::default();
            let _ = cache.parse(&heads.swap_remove(first), head_requests.0);
            prop_assert_eq!(
                cache.parse(&second, head_requests.1),
                parse_head(&second, head_requests.1)
            );
        }
    }

    #[test]
    fn a_repeated_head_is_answered_from_the_cache() {
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let cache = HeadCache::default();
        let head = cache.parse(answer, false).unwrap().unwrap();
        assert_eq!(
            cache.last.borrow().as_ref().unwrap().bytes,
            &answer[..head.len]
        );
        assert_eq!(cache.parse(answer, false), Ok(Some(head)));
        // A HEAD request's answer has no body: parsed again.
        let to_head = cache.parse(answer, true).unwrap().unwrap();
        assert_eq!(to_head.framing, Framing::Empty);
        // Too long to keep: parsed every time, nothing held.
        let long = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(2000));
        let cache = HeadCache::default();
        assert!(cache.parse(long.as_bytes(), false).unwrap().is_some());
        assert!(cache.last.borrow().is_none());
    }
}
