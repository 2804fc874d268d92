//! HTTP/2 and HTTP/3 connections to one origin, shared by all of a
//! worker's users (the streams model is one for both protocols): a
//! request takes a stream on the least-loaded connection that has one free
//! (at most the plan's `max_streams`, and never above the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS); when all are full a new connection
//! opens, up to the origin's cap, else the request waits for a stream.
//!
//! A connection is opened only for demand that the connections already
//! being opened will not meet, so `users` users starting at once open
//! `users / max_streams` connections, not one each.

use super::{Origin, Origins};
use crate::plan::HttpVersion;
use headroom_http::exchange::Attempts;
use headroom_http::h2::{H2Connection, H2Parts};
use headroom_http::h3::{H3ConnectOptions, H3Connection, QuicEndpoint};
use headroom_http::{Capture, Captured, ConnectOptions, Failure, Response};
use headroom_metrics::QuicStats;
use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::rc::Rc;
use tokio::sync::Notify;

/// A connection that carries many streams: HTTP/2 over TCP, or HTTP/3
/// over QUIC.
pub(crate) enum Carrier {
    H2(H2Connection),
    /// With the worker's QUIC totals, which it adds to when dropped.
    H3(Box<H3Connection>, Rc<RefCell<QuicStats>>),
}

impl Drop for Carrier {
    fn drop(&mut self) {
        if let Carrier::H3(connection, totals) = self {
            *totals.borrow_mut() += &connection.totals();
        }
    }
}

impl Carrier {
    /// Streams it may carry at once, at most `ours`. HTTP/3: quinn waits
    /// for a stream the server allows when a request opens one past its
    /// limit, so ours is the cap here.
    fn stream_limit(&self, ours: u32) -> u32 {
        match self {
            Carrier::H2(c) => c.stream_limit(ours),
            Carrier::H3(..) => ours,
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Carrier::H2(c) => c.is_closed(),
            Carrier::H3(c, _) => c.is_closed(),
        }
    }

    /// One request on a new stream, its whole response read.
    pub async fn exchange(
        &self,
        request: H2Parts,
        want: Capture,
        captured: &mut Captured,
        attempts: &Attempts,
    ) -> Result<Response, Failure> {
        match self {
            Carrier::H2(c) => c.exchange(request, want, captured, attempts).await,
            Carrier::H3(c, _) => c.exchange(request, want, captured, attempts).await,
        }
    }

    /// The HTTP/2 connection under it: gRPC streams send and read their
    /// messages on it. (gRPC runs over HTTP/2 only: a plan with gRPC
    /// calls never opens HTTP/3.)
    pub fn h2(&self) -> Result<&H2Connection, Failure> {
        match self {
            Carrier::H2(c) => Ok(c),
            Carrier::H3(..) => Err(Failure::H2NotNegotiated),
        }
    }
}

/// An origin's HTTP/2 connections (on this worker).
#[derive(Default)]
pub(crate) struct H2Pool {
    conns: RefCell<Vec<Rc<H2Conn>>>,
    /// Connections being opened.
    opening: Cell<u32>,
    /// Requests waiting for a stream.
    waiting: Cell<u32>,
    /// A stream was freed, a connection opened or failed to.
    changed: Notify,
}

/// One HTTP/2 connection and the streams in flight on it.
pub(crate) struct H2Conn {
    pub http: Carrier,
    in_flight: Cell<u32>,
    /// Streams it may carry at once: ours, or the server's if lower — read
    /// from h2 (behind a lock) when a stream ends, not each time a request
    /// looks for a free stream among every connection.
    limit: Cell<u32>,
    /// Our `max_streams`.
    limit_ours: u32,
    /// No new stream goes on it (the server's GOAWAY, a connection error):
    /// it closes once its streams are done.
    retired: Cell<bool>,
}

impl H2Conn {
    /// Takes no new stream from now on.
    pub fn retire(&self) {
        self.retired.set(true);
    }

    fn takes_streams(&self) -> bool {
        !self.retired.get() && !self.http.is_closed()
    }
}

/// A stream's place on a connection, given back when dropped (the request
/// done, failed, timed out or cut off by the run's stop).
pub(crate) struct StreamSlot {
    pub conn: Rc<H2Conn>,
    origin: Rc<Origin>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let conn = &self.conn;
        conn.in_flight.set(conn.in_flight.get() - 1);
        conn.limit.set(conn.http.stream_limit(conn.limit_ours));
        self.origin.h2.changed.notify_one();
    }
}

/// A stream, and whether a connection was opened for it.
pub(crate) struct Acquired {
    pub slot: StreamSlot,
    pub opened: bool,
}

impl Origins {
    /// A stream to `origin`, on a connection other than `avoid` when there
    /// is (or may be) one — a refused request goes again elsewhere.
    /// Waits while every connection is full and the origin is at its cap.
    pub async fn h2_stream(
        &self,
        origin: &Rc<Origin>,
        mut avoid: Option<Rc<H2Conn>>,
        local: Option<IpAddr>,
    ) -> Result<Acquired, Failure> {
        let pool = &origin.h2;
        let cap = self.cap.unwrap_or(u32::MAX);
        let max_streams = self.max_streams.max(1);
        let mut opened = false;
        loop {
            pool.conns.borrow_mut().retain(|c| {
                let keep = c.takes_streams() || c.in_flight.get() > 0;
                if !keep {
                    origin.release();
                }
                keep
            });
            let free = pool
                .conns
                .borrow()
                .iter()
                .filter(|c| c.takes_streams())
                .filter(|c| avoid.as_ref().is_none_or(|a| !Rc::ptr_eq(a, c)))
                .filter(|c| c.in_flight.get() < c.limit.get())
                .min_by_key(|c| c.in_flight.get())
                .cloned();
            if let Some(conn) = free {
                conn.in_flight.set(conn.in_flight.get() + 1);
                return Ok(Acquired {
                    slot: StreamSlot {
                        conn,
                        origin: origin.clone(),
                    },
                    opened,
                });
            }
            // Open one when the connections being opened will not have a
            // stream for this request too.
            let pending = pool.opening.get().saturating_mul(max_streams);
            if origin.open.get() < cap && pool.waiting.get() >= pending {
                self.open_h2(origin, local).await?;
                opened = true;
                continue;
            }
            if avoid.take().is_some() {
                // No other connection, nor room for one: the same will do.
                continue;
            }
            pool.waiting.set(pool.waiting.get() + 1);
            pool.changed.notified().await;
            pool.waiting.set(pool.waiting.get() - 1);
        }
    }

    /// Opens a connection to `origin` into its pool.
    async fn open_h2(&self, origin: &Rc<Origin>, local: Option<IpAddr>) -> Result<(), Failure> {
        let pool = &origin.h2;
        origin.open.set(origin.open.get() + 1);
        pool.opening.set(pool.opening.get() + 1);
        // Boxed: the connect (TLS and HTTP/2 or QUIC handshakes) is
        // kilobytes of state that every waiting request's future would
        // otherwise carry.
        let result = if self.version == HttpVersion::Http3 {
            Box::pin(self.open_h3(origin, local)).await
        } else {
            let options = ConnectOptions {
                local,
                timeout: self.connect_timeout,
                tls: origin.tls.as_ref(),
                max_streams: self.max_streams,
                keepalive: self.keepalive,
            };
            Box::pin(H2Connection::connect(origin.addr, options))
                .await
                .map(Carrier::H2)
        };
        pool.opening.set(pool.opening.get() - 1);
        match result {
            Ok(http) => {
                pool.conns.borrow_mut().push(Rc::new(H2Conn {
                    limit: Cell::new(http.stream_limit(self.max_streams)),
                    limit_ours: self.max_streams,
                    http,
                    in_flight: Cell::new(0),
                    retired: Cell::new(false),
                }));
                pool.changed.notify_waiters();
                Ok(())
            }
            Err(failure) => {
                origin.release();
                // A waiter may try in its turn.
                pool.changed.notify_one();
                Err(failure)
            }
        }
    }

    /// Opens an HTTP/3 connection to `origin`, from this worker's QUIC
    /// endpoint for `local` (bound on first use).
    async fn open_h3(&self, origin: &Origin, local: Option<IpAddr>) -> Result<Carrier, Failure> {
        let Some(tls) = origin.tls.as_ref() else {
            // `http://` has no HTTP/3: refused when the plan is made; a
            // full URL to a cleartext origin ends here.
            return Err(Failure::H3NotNegotiated);
        };
        let endpoint = self.quic_endpoint(local, origin.addr)?;
        let options = H3ConnectOptions {
            endpoint: &endpoint,
            tls,
            timeout: self.connect_timeout,
            idle_timeout: self.idle_timeout,
            zero_rtt: self.zero_rtt && !self.quic.zero_rtt_refused.get(),
        };
        let connection = H3Connection::connect(origin.addr, options).await?;
        Ok(Carrier::H3(Box::new(connection), self.quic.totals.clone()))
    }

    /// The worker's QUIC endpoint for `local` and `peer`'s address family:
    /// one UDP socket for all of its connections there.
    fn quic_endpoint(
        &self,
        local: Option<IpAddr>,
        peer: std::net::SocketAddr,
    ) -> Result<QuicEndpoint, Failure> {
        let key = (local, peer.is_ipv6());
        let mut endpoints = self.quic.endpoints.borrow_mut();
        if let Some((_, endpoint)) = endpoints.iter().find(|(k, _)| *k == key) {
            return Ok(endpoint.clone());
        }
        let endpoint = QuicEndpoint::bind(local, peer).map_err(|e| {
            if e.raw_os_error() == Some(libc::EMFILE) || e.raw_os_error() == Some(libc::ENFILE) {
                Failure::TooManyOpenFiles
            } else {
                Failure::ConnectError
            }
        })?;
        endpoints.push((key, endpoint.clone()));
        Ok(endpoint)
    }
}

/// A worker's QUIC endpoints and what its closed HTTP/3 connections
/// counted.
#[derive(Default)]
pub(crate) struct QuicState {
    /// By local address and address family of the peer.
    #[allow(clippy::type_complexity)]
    endpoints: RefCell<Vec<((Option<IpAddr>, bool), QuicEndpoint)>>,
    pub totals: Rc<RefCell<QuicStats>>,
    /// A server refused our 0-RTT early data: later connections complete
    /// their handshake first, as browsers do after a refusal (a server
    /// that issues tickets it cannot honour — several behind one address
    /// without shared ticket keys — would refuse every one).
    zero_rtt_refused: Cell<bool>,
}

impl Origins {
    /// The server refused 0-RTT: connections opened from now on wait for
    /// their handshake.
    pub fn zero_rtt_refused(&self) {
        self.quic.zero_rtt_refused.set(true);
    }
}

impl H2Pool {
    /// Closes every connection (the run is over).
    pub fn clear(&self) {
        self.conns.borrow_mut().clear();
    }
}
