//! HTTP client: connect, send an encoded request, read one response —
//! HTTP/1.1 here, HTTP/2 in [`h2`] (many streams on one connection),
//! HTTP/3 in [`h3`] (many streams on one QUIC connection).
//!
//! HTTP/1.1: one request at a time per connection (no pipelining). The response body
//! is counted and skipped, never copied, and the read buffer is reused, so a
//! keep-alive exchange allocates nothing. Every failure is one
//! [`Failure`], which the engine counts as an error class.
//!
//! Over 1,000 lines: the HTTP/1.1 connection (connect, write, read one
//! response, early answers, the idle check) is one type whose reads share
//! its buffer and flags; requests' encoding and the failures it reports
//! sit beside it, the rules of an exchange in [`exchange`].

pub mod exchange;
pub mod h2;
pub mod h3;
pub mod reader;
pub mod redact;
pub mod response;
pub mod routes;
pub mod sse;
mod stream;
pub use stream::Stream;
pub mod tls;
pub mod websocket;

pub use response::HeadCache;

use headroom_metrics::ErrorClass;
use response::{append_limited, ChunkedDecoder, Framing};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tls::TlsClient;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Most body bytes kept for checks and extraction, per user; the rest is
/// counted but not kept (checks see the first MiB). A body that reaches it
/// is counted (`limits_reached.body_capture` in results) and warned about.
/// At 16 MiB, 1,000 users could hold 16 GiB.
pub const MAX_CAPTURED_BODY: usize = 1024 * 1024;

/// A captured body buffer larger than this is given back after use, so a
/// user that once read a large body does not keep its buffer.
const KEEP_BODY_CAPACITY: usize = 64 * 1024;

/// Read buffer per connection; grows only for heads larger than this.
const READ_BUFFER: usize = 8 * 1024;

/// The most of a request written in one system call before the worker's
/// other tasks get a turn (see `Connection::write_sliced`).
const WRITE_SLICE: usize = 256 * 1024;

/// Why a connection or an exchange failed. The engine counts each as the
/// error class of the same name (`connect_refused`, `closed_mid_response`,
/// …; the README's table says what each means).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    ConnectRefused,
    ConnectTimeout,
    /// EMFILE/ENFILE: the process is out of file descriptors.
    TooManyOpenFiles,
    ConnectError,
    TlsHandshake,
    RequestTimeout,
    /// RST or a broken pipe.
    ConnectionReset,
    /// EOF before any byte of the response.
    ClosedBeforeResponse,
    ClosedMidResponse,
    MalformedResponse,
    MalformedRequest,
    H2Refused,
    H2GoawayUnprocessed,
    H2StreamReset,
    H2ProtocolError,
    H2NotNegotiated,
    H3Refused,
    H3GoawayUnprocessed,
    H3StreamReset,
    H3ConnectionError,
    H3NotNegotiated,
    QuicIdleTimeout,
    QuicZeroRttRejected,
    WsUpgradeRefused,
    SseRefused,
    WsProtocolError,
    WsMessageTooBig,
    SocketClosed,
}

/// Every failure is counted as the error class of the same name.
impl From<Failure> for ErrorClass {
    fn from(f: Failure) -> ErrorClass {
        use Failure as F;
        match f {
            F::ConnectRefused => ErrorClass::ConnectRefused,
            F::ConnectTimeout => ErrorClass::ConnectTimeout,
            F::TooManyOpenFiles => ErrorClass::TooManyOpenFiles,
            F::ConnectError => ErrorClass::ConnectError,
            F::TlsHandshake => ErrorClass::TlsHandshake,
            F::RequestTimeout => ErrorClass::RequestTimeout,
            F::ConnectionReset => ErrorClass::ConnectionReset,
            F::ClosedBeforeResponse => ErrorClass::ClosedBeforeResponse,
            F::ClosedMidResponse => ErrorClass::ClosedMidResponse,
            F::MalformedResponse => ErrorClass::MalformedResponse,
            F::MalformedRequest => ErrorClass::MalformedRequest,
            F::H2Refused => ErrorClass::H2Refused,
            F::H2GoawayUnprocessed => ErrorClass::H2GoawayUnprocessed,
            F::H2StreamReset => ErrorClass::H2StreamReset,
            F::H2ProtocolError => ErrorClass::H2ProtocolError,
            F::H2NotNegotiated => ErrorClass::H2NotNegotiated,
            F::H3Refused => ErrorClass::H3Refused,
            F::H3GoawayUnprocessed => ErrorClass::H3GoawayUnprocessed,
            F::H3StreamReset => ErrorClass::H3StreamReset,
            F::H3ConnectionError => ErrorClass::H3ConnectionError,
            F::H3NotNegotiated => ErrorClass::H3NotNegotiated,
            F::QuicIdleTimeout => ErrorClass::QuicIdleTimeout,
            F::QuicZeroRttRejected => ErrorClass::QuicZeroRttRejected,
            F::WsUpgradeRefused => ErrorClass::WsUpgradeRefused,
            F::SseRefused => ErrorClass::SseRefused,
            F::WsProtocolError => ErrorClass::WsProtocolError,
            F::WsMessageTooBig => ErrorClass::WsMessageTooBig,
            F::SocketClosed => ErrorClass::SocketClosed,
        }
    }
}

/// The HTTP version asked for (`--http2`, `--http3`, `[http] version`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpVersion {
    /// HTTP/1.1 only.
    #[default]
    Http1,
    /// HTTP/2 only: ALPN `h2` over TLS (a server that does not agree
    /// fails the connection), prior knowledge (h2c) over cleartext.
    Http2,
    /// Over TLS, ALPN `h2,http/1.1` and what the server chooses; over
    /// cleartext, HTTP/1.1.
    Auto,
    /// HTTP/3 over QUIC (`https://` only), ALPN `h3`.
    Http3,
}

impl HttpVersion {
    /// Every version, in the order help texts list them. The one list the
    /// flag's values, the scenario file's parser and its JSON Schema are
    /// made from.
    pub const ALL: [HttpVersion; 4] = [Self::Http1, Self::Http2, Self::Http3, Self::Auto];

    /// Their names as written (`--http-version`'s values).
    pub const NAMES: [&'static str; 4] = {
        let mut names = [""; 4];
        let mut i = 0;
        while i < names.len() {
            names[i] = Self::ALL[i].as_str();
            i += 1;
        }
        names
    };

    /// A version by its name as scenario files and flags write it.
    pub fn parse(text: &str) -> Option<HttpVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// `"1.1", "2", "3" or "auto"`: what an error says was expected.
    pub fn expected() -> String {
        let quoted: Vec<String> = Self::NAMES.iter().map(|n| format!("\"{n}\"")).collect();
        let (last, rest) = quoted.split_last().expect("versions");
        format!("{} or {last}", rest.join(", "))
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Http1 => "1.1",
            Self::Http2 => "2",
            Self::Auto => "auto",
            Self::Http3 => "3",
        }
    }

    /// The ALPN protocols offered in TLS, preferred first.
    pub fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            Self::Http1 => vec![b"http/1.1".to_vec()],
            Self::Http2 => vec![b"h2".to_vec()],
            Self::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            Self::Http3 => vec![b"h3".to_vec()],
        }
    }

    /// Many streams share a connection (HTTP/2 and HTTP/3), rather than
    /// one request at a time on each.
    pub fn multiplexed(self) -> bool {
        matches!(self, Self::Http2 | Self::Http3)
    }
}

/// The protocol a server agreed to speak (what `auto` settles on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
    Http3,
}

/// A method whose request may be sent twice with the effect of once (RFC
/// 9110 §9.2.2): what goes again after a stale connection or a refused
/// stream, and what may go as 0-RTT early data, which can be replayed.
pub fn is_idempotent(method: &str) -> bool {
    ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"]
        .iter()
        .any(|m| m.eq_ignore_ascii_case(method))
}

/// What an HTTP/2 connect asks for beyond the address.
#[derive(Clone, Copy, Debug)]
pub struct ConnectOptions<'a> {
    /// Source address (any free port), when not the kernel's choice.
    pub local: Option<std::net::IpAddr>,
    /// TCP, TLS and the HTTP/2 handshake, all within it.
    pub timeout: Duration,
    pub tls: Option<&'a TlsClient>,
    /// Our cap on streams in flight on one connection.
    pub max_streams: u32,
    /// A PING this often on the connection (gRPC's keepalive); one still
    /// unanswered when the next is due closes it. `None`: none.
    pub keepalive: Option<Duration>,
}

/// TCP, and TLS when `tls` is given, within `timeout`.
pub(crate) async fn open_stream(
    addr: SocketAddr,
    local: Option<std::net::IpAddr>,
    timeout: Duration,
    tls: Option<&TlsClient>,
) -> Result<Stream, Failure> {
    let open = async {
        let tcp = match local {
            None => TcpStream::connect(addr).await,
            Some(ip) => connect_from(ip, addr).await,
        }
        .map_err(|e| connect_error_class(&e))?;
        // Requests are written whole; Nagle would only add delay.
        let _ = tcp.set_nodelay(true);
        match tls {
            None => Ok(Stream::Plain(tcp)),
            Some(tls) => tls
                .connector
                .connect(tls.server_name.clone(), tcp)
                .await
                .map(|s| Stream::Tls(Box::new(s)))
                .map_err(|e| tls_error_class(&e)),
        }
    };
    match tokio::time::timeout(timeout, open).await {
        Err(_) => Err(crate::exchange::timed_out(
            crate::exchange::Phase::Connecting,
        )),
        Ok(result) => result,
    }
}

/// The failure a TLS handshake's error counts as: the server's
/// `no_application_protocol` alert (it speaks none of the protocols
/// offered: `h2` to an HTTP/1.1-only server) is `h2_not_negotiated`.
fn tls_error_class(e: &io::Error) -> Failure {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(e) => tls_failure(e),
        None => Failure::TlsHandshake,
    }
}

/// The failure a TLS session's error counts as (the task path's
/// handshakes and the event loop's sessions alike).
pub fn tls_failure(e: &rustls::Error) -> Failure {
    match e {
        rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) => {
            Failure::H2NotNegotiated
        }
        _ => Failure::TlsHandshake,
    }
}

/// Where requests go: the resolved address and the `Host` header to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub host_header: String,
    /// The URL's host, for TLS server names.
    pub host: String,
    pub https: bool,
    /// `Basic …` credentials from the URL's `user:password@`, sent as the
    /// `Authorization` header (as curl does) unless a request sets its own.
    pub basic_auth: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("`{0}` is not a valid URL (expected e.g. http://127.0.0.1:8080/path)")]
    InvalidUrl(String),
    #[error(
        "unsupported scheme `{0}://` (headroom speaks http://; https:// comes with TLS support)"
    )]
    Scheme(String),
    #[error("URL `{0}` has no host")]
    NoHost(String),
    #[error("cannot resolve host `{host}`: {reason}")]
    Resolve { host: String, reason: String },
}

impl Endpoint {
    /// Parses and resolves an `http://` or `https://` URL. Returns the
    /// endpoint and the path with query (the request target).
    pub fn from_url(text: &str) -> Result<(Endpoint, String), EndpointError> {
        Self::from_url_via(text, &routes::Routes::default())
    }

    /// [`Endpoint::from_url`], connecting where `routes` say (curl's
    /// `--connect-to` / `--resolve`) while the `Host` header stays the URL's.
    pub fn from_url_via(
        text: &str,
        routes: &routes::Routes,
    ) -> Result<(Endpoint, String), EndpointError> {
        let url = url::Url::parse(text).map_err(|_| EndpointError::InvalidUrl(text.into()))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(EndpointError::Scheme(url.scheme().into()));
        }
        let host = url
            .host_str()
            .ok_or_else(|| EndpointError::NoHost(text.into()))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let addr = routes
            .address(host, port)
            .map_err(|reason| EndpointError::Resolve {
                host: host.into(),
                reason,
            })?;
        let host_header = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let basic_auth = (!url.username().is_empty() || url.password().is_some()).then(|| {
            use base64::Engine;
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            };
            let pair = format!(
                "{}:{}",
                decode(url.username()),
                decode(url.password().unwrap_or(""))
            );
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        let mut target = url.path().to_string();
        if let Some(q) = url.query() {
            target.push('?');
            target.push_str(q);
        }
        Ok((
            Endpoint {
                addr,
                host_header,
                host: host.to_string(),
                https: url.scheme() == "https",
                basic_auth,
            },
            target,
        ))
    }
}

/// Encodes a request once, ahead of the run; the hot path only writes it.
pub fn encode_request(
    method: &str,
    target: &str,
    host: &str,
    headers: &[(String, String)],
    body: &[u8],
    keep_alive: bool,
) -> Result<Vec<u8>, InvalidHeaderValue> {
    let mut out = Vec::with_capacity(128 + body.len());
    write_request(&mut out, method, target, host, headers, body, keep_alive)?;
    Ok(out)
}

/// Appends an HTTP/1.1 request to `out`. `Host`, `User-Agent` and `Accept`
/// are added unless `headers` sets them; `Content-Length` when there is a
/// body (or the method usually has one).
pub fn write_request(
    out: &mut Vec<u8>,
    method: &str,
    target: &str,
    host: &str,
    headers: &[(String, String)],
    body: &[u8],
    keep_alive: bool,
) -> Result<(), InvalidHeaderValue> {
    let sets_host = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host"));
    let mut head = RequestWriter::start(out, method, target, (!sets_host).then_some(host));
    for (k, v) in headers {
        head.header(k, |out| out.extend_from_slice(v.as_bytes()));
    }
    head.finish(keep_alive, |out| out.extend_from_slice(body))
}

/// Writes a request into a buffer as it is made — the request line and
/// `Host` (first, as RFC 9112 asks), each header's value written in place
/// by the caller (a template rendering straight into it), then the defaults
/// and the body — so a request built per send makes no string of its own.
pub struct RequestWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Where this request begins in `out`.
    begin: usize,
    method_has_body: bool,
    has_user_agent: bool,
    has_accept: bool,
    /// The first header whose value would break the head.
    invalid_header: Option<String>,
}

/// A header value with a line break, a NUL or another control character
/// (RFC 9110 §5.5 allows only tab): the request is not sent.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("header `{0}`: its value holds a line break, a NUL or another control character")]
pub struct InvalidHeaderValue(pub String);

/// A byte no header value may hold: a control character other than tab.
pub fn is_control(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

/// Bytes percent-encoded in a request target (RFC 3986 allows none of
/// them there): controls, space, `"`, `#`, `<`, `>`, `\`, `^`, `` ` ``,
/// `{`, `|`, `}` — and every non-ASCII byte. `%` stays: a target may be
/// percent-encoded already.
pub const NOT_IN_TARGET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

impl<'a> RequestWriter<'a> {
    /// `host`: the `Host` header's value, unless the caller sets its own.
    /// `target` is the origin form (`/path?query`). Bytes no request target may hold (controls, spaces, quotes,
    /// non-ASCII, `#`, …) are percent-encoded as they are written: the
    /// request line is always one valid line.
    pub fn start(
        out: &'a mut Vec<u8>,
        method: &str,
        target: &str,
        host: Option<&str>,
    ) -> RequestWriter<'a> {
        let begin = out.len();
        out.extend_from_slice(method.as_bytes());
        out.push(b' ');
        // Origin form begins with `/` (RFC 9112 §3.2.1: an empty path is
        // sent as `/`), whatever a value rendered into it.
        if !target.starts_with('/') {
            out.push(b'/');
        }
        for piece in percent_encoding::utf8_percent_encode(target, NOT_IN_TARGET) {
            out.extend_from_slice(piece.as_bytes());
        }
        out.extend_from_slice(b" HTTP/1.1\r\n");
        if let Some(host) = host {
            for part in [b"Host: ", host.as_bytes(), b"\r\n"] {
                out.extend_from_slice(part);
            }
        }
        RequestWriter {
            out,
            begin,
            method_has_body: matches!(method, "POST" | "PUT" | "PATCH"),
            has_user_agent: false,
            has_accept: false,
            invalid_header: None,
        }
    }

    /// A header; `value` appends the value's bytes. A value holding a line
    /// break or a NUL would end the header (or the head) early, and other
    /// controls make it invalid: the request is refused by
    /// [`RequestWriter::finish`].
    pub fn header(&mut self, name: &str, value: impl FnOnce(&mut Vec<u8>)) {
        self.has_user_agent |= name.eq_ignore_ascii_case("user-agent");
        self.has_accept |= name.eq_ignore_ascii_case("accept");
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b": ");
        let start = self.out.len();
        value(self.out);
        if self.invalid_header.is_none() && self.out[start..].iter().any(|&b| is_control(b)) {
            self.invalid_header = Some(name.to_string());
        }
        self.out.extend_from_slice(b"\r\n");
    }

    /// The default headers the caller did not set, `Content-Length`, the
    /// blank line and the body (`body` appends it; its length is measured,
    /// then the length header is put before it). Fails, the buffer then
    /// holding no request to send, when a header value was invalid.
    pub fn finish(
        self,
        keep_alive: bool,
        body: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), InvalidHeaderValue> {
        if let Some(name) = self.invalid_header {
            self.out.truncate(self.begin);
            return Err(InvalidHeaderValue(name));
        }
        let out = self.out;
        if !self.has_user_agent {
            out.extend_from_slice(
                concat!("User-Agent: headroom/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
            );
        }
        if !self.has_accept {
            out.extend_from_slice(b"Accept: */*\r\n");
        }
        if !keep_alive {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        let head_end = out.len();
        body(out);
        let body_len = out.len() - head_end;
        let mut digits = [0u8; 20];
        let length: &[&[u8]] = if body_len > 0 || self.method_has_body {
            &[
                b"Content-Length: ",
                decimal(body_len, &mut digits),
                b"\r\n\r\n",
            ]
        } else {
            &[b"\r\n"]
        };
        let mut tail = [0u8; 48];
        let mut n = 0;
        for part in length {
            tail[n..n + part.len()].copy_from_slice(part);
            n += part.len();
        }
        // The body is short next to a syscall: moving it is cheaper than
        // rendering it into a buffer of its own.
        out.splice(head_end..head_end, tail[..n].iter().copied());
        Ok(())
    }
}

/// `request` with more headers, written into `out`: before the blank line
/// that ends its head.
pub fn with_headers<'n, 'v>(
    request: &[u8],
    headers: impl IntoIterator<Item = (&'n str, &'v str)>,
    out: &mut Vec<u8>,
) {
    out.clear();
    let head_end = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(request.len(), |p| p + 2);
    out.extend_from_slice(&request[..head_end]);
    for (name, value) in headers {
        for part in [name.as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
            out.extend_from_slice(part);
        }
    }
    out.extend_from_slice(&request[head_end..]);
}

/// An encoded request's header fields (request line left out) and body,
/// as text: what a script sees of a request the plan encoded once.
pub fn split_request(request: &[u8]) -> (Vec<(String, String)>, String) {
    let head_end = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(request.len());
    let head = String::from_utf8_lossy(&request[..head_end]);
    let headers = head
        .split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let body = request.get(head_end + 4..).unwrap_or_default();
    (headers, String::from_utf8_lossy(body).into_owned())
}

/// `n` in decimal, written into the end of `buf`.
fn decimal(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// What to keep of a response, beyond its status and size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capture {
    pub headers: bool,
    pub set_cookies: bool,
    pub body: bool,
    /// gRPC: its `grpc-status` and `grpc-message` (trailers, or the head
    /// of a trailers-only answer), into `Captured::grpc_*`.
    pub grpc: bool,
}

/// What was kept (buffers reused from one request to the next).
#[derive(Clone, Debug, Default)]
pub struct Captured {
    pub headers: Vec<(String, String)>,
    pub set_cookies: Vec<String>,
    pub body: Vec<u8>,
    /// gRPC: the answer's status (`None`: it sent none) and message.
    pub grpc_status: Option<u32>,
    pub grpc_message: String,
}

impl Captured {
    pub fn clear(&mut self) {
        self.headers.clear();
        self.set_cookies.clear();
        self.body.clear();
        self.grpc_status = None;
        self.grpc_message.clear();
        if self.body.capacity() > KEEP_BODY_CAPACITY {
            self.body.shrink_to(KEEP_BODY_CAPACITY);
        }
    }

    /// The body reached [`MAX_CAPTURED_BODY`]: checks saw only its start.
    pub fn body_at_limit(&self) -> bool {
        self.body.len() >= MAX_CAPTURED_BODY
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Keeps what `want` asks for of the response head `head`.
    pub fn keep_head(&mut self, head: &[u8], want: Capture) {
        // An obsolete fold (a line break and the next line's leading
        // blanks) reads as one space (RFC 9112 §5.2).
        let text = |value: &[u8]| {
            let value = String::from_utf8_lossy(value);
            if !value.contains('\n') {
                return value.into_owned();
            }
            let lines = value.split('\n').map(|l| l.trim_end_matches('\r'));
            let lines: Vec<&str> = lines
                .enumerate()
                .map(|(i, l)| {
                    if i == 0 {
                        l
                    } else {
                        l.trim_start_matches([' ', '\t'])
                    }
                })
                .collect();
            lines.join(" ")
        };
        let _ = response::with_head(head, |response, _| {
            for h in response.headers.iter() {
                if want.set_cookies && h.name.eq_ignore_ascii_case("set-cookie") {
                    self.set_cookies.push(text(h.value));
                }
                if want.headers {
                    self.headers.push((h.name.to_string(), text(h.value)));
                }
            }
        });
    }
}

/// What was read for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Bytes read from the socket for this response (head and body).
    pub bytes: u64,
    /// The connection may carry the next request.
    pub keep_alive: bool,
}

/// What a kept-alive connection's socket says when it is about to be
/// reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Nothing happened while it sat idle: reuse it.
    Open,
    /// The server closed it (EOF or RST) while it sat idle — its keep-alive
    /// timeout was shorter than the pause. Reconnect.
    Closed,
    /// The server sent bytes while no request was outstanding: a protocol
    /// error. Close it and reconnect.
    UnrequestedBytes,
}

pub struct Connection {
    stream: Stream,
    buf: Vec<u8>,
    /// Exchanges completed on this connection: more than 0 means the next
    /// one reuses it.
    completed: u64,
    /// The current (or last) exchange read at least one byte.
    answered: bool,
    /// The last read was reset before any byte of the answer came.
    reset_unanswered: bool,
    /// Shared with the other connections to the same server.
    heads: Rc<HeadCache>,
}

/// Connects to `addr` from source address `ip` (any free port).
async fn connect_from(ip: std::net::IpAddr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = if ip.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(addr).await
}

impl Connection {
    /// Opens a TCP connection (and the TLS session, when `tls` is given),
    /// all within `timeout`; from source address `local` when given (one
    /// source address reaches one destination through at most ~28k
    /// ephemeral ports). `heads` is the server's head cache, shared by its
    /// connections.
    pub async fn connect(
        addr: SocketAddr,
        local: Option<std::net::IpAddr>,
        timeout: Duration,
        tls: Option<&TlsClient>,
        heads: Rc<HeadCache>,
    ) -> Result<Connection, Failure> {
        let stream = open_stream(addr, local, timeout, tls).await?;
        Ok(Connection::over(stream, heads))
    }

    fn over(stream: Stream, heads: Rc<HeadCache>) -> Connection {
        Connection {
            stream,
            buf: Vec::with_capacity(READ_BUFFER),
            completed: 0,
            answered: false,
            reset_unanswered: false,
            heads,
        }
    }

    /// The next exchange goes on a connection that has carried one before.
    pub fn is_reused(&self) -> bool {
        self.completed > 0
    }

    /// Before reusing the connection: one look at the socket without
    /// waiting. A server whose keep-alive timeout is shorter than the
    /// user's think time has closed it meanwhile; sending on it would fail
    /// a request the server never receives.
    pub fn check_idle(&mut self) -> Idle {
        if !self.buf.is_empty() {
            return Idle::UnrequestedBytes;
        }
        let mut spare = [0u8; 64];
        match self.stream.read_idle(&mut spare) {
            None => Idle::Open,
            Some(Ok(0)) | Some(Err(_)) => Idle::Closed,
            Some(Ok(_)) => Idle::UnrequestedBytes,
        }
    }

    /// Gives the read buffer back while the connection waits (a user's
    /// think time): an idle keep-alive connection then holds no buffer,
    /// and the next read allocates one. The read buffer only when nothing
    /// unread is in it.
    pub fn release_buffer(&mut self) {
        if self.buf.is_empty() {
            self.buf = Vec::new();
        }
    }

    /// A byte of the last exchange's response came back (see
    /// [`exchange::is_stale`]).
    pub fn answered(&self) -> bool {
        self.answered
    }

    /// Reads what has arrived (at most the buffer's spare room) onto the
    /// end of the buffer; 0 at the end of the stream. Not an async fn: the
    /// future it returns has no state of its own to step through, which is
    /// one cache line less per request at 1,000 connections.
    fn read_more(&mut self) -> impl Future<Output = Result<usize, Failure>> + '_ {
        std::future::poll_fn(move |cx| self.poll_read_more(cx))
    }

    fn poll_read_more(&mut self, cx: &mut Context<'_>) -> Poll<Result<usize, Failure>> {
        if self.buf.capacity() - self.buf.len() < 1024 {
            self.buf.reserve(READ_BUFFER);
        }
        let n = ready!(tokio_util::io::poll_read_buf(
            Pin::new(&mut self.stream),
            cx,
            &mut self.buf
        ))
        .map_err(|e| {
            self.reset_unanswered =
                exchange::head_discarded(e.kind(), self.answered || !self.buf.is_empty());
            exchange_error_class(&e)
        })?;
        self.answered |= n > 0;
        Poll::Ready(Ok(n))
    }

    /// The answer a server sent before it had read the whole request, then
    /// closed (an early `413 Content Too Large`, a `401` to an upload): the
    /// write failed, but what arrived is still there to read, as curl and
    /// browsers read it. Its head is enough: the status is what happened.
    fn early_answer(
        &mut self,
        head_request: bool,
        want: Capture,
        captured: &mut Captured,
    ) -> Option<Response> {
        let mut spare = [0u8; 16 * 1024];
        while self.buf.len() <= response::MAX_HEAD {
            match self.stream.read_idle(&mut spare) {
                Some(Ok(n)) if n > 0 => self.buf.extend_from_slice(&spare[..n]),
                _ => break,
            }
        }
        let head = self.heads.parse(&self.buf, head_request).ok()??;
        if (100..200).contains(&head.status) {
            return None;
        }
        if want.headers || (want.set_cookies && head.sets_cookie) {
            captured.keep_head(&self.buf[..head.len], want);
        }
        self.answered = true;
        Some(Response {
            status: head.status,
            bytes: self.buf.len() as u64,
            keep_alive: false,
        })
    }

    /// Writes `request` a slice at a time, letting the worker's other
    /// tasks run between slices: a 5 MB body copied into a socket with
    /// room for it is one long system call, which would hold up every
    /// arrival due meanwhile (send lag the generator did not need). The
    /// head counts in `attempts` once it is out, before the body (see
    /// [`exchange::Attempts::wrote`]).
    async fn write_sliced(
        &mut self,
        request: &[u8],
        attempts: &exchange::Attempts,
    ) -> std::io::Result<()> {
        attempts.writing();
        let (head, body) = request.split_at(exchange::head_end(request));
        for (i, slice) in head.chunks(WRITE_SLICE).enumerate() {
            if i > 0 {
                tokio::task::yield_now().await;
            }
            self.stream.write_all(slice).await?;
        }
        if !body.is_empty() {
            // TLS buffers writes: the head's records out before the body.
            self.stream.flush().await?;
        }
        attempts.wrote(head.len(), request);
        for slice in body.chunks(WRITE_SLICE) {
            tokio::task::yield_now().await;
            self.stream.write_all(slice).await?;
        }
        // TLS buffers writes; the flush is a no-op for plain TCP.
        self.stream.flush().await
    }

    /// Sends `request` and reads only the response's head — a WebSocket
    /// upgrade's `101`, or an event stream whose body goes on — keeping
    /// what `want` asks for in `captured`. What came after the head stays
    /// buffered for [`Connection::into_parts`].
    pub async fn open_stream(
        &mut self,
        request: &[u8],
        want: Capture,
        captured: &mut Captured,
        attempts: &exchange::Attempts,
    ) -> Result<response::Head, Failure> {
        captured.clear();
        self.write_sliced(request, attempts)
            .await
            .map_err(|e| exchange_error_class(&e))?;
        loop {
            match self.heads.parse(&self.buf, false) {
                Err(_) => return Err(Failure::MalformedResponse),
                Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                    self.buf.drain(..h.len);
                }
                Ok(Some(h)) => {
                    captured.keep_head(&self.buf[..h.len], want);
                    self.buf.drain(..h.len);
                    return Ok(h);
                }
                Ok(None) => {
                    if self.read_more().await? == 0 {
                        return Err(exchange::closed_early(!self.buf.is_empty()));
                    }
                }
            }
        }
    }

    /// The socket and the bytes read past the last response head: what a
    /// protocol taking the connection over starts from.
    pub fn into_parts(self) -> (Stream, Vec<u8>) {
        (self.stream, self.buf)
    }

    /// Sends `request` and reads one complete response, keeping what
    /// `want` asks for in `captured`; `attempts` counts the request's head
    /// once it is written. On error the connection must not be
    /// reused.
    ///
    /// Bytes after the end of the response are a protocol error
    /// (`MalformedResponse`): with one request outstanding, nothing else may
    /// arrive, and reading them as the next response would count an answer
    /// the server never gave to that request.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        head_request: bool,
        want: Capture,
        captured: &mut Captured,
        attempts: &exchange::Attempts,
    ) -> Result<Response, Failure> {
        self.answered = !self.buf.is_empty();
        captured.clear();
        if let Err(e) = self.write_sliced(request, attempts).await {
            if let Some(response) = self.early_answer(head_request, want, captured) {
                attempts.answered_anyway();
                return Ok(response);
            }
            return Err(exchange_error_class(&e));
        }
        let mut received = 0u64;
        let head = loop {
            match self.heads.parse(&self.buf, head_request) {
                Err(_) => return Err(Failure::MalformedResponse),
                // Interim responses (100 Continue, 103 Early Hints) precede the real one.
                Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                    self.buf.drain(..h.len);
                    continue;
                }
                Ok(Some(h)) => break h,
                Ok(None) => {}
            }
            let n = match self.read_more().await {
                Ok(n) => n,
                Err(failure) => {
                    if self.reset_unanswered {
                        attempts.head_discarded();
                    }
                    return Err(failure);
                }
            };
            if n == 0 {
                return Err(exchange::closed_early(received > 0 || !self.buf.is_empty()));
            }
            received += n as u64;
        };
        // A second look at the headers only when something needs them.
        if want.headers || (want.set_cookies && head.sets_cookie) {
            captured.keep_head(&self.buf[..head.len], want);
        }
        // Body bytes are appended to `body` only when a check needs them.
        let body = want.body.then_some(&mut captured.body);
        let keep_alive = self.read_body(&head, body, &mut received).await?;
        if !self.buf.is_empty() {
            return Err(Failure::MalformedResponse);
        }
        self.completed += 1;
        Ok(Response {
            status: head.status,
            bytes: received,
            keep_alive,
        })
    }

    /// The body of the response whose `head` starts the buffer, read by
    /// its framing; `body` keeps what of it a check needs. Adds the bytes
    /// read to `received`; whether the connection may carry another
    /// request.
    async fn read_body(
        &mut self,
        head: &response::Head,
        mut body: Option<&mut Vec<u8>>,
        received: &mut u64,
    ) -> Result<bool, Failure> {
        fn keep(body: &mut Option<&mut Vec<u8>>, data: &[u8]) {
            if let Some(body) = body.as_mut() {
                append_limited(body, data, MAX_CAPTURED_BODY);
            }
        }
        let mut keep_alive = head.keep_alive;
        match head.framing {
            Framing::Empty => {
                self.buf.drain(..head.len);
            }
            Framing::Length(length) => {
                let have = (self.buf.len() - head.len) as u64;
                if have >= length {
                    keep(&mut body, &self.buf[head.len..head.len + length as usize]);
                    self.buf.drain(..head.len + length as usize);
                } else {
                    keep(&mut body, &self.buf[head.len..]);
                    let mut remaining = length - have;
                    self.buf.clear();
                    while remaining > 0 {
                        let n = self.read_more().await?;
                        if n == 0 {
                            return Err(Failure::ClosedMidResponse);
                        }
                        *received += n as u64;
                        if n as u64 > remaining {
                            keep(&mut body, &self.buf[..remaining as usize]);
                            self.buf.drain(..remaining as usize);
                            remaining = 0;
                        } else {
                            keep(&mut body, &self.buf);
                            remaining -= n as u64;
                            self.buf.clear();
                        }
                    }
                }
            }
            Framing::Chunked => {
                let mut decoder = ChunkedDecoder::default();
                let used = decoder
                    .feed_into(
                        &self.buf[head.len..],
                        body.as_deref_mut().map(|v| (v, MAX_CAPTURED_BODY)),
                    )
                    .map_err(|_| Failure::MalformedResponse)?;
                self.buf.drain(..head.len + used);
                while !decoder.is_done() {
                    let n = self.read_more().await?;
                    if n == 0 {
                        return Err(Failure::ClosedMidResponse);
                    }
                    *received += n as u64;
                    let used = decoder
                        .feed_into(
                            &self.buf,
                            body.as_deref_mut().map(|v| (v, MAX_CAPTURED_BODY)),
                        )
                        .map_err(|_| Failure::MalformedResponse)?;
                    self.buf.drain(..used);
                }
            }
            Framing::UntilClose => {
                // The close is the end of the body: a complete response,
                // after which the caller reconnects.
                keep(&mut body, &self.buf[head.len..]);
                self.buf.clear();
                loop {
                    let n = self.read_more().await?;
                    if n == 0 {
                        break;
                    }
                    *received += n as u64;
                    keep(&mut body, &self.buf);
                    self.buf.clear();
                }
                keep_alive = false;
            }
        }
        Ok(keep_alive)
    }
}

fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// The failure a connect's I/O error counts as.
pub fn connect_error_class(e: &io::Error) -> Failure {
    if is_fd_exhaustion(e) {
        Failure::TooManyOpenFiles
    } else if e.kind() == io::ErrorKind::ConnectionRefused {
        Failure::ConnectRefused
    } else if e.kind() == io::ErrorKind::TimedOut {
        Failure::ConnectTimeout
    } else {
        Failure::ConnectError
    }
}

/// The failure an I/O error while sending or reading counts as.
pub fn exchange_error_class(e: &io::Error) -> Failure {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => Failure::ClosedMidResponse,
        io::ErrorKind::TimedOut => Failure::RequestTimeout,
        _ => Failure::ConnectionReset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_from_url() {
        let (e, target) = Endpoint::from_url("http://127.0.0.1:8080/hello?x=1").unwrap();
        assert_eq!(e.addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(e.host_header, "127.0.0.1:8080");
        assert_eq!(target, "/hello?x=1");
        let (e, _) = Endpoint::from_url("https://127.0.0.1/").unwrap();
        assert!(e.https);
        assert_eq!(e.addr.port(), 443);
        let (e, target) = Endpoint::from_url("http://[::1]/").unwrap();
        assert_eq!(e.addr, "[::1]:80".parse().unwrap());
        assert_eq!(target, "/");
        assert!(matches!(
            Endpoint::from_url("ftp://127.0.0.1/"),
            Err(EndpointError::Scheme(_))
        ));
        assert!(matches!(
            Endpoint::from_url("127.0.0.1:80"),
            Err(EndpointError::Scheme(_) | EndpointError::InvalidUrl(_))
        ));
        assert!(Endpoint::from_url("not a url").is_err());
        assert_eq!(e.basic_auth, None);
        let (e, _) = Endpoint::from_url("http://al%20ice:p%40ss@127.0.0.1/").unwrap();
        // base64("al ice:p@ss")
        assert_eq!(e.basic_auth.as_deref(), Some("Basic YWwgaWNlOnBAc3M="));
        assert_eq!(e.host_header, "127.0.0.1");
    }

    #[test]
    fn a_target_is_one_valid_token_and_a_header_value_never_a_line() {
        let mut out = b"kept".to_vec();
        let mut head = RequestWriter::start(&mut out, "GET", "a b\r\n\"#{é}%41", None);
        head.header("X-A", |o| o.extend_from_slice(b"tab\tok"));
        head.finish(true, |_| {}).unwrap();
        assert!(out.starts_with(
            b"keptGET /a%20b%0D%0A%22%23%7B%C3%A9%7D%41 HTTP/1.1\r\nX-A: tab\tok\r\n"
        ));
        for bad in [
            &b"1\r\nX-Injected: 2"[..],
            b"a\nb",
            b"nul\0",
            b"bell\x07",
            b"del\x7f",
        ] {
            let mut out = b"kept".to_vec();
            let mut head = RequestWriter::start(&mut out, "GET", "/", None);
            head.header("X-A", |o| o.extend_from_slice(bad));
            assert_eq!(
                head.finish(true, |_| {}),
                Err(InvalidHeaderValue("X-A".into()))
            );
            assert_eq!(out, b"kept", "nothing of the refused request is left");
        }
    }

    #[test]
    fn encoded_request_is_valid_http() {
        let bytes = encode_request(
            "POST",
            "/a",
            "h:1",
            &[("X-Test".into(), "1".into())],
            b"body",
            false,
        )
        .unwrap();
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        let len = req.parse(&bytes).unwrap().unwrap();
        assert_eq!(req.method, Some("POST"));
        assert_eq!(&bytes[len..], b"body");
        let names: Vec<_> = req.headers.iter().map(|h| h.name).collect();
        assert!(names.contains(&"Connection"));
        assert!(names.contains(&"Content-Length"));
    }

    #[test]
    fn a_request_written_in_place_is_the_one_expected() {
        let mut out = b"stale".to_vec();
        out.clear();
        let mut head = RequestWriter::start(&mut out, "POST", "/login?u=1", Some("h:8"));
        head.header("X-Id", |o| o.extend_from_slice(b"42"));
        head.finish(true, |o| o.extend_from_slice(b"user=ann&password=secret"))
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "POST /login?u=1 HTTP/1.1\r\nHost: h:8\r\nX-Id: 42\r\n\
                 User-Agent: headroom/{}\r\nAccept: */*\r\nContent-Length: 24\r\n\r\n\
                 user=ann&password=secret",
                env!("CARGO_PKG_VERSION")
            )
        );
        // A GET has no length; a POST without a body says 0; the caller's
        // own Host, User-Agent and Accept replace the defaults.
        let mut out = Vec::new();
        let own = [
            ("host".to_string(), "app1.test".to_string()),
            ("Accept".to_string(), "text/html".to_string()),
            ("user-agent".to_string(), "me".to_string()),
        ];
        write_request(&mut out, "GET", "/", "h:8", &own, b"", false).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET / HTTP/1.1\r\nhost: app1.test\r\nAccept: text/html\r\nuser-agent: me\r\n\
             Connection: close\r\n\r\n"
        );
        let mut out = Vec::new();
        write_request(&mut out, "POST", "/", "h", &[], b"", true).unwrap();
        assert!(out.ends_with(b"Content-Length: 0\r\n\r\n"));
    }

    #[test]
    fn decimals() {
        let mut buf = [0u8; 20];
        for n in [0, 7, 10, 12_345, usize::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }
}
