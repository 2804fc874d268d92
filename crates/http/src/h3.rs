//! HTTP/3 client connections over QUIC, on `quinn` (QUIC) and `h3` (the
//! HTTP/3 framing, hyperium's, the family of `h2`): one QUIC connection
//! carrying many streams, one stream per request, as [`crate::h2`] does over
//! TCP. The request is the same one HTTP/2 sends ([`H2Parts`]: pseudo-headers
//! read back from the HTTP/1.1 rendering), so templates, cookies and defaults
//! keep one home.
//!
//! Every way a stream can end is one [`Failure`]: a stream the server
//! rejected (H3_REQUEST_REJECTED) or that its GOAWAY left unsent never
//! reached the application (the engine may send it again); other resets,
//! connection closes and an idle connection (the server stopped answering)
//! each have their class.

use crate::h2::H2Parts;
use crate::{append_limited, Capture, Captured, Failure, Response, MAX_CAPTURED_BODY};
use bytes::{Buf, Bytes};
use h3::error::{Code, ConnectionError, StreamError};
use h3::quic::ConnectionErrorIncoming;
use headroom_metrics::{h3_code_index, QuicStats, H3_CODES};
use std::cell::{Cell, RefCell};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Receive windows offered to the server: 1 MiB per stream and 4 MiB per
/// connection, as over HTTP/2, so a large body is not paced by window
/// updates at loopback speed.
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;

/// Socket buffers asked of the kernel for a generator thread's UDP socket:
/// every connection of the thread shares it, and a burst of responses
/// larger than the receive buffer is dropped (then lost and sent again).
pub const UDP_BUFFER: usize = 4 * 1024 * 1024;

/// Most bytes of response header fields accepted on one stream.
const MAX_FIELD_SECTION: u64 = 64 * 1024;

/// A generator thread's QUIC endpoint: one UDP socket for all of the
/// thread's HTTP/3 connections (quinn tells them apart by connection id).
#[derive(Clone)]
pub struct QuicEndpoint {
    endpoint: quinn::Endpoint,
    /// What the kernel gave for the socket's receive and send buffers
    /// (it may cap what was asked: `net.core.rmem_max`, `wmem_max`).
    pub buffers: UdpBuffers,
}

/// A UDP socket's buffer sizes, asked and given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpBuffers {
    pub asked: usize,
    pub receive: usize,
    pub send: usize,
}

impl UdpBuffers {
    /// The kernel gave less than asked (Linux reports twice what it keeps
    /// for bookkeeping, so half of the asked size is the bar).
    pub fn capped(&self) -> bool {
        self.receive < self.asked || self.send < self.asked
    }
}

/// What the kernel allows a socket's buffers without privileges
/// (`net.core.rmem_max`, `net.core.wmem_max`), when it says.
pub fn kernel_udp_buffer_caps() -> Option<(usize, usize)> {
    let read = |name: &str| -> Option<usize> {
        std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("rmem_max")?, read("wmem_max")?))
}

impl QuicEndpoint {
    /// A client endpoint on a UDP socket bound to `local` (any port), or
    /// to the unspecified address of `peer`'s family. Must be called
    /// within a tokio runtime (the endpoint's driver runs on it).
    pub fn bind(local: Option<IpAddr>, peer: SocketAddr) -> std::io::Result<QuicEndpoint> {
        let ip = local.unwrap_or(match peer {
            SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        });
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(peer),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        let _ = socket.set_recv_buffer_size(UDP_BUFFER);
        let _ = socket.set_send_buffer_size(UDP_BUFFER);
        socket.bind(&SocketAddr::new(ip, 0).into())?;
        let buffers = UdpBuffers {
            asked: UDP_BUFFER,
            // Linux doubles what it was given (the other half is its own).
            receive: socket.recv_buffer_size()? / 2,
            send: socket.send_buffer_size()? / 2,
        };
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            None,
            socket.into(),
            Arc::new(quinn::TokioRuntime),
        )?;
        Ok(QuicEndpoint { endpoint, buffers })
    }
}

/// Our QUIC transport settings for a client connection.
fn transport(idle_timeout: Duration) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    transport
        .stream_receive_window(STREAM_WINDOW.into())
        .receive_window(CONNECTION_WINDOW.into())
        // The server opens no request streams; its control, QPACK and
        // (refused) push streams are unidirectional.
        .max_concurrent_bidi_streams(0u32.into());
    if let Ok(idle) = quinn::IdleTimeout::try_from(idle_timeout) {
        transport.max_idle_timeout(Some(idle));
        // Kept alive between requests (think times, a slow open model),
        // as HTTP/1.1 and HTTP/2 connections are; a server that stopped
        // answering still times out, its PINGs unanswered.
        transport.keep_alive_interval(Some(idle_timeout / 3));
    }
    transport
}

/// One HTTP/3 connection. h3's connection driver (control streams, QPACK,
/// GOAWAY) runs as a task of its own on the worker's `LocalSet`; dropping
/// this ends it and closes the connection.
pub struct H3Connection {
    send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    quic: quinn::Connection,
    driver: tokio::task::JoinHandle<()>,
    /// Time until the connection could carry requests: the 1-RTT
    /// handshake, or (resumed with 0-RTT) until its early data could go.
    pub handshake: Duration,
    /// Stream resets from the server, by HTTP/3 error code.
    resets: RefCell<[u64; H3_CODES + 1]>,
    /// Time to first byte of each response, µs.
    ttfb: RefCell<hdrhistogram::Histogram<u64>>,
    /// 0-RTT: how the server took the early data (`None`: not resumed).
    /// A cell, not a channel: it is read on every request and by the
    /// pool's every look for a free stream.
    early: Rc<Cell<Early>>,
    /// Told when `early` leaves `Pending`.
    settled: Rc<Notify>,
    /// Waits for the handshake of a resumed connection to settle `early`.
    early_task: Option<tokio::task::JoinHandle<()>>,
}

/// How a connection's 0-RTT went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Early {
    /// Not resumed with 0-RTT: a 1-RTT handshake completed first.
    None,
    /// Resumed; the handshake has not completed yet.
    Pending,
    Accepted,
    /// The server refused the early data: streams opened before the
    /// handshake completed never reached it.
    Rejected,
}

impl Drop for H3Connection {
    fn drop(&mut self) {
        self.driver.abort();
        if let Some(task) = &self.early_task {
            task.abort();
        }
        self.quic.close(
            Code::H3_NO_ERROR.value().try_into().unwrap_or(0u32.into()),
            b"",
        );
    }
}

/// What an HTTP/3 connect asks for beyond the address.
pub struct H3ConnectOptions<'a> {
    pub endpoint: &'a QuicEndpoint,
    /// TLS as configured for the run, offering `h3` in ALPN.
    pub tls: &'a crate::tls::TlsClient,
    /// The QUIC and HTTP/3 handshakes, both within it.
    pub timeout: Duration,
    /// A connection with no packet from the server for this long is closed
    /// (`quic_idle_timeout` for its streams).
    pub idle_timeout: Duration,
    /// Resume with 0-RTT when TLS holds a session ticket for the server
    /// (the TLS configuration must allow early data).
    pub zero_rtt: bool,
}

impl H3Connection {
    /// Opens a QUIC connection to `addr` (TLS 1.3 with ALPN `h3`) and the
    /// HTTP/3 connection on it. A server that does not answer QUIC fails
    /// it as `connect_timeout` (UDP says nothing of a closed port); one
    /// that answers but does not choose `h3` as `h3_not_negotiated`.
    pub async fn connect(
        addr: SocketAddr,
        options: H3ConnectOptions<'_>,
    ) -> Result<H3Connection, Failure> {
        let started = std::time::Instant::now();
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(
            options.tls.connector.config().clone(),
        )
        .map_err(|_| Failure::TlsHandshake)?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(Arc::new(transport(options.idle_timeout)));
        let name = server_name(&options.tls.server_name);
        let open = async {
            let connecting = options
                .endpoint
                .endpoint
                .connect_with(config, addr, &name)
                .map_err(|_| Failure::ConnectError)?;
            // Resumed with 0-RTT when asked and TLS holds a ticket for the
            // server; else the 1-RTT handshake completes first.
            let resumed = if options.zero_rtt {
                connecting.into_0rtt()
            } else {
                Err(connecting)
            };
            let settled = Rc::new(Notify::new());
            let (quic, early, early_task) = match resumed {
                Ok((quic, accepted)) => {
                    let early = Rc::new(Cell::new(Early::Pending));
                    let (state, told) = (early.clone(), settled.clone());
                    let task = tokio::task::spawn_local(async move {
                        state.set(if accepted.await {
                            Early::Accepted
                        } else {
                            Early::Rejected
                        });
                        told.notify_waiters();
                    });
                    (quic, early, Some(task))
                }
                Err(connecting) => {
                    let quic = connecting.await.map_err(|e| handshake_failure(&e))?;
                    (quic, Rc::new(Cell::new(Early::None)), None)
                }
            };
            let handshake = started.elapsed();
            let (mut driver, send) = h3::client::builder()
                .max_field_section_size(MAX_FIELD_SECTION)
                .build::<_, _, Bytes>(h3_quinn::Connection::new(quic.clone()))
                .await
                .map_err(|e| connection_failure(&e))?;
            // On the worker's LocalSet with the streams' tasks, as HTTP/2's.
            let driver = tokio::task::spawn_local(async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
            });
            Ok(H3Connection {
                send,
                quic,
                driver,
                handshake,
                resets: RefCell::new([0; H3_CODES + 1]),
                ttfb: RefCell::new(headroom_metrics::histogram::new()),
                early,
                settled,
                early_task,
            })
        };
        match tokio::time::timeout(options.timeout, open).await {
            Err(_) => Err(crate::exchange::timed_out(
                crate::exchange::Phase::Connecting,
            )),
            Ok(result) => result,
        }
    }

    /// The connection is gone: closed by either side or timed out idle
    /// (h3's driver ends then), or its early data was refused (its control
    /// streams with it). No lock taken: the pool asks this of every
    /// connection each time it looks for a free stream.
    pub fn is_closed(&self) -> bool {
        self.driver.is_finished() || self.early.get() == Early::Rejected
    }

    /// What QUIC counted on this connection so far, and how it closed
    /// (when it has).
    pub fn totals(&self) -> QuicStats {
        let quinn = self.quic.stats();
        let handshake_us = self.handshake.as_micros() as u64;
        let mut totals = QuicStats {
            handshakes: 1,
            handshake_us_sum: handshake_us,
            handshake_us_max: handshake_us,
            packets_sent: quinn.path.sent_packets,
            packets_lost: quinn.path.lost_packets,
            bytes_lost: quinn.path.lost_bytes,
            congestion_events: quinn.path.congestion_events,
            datagrams_sent: quinn.udp_tx.datagrams,
            datagrams_received: quinn.udp_rx.datagrams,
            stream_resets: *self.resets.borrow(),
            ttfb: Some(Box::new(self.ttfb.borrow().clone())).filter(|h| !h.is_empty()),
            ..QuicStats::default()
        };
        match self.early.get() {
            Early::None => {}
            state => {
                totals.handshakes_0rtt = 1;
                totals.zero_rtt_accepted = (state == Early::Accepted) as u64;
                totals.zero_rtt_rejected = (state == Early::Rejected) as u64;
            }
        }
        match self.quic.close_reason() {
            Some(quinn::ConnectionError::ApplicationClosed(close)) => {
                totals.closed_by_server[h3_code_index(close.error_code.into())] += 1;
            }
            Some(quinn::ConnectionError::TimedOut) => totals.closed_idle_timeout += 1,
            Some(
                quinn::ConnectionError::TransportError(_)
                | quinn::ConnectionError::ConnectionClosed(_),
            ) => totals.closed_transport_error += 1,
            _ => {}
        }
        totals
    }

    /// The failure a stream's error counts as, its reset code counted.
    fn failure(&self, e: &StreamError, answered: bool) -> Failure {
        if let StreamError::RemoteTerminate { code, .. } = e {
            self.resets.borrow_mut()[h3_code_index(code.value())] += 1;
        }
        if !answered && self.early.get() == Early::Rejected {
            return Failure::QuicZeroRttRejected;
        }
        stream_failure(e, answered)
    }

    /// Sends `request` on a new stream and reads the whole response, as
    /// [`crate::h2::H2Connection::exchange`] does. Waits for a stream when
    /// the server's limit on concurrent streams is reached.
    pub async fn exchange(
        &self,
        request: H2Parts,
        want: Capture,
        captured: &mut Captured,
        attempts: &crate::exchange::Attempts,
    ) -> Result<Response, Failure> {
        captured.clear();
        let (head, body) = request;
        // Early data can be replayed: only an idempotent request goes
        // before a resumed connection's handshake completes.
        if self.early.get() == Early::Pending && !crate::is_idempotent(head.method().as_str()) {
            loop {
                // Registered before the check, so a settling in between
                // is not missed.
                let settled = self.settled.notified();
                tokio::pin!(settled);
                settled.as_mut().enable();
                if self.early.get() != Early::Pending {
                    break;
                }
                settled.await;
            }
        }
        // A handle per request (shared state behind an Arc): the stream is
        // opened without holding the connection's.
        let mut send = self.send.clone();
        let mut stream = send
            .send_request(head)
            .await
            .map_err(|e| self.failure(&e, false))?;
        attempts.head_sent();
        let sent = std::time::Instant::now();
        if !body.is_empty() {
            stream
                .send_data(body)
                .await
                .map_err(|e| self.failure(&e, false))?;
        }
        stream.finish().await.map_err(|e| self.failure(&e, false))?;
        let response = stream
            .recv_response()
            .await
            .map_err(|e| self.failure(&e, false))?;
        headroom_metrics::histogram::record_us(
            &mut self.ttfb.borrow_mut(),
            sent.elapsed().as_micros() as u64,
        );
        let status = response.status().as_u16();
        let mut received = crate::h2::take_head(response.headers(), want, captured);
        while let Some(mut chunk) = stream
            .recv_data()
            .await
            .map_err(|e| self.failure(&e, true))?
        {
            received += chunk.remaining() as u64;
            while chunk.has_remaining() {
                let piece = chunk.chunk();
                if want.body {
                    append_limited(&mut captured.body, piece, MAX_CAPTURED_BODY);
                }
                let n = piece.len();
                chunk.advance(n);
            }
        }
        Ok(Response {
            status,
            bytes: received,
            keep_alive: true,
        })
    }
}

/// The TLS server name as QUIC's connect takes it.
fn server_name(name: &rustls::pki_types::ServerName<'static>) -> String {
    match name {
        rustls::pki_types::ServerName::DnsName(dns) => dns.as_ref().to_string(),
        rustls::pki_types::ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
        other => format!("{other:?}"),
    }
}

/// TLS alert 120 (`no_application_protocol`) as QUIC carries it: CRYPTO_ERROR
/// 0x100 + the alert.
const NO_APPLICATION_PROTOCOL: u64 = 0x100 + 120;

/// The failure a QUIC handshake's error counts as.
fn handshake_failure(e: &quinn::ConnectionError) -> Failure {
    match e {
        quinn::ConnectionError::TimedOut => Failure::ConnectTimeout,
        quinn::ConnectionError::ConnectionClosed(close)
            if u64::from(close.error_code) == NO_APPLICATION_PROTOCOL =>
        {
            Failure::H3NotNegotiated
        }
        quinn::ConnectionError::ConnectionClosed(close)
            if (0x100..0x200).contains(&u64::from(close.error_code)) =>
        {
            Failure::TlsHandshake
        }
        quinn::ConnectionError::TransportError(e)
            if (0x100..0x200).contains(&u64::from(e.code)) =>
        {
            Failure::TlsHandshake
        }
        _ => Failure::ConnectError,
    }
}

/// The failure a connection-level h3 error counts as.
fn connection_failure(e: &ConnectionError) -> Failure {
    match e {
        ConnectionError::Timeout { .. }
        | ConnectionError::Remote {
            0: ConnectionErrorIncoming::Timeout,
            ..
        } => Failure::QuicIdleTimeout,
        _ => Failure::H3ConnectionError,
    }
}

/// The failure a stream's error counts as; `answered`: the response's head
/// had arrived.
fn stream_failure(e: &StreamError, answered: bool) -> Failure {
    match e {
        StreamError::RemoteTerminate { code, .. } if *code == Code::H3_REQUEST_REJECTED => {
            Failure::H3Refused
        }
        StreamError::RemoteTerminate { .. } => Failure::H3StreamReset,
        StreamError::RemoteClosing { .. } if !answered => Failure::H3GoawayUnprocessed,
        StreamError::ConnectionError { 0: c, .. } => connection_failure(c),
        _ => Failure::H3ConnectionError,
    }
}
