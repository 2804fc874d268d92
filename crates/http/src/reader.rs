//! One response read from bytes as they arrive, without I/O: for an event
//! loop that owns its sockets and reads for many connections into one
//! buffer (the engine's fast path, `engine/src/event_loop/`). It keeps no
//! bytes: it says how many of those it was given it used, and the caller
//! keeps the rest (a head split over two reads) for the next call.
//!
//! The framing rules are the async client's ([`crate::Connection::exchange`]):
//! interim 1xx answers are skipped, the body is delimited by its length,
//! its chunks or the close, and is counted — copied (decoded, up to
//! [`MAX_CAPTURED_BODY`]) only into a sink the caller gives, when checks
//! need it.

use crate::response::{append_limited, ChunkedDecoder, Framing, HeadCache, Malformed};
use crate::MAX_CAPTURED_BODY;

/// Where a response stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseReader {
    part: Part,
    status: u16,
    keep_alive: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Part {
    /// Waiting for the head (or the head after an interim answer).
    #[default]
    Head,
    /// This many body bytes to go.
    Length(u64),
    Chunked(ChunkedDecoder),
    /// The body ends when the server closes the connection.
    UntilClose,
    Done,
}

/// What a [`ResponseReader::feed`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of the input that belong to the response so far; the caller
    /// keeps the rest for the next call (unless the response is done, when
    /// any rest is bytes the server sent unasked).
    pub used: usize,
    /// The response is complete.
    pub done: bool,
    /// Where in the input the response's head lies (start, end), when it
    /// was read in this call.
    pub head: Option<(usize, usize)>,
    /// That head sets cookies.
    pub sets_cookie: bool,
}

impl ResponseReader {
    /// Reads from `data`, the bytes not used by an earlier call followed by
    /// those just read. `heads` is the server's head cache; the body's
    /// bytes (decoded from chunks) are appended to `body` when given.
    pub fn feed(
        &mut self,
        heads: &HeadCache,
        data: &[u8],
        head_request: bool,
        mut body: Option<&mut Vec<u8>>,
    ) -> Result<Fed, Malformed> {
        let mut used = 0;
        let mut head_at = None;
        let mut sets_cookie = false;
        let fed = |used, done, head, sets_cookie| Fed {
            used,
            done,
            head,
            sets_cookie,
        };
        loop {
            let rest = &data[used..];
            match &mut self.part {
                Part::Head => {
                    let Some(head) = heads.parse(rest, head_request)? else {
                        return Ok(fed(used, false, head_at, sets_cookie));
                    };
                    let start = used;
                    used += head.len;
                    // Interim answers (100 Continue, 103 Early Hints)
                    // precede the real one.
                    if (100..200).contains(&head.status) && head.status != 101 {
                        continue;
                    }
                    head_at = Some((start, used));
                    sets_cookie = head.sets_cookie;
                    self.status = head.status;
                    self.keep_alive = head.keep_alive;
                    self.part = match head.framing {
                        Framing::Empty => Part::Done,
                        Framing::Length(0) => Part::Done,
                        Framing::Length(n) => Part::Length(n),
                        Framing::Chunked => Part::Chunked(ChunkedDecoder::default()),
                        Framing::UntilClose => Part::UntilClose,
                    };
                }
                Part::Length(left) => {
                    let take = (rest.len() as u64).min(*left);
                    if let Some(body) = body.as_deref_mut() {
                        append_limited(body, &rest[..take as usize], MAX_CAPTURED_BODY);
                    }
                    used += take as usize;
                    *left -= take;
                    if *left == 0 {
                        self.part = Part::Done;
                    }
                    let done = self.part == Part::Done;
                    return Ok(fed(used, done, head_at, sets_cookie));
                }
                Part::Chunked(decoder) => {
                    let sink = body.as_deref_mut().map(|b| (b, MAX_CAPTURED_BODY));
                    used += decoder.feed_into(rest, sink)?;
                    if decoder.is_done() {
                        self.part = Part::Done;
                    }
                    let done = self.part == Part::Done;
                    return Ok(fed(used, done, head_at, sets_cookie));
                }
                Part::UntilClose => {
                    if let Some(body) = body.as_deref_mut() {
                        append_limited(body, rest, MAX_CAPTURED_BODY);
                    }
                    return Ok(fed(data.len(), false, head_at, sets_cookie));
                }
                Part::Done => return Ok(fed(used, true, head_at, sets_cookie)),
            }
        }
    }

    /// The server closed the connection: whether that completed the
    /// response (a body delimited by the close).
    pub fn closed(&mut self) -> bool {
        if self.part == Part::UntilClose {
            self.part = Part::Done;
            self.keep_alive = false;
        }
        self.part == Part::Done
    }

    /// The status of the response's head, once it has been read.
    pub fn status(&self) -> Option<u16> {
        (self.part != Part::Head).then_some(self.status)
    }

    /// The connection may carry the next request (once done).
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` one after another as an event loop would, keeping
    /// what each call left unused; returns the status, whether it was
    /// done, and the bytes left over.
    fn read(pieces: &[&[u8]], closed: bool) -> Result<(Option<u16>, bool, usize), Malformed> {
        let heads = HeadCache::default();
        let mut reader = ResponseReader::default();
        let mut kept = Vec::new();
        let mut done = false;
        for piece in pieces {
            kept.extend_from_slice(piece);
            let fed = reader.feed(&heads, &kept, false, None)?;
            kept.drain(..fed.used);
            done = fed.done;
        }
        if closed {
            done = reader.closed();
        }
        Ok((reader.status(), done, kept.len()))
    }

    /// `whole` cut in two at every byte reads as one complete response.
    fn reads_split_anywhere(whole: &[u8], status: u16) {
        for cut in 0..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(
                read(&[a, b], false),
                Ok((Some(status), true, 0)),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_response_split_anywhere_reads_the_same() {
        reads_split_anywhere(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200);
    }

    #[test]
    fn chunked_interim_and_empty_bodies() {
        reads_split_anywhere(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            201,
        );
        assert_eq!(
            read(&[b"HTTP/1.1 204 No Content\r\n\r\n"], false),
            Ok((Some(204), true, 0))
        );
    }

    #[test]
    fn the_head_is_pointed_at_and_says_whether_it_sets_cookies() {
        let heads = HeadCache::default();
        let mut reader = ResponseReader::default();
        let data: &[u8] = b"xxHTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nContent-Length: 0\r\n\r\n";
        let fed = reader.feed(&heads, &data[2..], false, None).unwrap();
        let (start, end) = fed.head.unwrap();
        assert_eq!((start, end, fed.done), (0, data.len() - 2, true));
        assert!(fed.sets_cookie);
        let mut reader = ResponseReader::default();
        let plain = reader
            .feed(
                &heads,
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                false,
                None,
            )
            .unwrap();
        assert!(plain.head.is_some() && !plain.sets_cookie);
    }

    #[test]
    fn bytes_after_the_response_are_left_over() {
        let (status, done, rest) = read(
            &[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"],
            false,
        )
        .unwrap();
        assert_eq!((status, done), (Some(200), true));
        assert_eq!(rest, "HTTP/1.1 200 OK\r\n".len());
    }

    #[test]
    fn a_body_until_the_close_ends_with_it_and_no_head_is_not_a_response() {
        let old: &[u8] = b"HTTP/1.0 200 OK\r\n\r\nsome body";
        assert_eq!(read(&[old], false), Ok((Some(200), false, 0)));
        assert_eq!(read(&[old], true), Ok((Some(200), true, 0)));
        let mut reader = ResponseReader::default();
        assert!(!reader.closed());
        assert_eq!(reader.status(), None);
        let cut: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc";
        assert_eq!(read(&[cut], true), Ok((Some(200), false, 0)));
        assert!(read(&[b"garbage\r\n\r\n"], false).is_err());
    }

    /// Every body framing, cut in two at every byte, gives the body
    /// decoded into the sink (and nothing of the head).
    #[test]
    fn the_body_is_captured_whatever_its_framing_and_cuts() {
        let heads = HeadCache::default();
        let cases: [(&[u8], bool); 3] = [
            (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world", false),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
                false,
            ),
            (b"HTTP/1.0 200 OK\r\n\r\nhello world", true),
        ];
        for (whole, until_close) in cases {
            for cut in 0..whole.len() {
                let mut reader = ResponseReader::default();
                let mut body = Vec::new();
                let mut kept = Vec::new();
                for piece in [&whole[..cut], &whole[cut..]] {
                    kept.extend_from_slice(piece);
                    let fed = reader.feed(&heads, &kept, false, Some(&mut body)).unwrap();
                    kept.drain(..fed.used);
                }
                assert!(reader.closed(), "cut at {cut}");
                assert_eq!(
                    body, b"hello world",
                    "cut at {cut}, until close: {until_close}"
                );
            }
        }
    }
}
