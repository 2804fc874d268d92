//! HTTP/2 client connections, on the `h2` crate (the implementation hyper
//! uses): one TCP (or TLS, ALPN `h2`) connection carrying many streams, one
//! stream per request. The request is the same HTTP/1.1 rendering the
//! HTTP/1.1 path writes ([`crate::RequestWriter`]): it is read back into
//! pseudo-headers and fields here, so templates, cookies and defaults have
//! one home whichever protocol carries them.
//!
//! Every way a stream can end is one [`Failure`]: refused streams and
//! streams a GOAWAY left unprocessed are told apart (they never reached the
//! application, so the engine may send them again), other resets and
//! connection errors each have their class, and a broken connection fails
//! its open streams as an HTTP/1.1 connection would.

use crate::stream::Stream;
use crate::{
    append_limited, open_stream, Capture, Captured, ConnectOptions, Failure, Response,
    MAX_CAPTURED_BODY,
};
use bytes::Bytes;
use h2::client::SendRequest;
use h2::Reason;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Duration;

/// Most bytes of response header fields accepted on one stream (HPACK
/// decoded). A larger block fails the stream as `h2_protocol_error`
/// rather than growing memory with what a server sends.
pub const MAX_HEADER_LIST: u32 = 64 * 1024;

/// Flow-control windows offered to the server: 1 MiB per stream and 4 MiB
/// per connection, so a large body is not paced by window updates at
/// loopback speed (h2load offers 1 GiB; browsers 6–15 MiB per connection).
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;

/// One HTTP/2 connection. Its frames are read and written by a task of its
/// own (h2's connection driver), so any number of streams can wait on it;
/// dropping this ends the task and the connection.
pub struct H2Connection {
    send: RefCell<SendRequest<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    /// The keepalive PINGs' task, when asked for.
    keepalive: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for H2Connection {
    fn drop(&mut self) {
        self.driver.abort();
        if let Some(keepalive) = &self.keepalive {
            keepalive.abort();
        }
    }
}

impl H2Connection {
    /// Opens an HTTP/2 connection to `addr`: over TLS, offering what
    /// `options.tls` offers in ALPN (a server that does not choose `h2`
    /// fails it as `h2_not_negotiated`); over cleartext, with prior
    /// knowledge. TCP, TLS and the handshake all within `options.timeout`.
    pub async fn connect(
        addr: SocketAddr,
        options: ConnectOptions<'_>,
    ) -> Result<H2Connection, Failure> {
        let started = tokio::time::Instant::now();
        let stream = open_stream(addr, options.local, options.timeout, options.tls).await?;
        if let Stream::Tls(tls) = &stream {
            if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err(Failure::H2NotNegotiated);
            }
        }
        let left = options.timeout.saturating_sub(started.elapsed());
        Self::handshake(stream, (options.max_streams, options.keepalive), left).await
    }

    /// The HTTP/2 handshake on an open stream (TLS that agreed on `h2`, or
    /// plain TCP with prior knowledge), then one PING answered, within
    /// `timeout`: the server's SETTINGS precede its PING ACK, so the
    /// stream limit it sets is known before the first request, and a
    /// server that does not speak HTTP/2 fails here, not on a request.
    /// `max_streams` caps our streams until then; `keepalive`: a PING this
    /// often from then on (see [`keep_alive`]).
    async fn handshake(
        stream: Stream,
        (max_streams, keepalive): (u32, Option<Duration>),
        timeout: Duration,
    ) -> Result<H2Connection, Failure> {
        let open = async {
            let (send, mut connection) = h2::client::Builder::new()
                .initial_window_size(STREAM_WINDOW)
                .initial_connection_window_size(CONNECTION_WINDOW)
                .max_header_list_size(MAX_HEADER_LIST)
                .initial_max_send_streams(max_streams as usize)
                .enable_push(false)
                .handshake::<_, Bytes>(stream)
                .await
                .map_err(|e| failure_of(&e, false))?;
            let mut ping = connection.ping_pong();
            let dead = std::rc::Rc::new(tokio::sync::Notify::new());
            let gone = dead.clone();
            // On the worker's LocalSet with the streams' tasks: woken
            // streams queue their requests before the driver runs again, so
            // one write carries a whole round of them.
            let driver = tokio::task::spawn_local(async move {
                let unanswered = std::pin::pin!(gone.notified());
                let _ = futures_util::future::select(connection, unanswered).await;
            });
            let mut h2 = H2Connection {
                send: RefCell::new(send),
                driver,
                keepalive: None,
            };
            if let Some(ping) = ping.as_mut() {
                ping.ping(h2::Ping::opaque())
                    .await
                    .map_err(|e| failure_of(&e, false))?;
            }
            if let (Some(every), Some(ping)) = (keepalive, ping) {
                h2.keepalive = Some(tokio::task::spawn_local(keep_alive(ping, every, dead)));
            }
            Ok(h2)
        };
        match tokio::time::timeout(timeout, open).await {
            Err(_) => Err(crate::exchange::timed_out(
                crate::exchange::Phase::Connecting,
            )),
            Ok(result) => result,
        }
    }

    /// Streams the server allows in flight at once on this connection
    /// (its SETTINGS_MAX_CONCURRENT_STREAMS), at most `ours`.
    pub fn stream_limit(&self, ours: u32) -> u32 {
        (self
            .send
            .borrow()
            .current_max_send_streams()
            .min(u32::MAX as usize) as u32)
            .min(ours)
    }

    /// The connection is gone: its task ended (the server closed it, or
    /// an error did).
    pub fn is_closed(&self) -> bool {
        self.driver.is_finished()
    }

    /// Sends `request` on a new stream and reads the whole response,
    /// keeping what `want` asks for in `captured`. `bytes` in the response
    /// counts the DATA frames' payload and the header fields' names and
    /// values. `attempts` counts the stream once it is opened.
    pub async fn exchange(
        &self,
        request: H2Parts,
        want: Capture,
        captured: &mut Captured,
        attempts: &crate::exchange::Attempts,
    ) -> Result<Response, Failure> {
        captured.clear();
        let (head, body) = request;
        let mut stream = self.open_duplex(head, body.is_empty(), attempts).await?;
        if !body.is_empty() {
            stream.send(body, true)?;
        }
        let mut response = Response {
            status: 0,
            bytes: 0,
            keep_alive: true,
        };
        loop {
            match stream.next(want, captured).await? {
                Incoming::Head { status, bytes } => {
                    response.status = status;
                    response.bytes += bytes;
                }
                Incoming::Data(chunk) => {
                    response.bytes += chunk.len() as u64;
                    if want.body {
                        append_limited(&mut captured.body, &chunk, MAX_CAPTURED_BODY);
                    }
                }
                Incoming::End { bytes } => {
                    response.bytes += bytes;
                    return Ok(response);
                }
            }
        }
    }

    /// Opens a stream with request head `head`; its body goes out through
    /// [`Duplex::send`] while the answer is read (a gRPC stream), or none
    /// follows when `ends` (the head carries END_STREAM). `attempts`
    /// counts the stream once opened.
    pub async fn open_duplex(
        &self,
        head: http::Request<()>,
        ends: bool,
        attempts: &crate::exchange::Attempts,
    ) -> Result<Duplex, Failure> {
        // The handle is shared by the connection's streams: borrowed only
        // within a poll, never across an await.
        std::future::poll_fn(|cx| self.send.borrow_mut().poll_ready(cx))
            .await
            .map_err(|e| failure_of(&e, false))?;
        let (response, outgoing) = self
            .send
            .borrow_mut()
            .send_request(head, ends)
            .map_err(|e| failure_of(&e, false))?;
        // Queued for the connection's next write.
        attempts.head_sent();
        Ok(Duplex {
            outgoing,
            answer: Answer::Awaited(response),
        })
    }
}

/// A stream whose request body goes out piece by piece while its answer
/// is read. Dropped before its end, it is reset (h2 sends RST_STREAM
/// CANCEL), as a cancelled call is.
pub struct Duplex {
    outgoing: h2::SendStream<Bytes>,
    answer: Answer,
}

enum Answer {
    Awaited(h2::client::ResponseFuture),
    Body(h2::RecvStream),
    Ended,
}

/// What a stream's answer brought next.
#[derive(Debug)]
pub enum Incoming {
    /// Its head: status, and the header fields' bytes.
    Head { status: u16, bytes: u64 },
    /// A piece of its body (already released to the flow-control window:
    /// read and counted, the server may send as much again).
    Data(Bytes),
    /// Its end, with the trailer fields' bytes (0 without trailers).
    End { bytes: u64 },
}

impl Duplex {
    /// Queues `data` on the request body (h2 sends it as the server's
    /// window allows; a window held at 0 ends as the request's timeout);
    /// `end` closes our side.
    pub fn send(&mut self, data: Bytes, end: bool) -> Result<(), Failure> {
        self.outgoing
            .send_data(data, end)
            .map_err(|e| failure_of(&e, false))
    }

    /// Waits for the next piece of the answer, keeping what `want` asks
    /// for of the head and trailers in `captured` (gRPC's status from the
    /// trailers, or from the head of a trailers-only answer). Safe to drop
    /// unfinished (as in a `select!`): its state is kept here, not in the
    /// future.
    pub async fn next(
        &mut self,
        want: Capture,
        captured: &mut Captured,
    ) -> Result<Incoming, Failure> {
        std::future::poll_fn(|cx| self.poll_next(cx, want, captured)).await
    }

    fn poll_next(
        &mut self,
        cx: &mut std::task::Context<'_>,
        want: Capture,
        captured: &mut Captured,
    ) -> std::task::Poll<Result<Incoming, Failure>> {
        use std::future::Future;
        use std::task::Poll;
        match &mut self.answer {
            Answer::Awaited(response) => {
                let response = match std::pin::Pin::new(response).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(r) => r.map_err(|e| failure_of(&e, false))?,
                };
                let status = response.status().as_u16();
                let bytes = take_head(response.headers(), want, captured);
                if want.grpc {
                    // A trailers-only answer: the status is in the head.
                    grpc_status_of(response.headers(), captured);
                }
                self.answer = Answer::Body(response.into_body());
                Poll::Ready(Ok(Incoming::Head { status, bytes }))
            }
            Answer::Body(body) => match body.poll_data(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(Some(chunk)) => {
                    let chunk = chunk.map_err(|e| failure_of(&e, true))?;
                    let _ = body.flow_control().release_capacity(chunk.len());
                    Poll::Ready(Ok(Incoming::Data(chunk)))
                }
                Poll::Ready(None) if !want.grpc => {
                    self.answer = Answer::Ended;
                    Poll::Ready(Ok(Incoming::End { bytes: 0 }))
                }
                Poll::Ready(None) => {
                    let trailers = match body.poll_trailers(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(t) => t.map_err(|e| failure_of(&e, true))?,
                    };
                    self.answer = Answer::Ended;
                    let mut bytes = 0;
                    if let Some(trailers) = trailers {
                        for (name, value) in &trailers {
                            bytes += (name.as_str().len() + value.len()) as u64;
                        }
                        grpc_status_of(&trailers, captured);
                    }
                    Poll::Ready(Ok(Incoming::End { bytes }))
                }
            },
            Answer::Ended => Poll::Ready(Ok(Incoming::End { bytes: 0 })),
        }
    }

    /// Resets the stream (RST_STREAM CANCEL): the call is given up.
    pub fn cancel(&mut self) {
        self.outgoing.send_reset(Reason::CANCEL);
    }
}

/// gRPC's keepalive: a PING every `every`; one not answered before the
/// next is due ends the connection (`dead`: its driver stops, and its
/// streams fail as on a broken connection), as a gRPC client's keepalive
/// timeout does.
async fn keep_alive(
    mut ping: h2::PingPong,
    every: Duration,
    dead: std::rc::Rc<tokio::sync::Notify>,
) {
    loop {
        tokio::time::sleep(every).await;
        let answered = tokio::time::timeout(every, ping.ping(h2::Ping::opaque())).await;
        if !matches!(answered, Ok(Ok(_))) {
            dead.notify_one();
            return;
        }
    }
}

/// `grpc-status` and `grpc-message` of a head or trailers, when there.
fn grpc_status_of(fields: &http::HeaderMap, captured: &mut Captured) {
    if let Some(code) = fields.get("grpc-status") {
        captured.grpc_status = code.to_str().ok().and_then(|c| c.trim().parse().ok());
        captured.grpc_message = fields
            .get("grpc-message")
            .map(|m| percent_decoded(m.as_bytes()))
            .unwrap_or_default();
    }
}

/// `grpc-message` is percent-encoded UTF-8.
fn percent_decoded(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied(),
            bytes.get(i + 2).copied(),
        ) {
            (b'%', Some(a), Some(b)) if hex(a).is_some() && hex(b).is_some() => {
                out.push((hex(a).unwrap_or(0) * 16 + hex(b).unwrap_or(0)) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A response head's fields (HTTP/2 and HTTP/3 alike): their bytes, names
/// and values, counted; the cookies and fields `want` asks for kept in
/// `captured`.
pub(crate) fn take_head(headers: &http::HeaderMap, want: Capture, captured: &mut Captured) -> u64 {
    let mut received = 0u64;
    for (name, value) in headers {
        received += (name.as_str().len() + value.len()) as u64;
        let keep_cookie = want.set_cookies && name == http::header::SET_COOKIE;
        if keep_cookie || want.headers {
            let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
            if keep_cookie {
                captured.set_cookies.push(text.clone());
            }
            if want.headers {
                captured.headers.push((name.as_str().to_string(), text));
            }
        }
    }
    received
}

/// The failure an h2 error counts as; `answered`: the response's head had
/// arrived.
fn failure_of(e: &h2::Error, answered: bool) -> Failure {
    if let Some(io) = e.get_io() {
        return match crate::exchange_error_class(io) {
            Failure::ConnectionReset | Failure::ClosedMidResponse if !answered => {
                Failure::ClosedBeforeResponse
            }
            Failure::ConnectionReset => Failure::ClosedMidResponse,
            other => other,
        };
    }
    let reason = e.reason();
    if e.is_remote() && e.is_reset() && reason == Some(Reason::REFUSED_STREAM) {
        return Failure::H2Refused;
    }
    if e.is_remote() && e.is_go_away() && reason == Some(Reason::NO_ERROR) && !answered {
        return Failure::H2GoawayUnprocessed;
    }
    if e.is_remote() && e.is_reset() {
        return Failure::H2StreamReset;
    }
    Failure::H2ProtocolError
}

/// Fields HTTP/2 does not carry (RFC 9113 §8.2.2): connection-specific
/// ones, and `Host`, which becomes `:authority`.
fn is_connection_specific(name: &str) -> bool {
    [
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "te",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// A request's head and body, as a stream sends them.
pub type H2Parts = (http::Request<()>, Bytes);

/// A request as HTTP/2 sends it, read back from its HTTP/1.1 rendering:
/// made once for a request without templates (the same every time), and
/// for each send of one with.
#[derive(Clone, Debug)]
pub struct H2Request {
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: Bytes,
}

impl H2Request {
    /// An HTTP/1.1 request (head and body, as written for the wire). Fails
    /// as `malformed_request`: only a template rendering bytes no HTTP
    /// request may hold gets here.
    pub fn from_wire(wire: &[u8], https: bool) -> Result<H2Request, Failure> {
        let mut fields = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Request::new(&mut fields);
        let head_len = match parsed.parse(wire) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return Err(Failure::MalformedRequest),
        };
        let (Some(method), Some(path)) = (parsed.method, parsed.path) else {
            return Err(Failure::MalformedRequest);
        };
        let authority = parsed
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
            .map(|h| h.value)
            .unwrap_or_default();
        let malformed = |_| Failure::MalformedRequest;
        let uri = http::Uri::builder()
            .scheme(if https { "https" } else { "http" })
            .authority(authority)
            .path_and_query(path)
            .build()
            .map_err(malformed)?;
        let mut headers = http::HeaderMap::with_capacity(parsed.headers.len());
        // `te: trailers` is the one TE HTTP/2 allows (gRPC sends it).
        let kept = |h: &&httparse::Header| {
            !is_connection_specific(h.name)
                || (h.name.eq_ignore_ascii_case("te") && h.value.eq_ignore_ascii_case(b"trailers"))
        };
        for h in parsed.headers.iter().filter(kept) {
            let name = http::HeaderName::from_bytes(h.name.as_bytes())
                .map_err(|_| Failure::MalformedRequest)?;
            let value =
                http::HeaderValue::from_bytes(h.value).map_err(|_| Failure::MalformedRequest)?;
            headers.append(name, value);
        }
        Ok(H2Request {
            method: http::Method::from_bytes(method.as_bytes())
                .map_err(|_| Failure::MalformedRequest)?,
            uri,
            headers,
            body: Bytes::copy_from_slice(&wire[head_len..]),
        })
    }

    /// The same request with another body (its `content-length` set to
    /// it): a gRPC message encoded from the JSON its template rendered.
    pub fn with_body(mut self, body: Vec<u8>) -> H2Request {
        self.headers.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(body.len()),
        );
        self.body = Bytes::from(body);
        self
    }

    /// The body as it will be sent.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Head and body to send, this request kept for the next send.
    pub fn to_parts(&self) -> H2Parts {
        self.clone().into_parts()
    }

    /// Head and body to send.
    pub fn into_parts(self) -> H2Parts {
        let mut head = http::Request::new(());
        *head.method_mut() = self.method;
        *head.uri_mut() = self.uri;
        *head.version_mut() = http::Version::HTTP_2;
        *head.headers_mut() = self.headers;
        (head, self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_request_becomes_the_same_http2_request() {
        let mut wire = Vec::new();
        let headers = [
            ("X-Id".to_string(), "42".to_string()),
            ("Cookie".to_string(), "a=b".to_string()),
        ];
        crate::write_request(
            &mut wire,
            "POST",
            "/login?u=1",
            "app.test:8443",
            &headers,
            b"u=ann",
            true,
        )
        .unwrap();
        let (head, body) = H2Request::from_wire(&wire, true).unwrap().into_parts();
        assert_eq!(head.method(), "POST");
        assert_eq!(head.uri().to_string(), "https://app.test:8443/login?u=1");
        assert_eq!(head.version(), http::Version::HTTP_2);
        assert_eq!(head.headers()["x-id"], "42");
        assert_eq!(head.headers()["cookie"], "a=b");
        assert_eq!(head.headers()["content-length"], "5");
        assert!(head.headers().get("host").is_none());
        assert_eq!(&body[..], b"u=ann");
        // `Connection: close` (keep-alive off) has no place in HTTP/2.
        let mut wire = Vec::new();
        crate::write_request(&mut wire, "GET", "/", "h", &[], b"", false).unwrap();
        let (head, body) = H2Request::from_wire(&wire, false).unwrap().to_parts();
        assert!(head.headers().get("connection").is_none());
        assert_eq!(head.uri().to_string(), "http://h/");
        assert!(body.is_empty());
    }

    #[test]
    fn bytes_that_are_no_request_fail_as_malformed() {
        for wire in [
            &b"GET"[..],
            b"\x00\x01\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
        ] {
            assert_eq!(
                H2Request::from_wire(wire, false).err(),
                Some(Failure::MalformedRequest),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }
}
