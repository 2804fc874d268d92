//! The origins (scheme, host, port) one worker's requests go to — the
//! plan's own, and those of full URLs in requests and feeders — each
//! resolved once per run (`--connect-to` / `--resolve` first, then the
//! system resolver), and the connections open to each.
//!
//! HTTP/1.1 connections are kept per origin, as browsers and Gatling keep them: a
//! request to `app1.test` never goes out on a connection opened for
//! `app2.test`, even when both connect to one router address. Each user
//! keeps its own (see `tasks/user.rs`), unless the plan caps connections per
//! host: then a worker's users share one pool per origin, and a request
//! that finds none idle and its origin at the cap waits for one. HTTP/2
//! and HTTP/3 connections are always shared by a worker's users, many
//! streams on each (`streams.rs`).

mod streams;

pub(crate) use self::streams::{Acquired, Carrier, H2Conn, StreamSlot};
use self::streams::{H2Pool, QuicState};
use crate::metrics::ErrorClass;
use crate::plan::{HttpVersion, Plan};
use headroom_http::tls::{TlsClient, TlsOptions};
use headroom_http::{routes, Connection, Failure, HeadCache};
use headroom_metrics::QuicStats;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;

pub(crate) struct Origin {
    /// Position in the worker's table (0 = the plan's endpoint).
    pub id: u32,
    /// `Host` header: host, and port when the URL gave one.
    pub host_header: String,
    pub https: bool,
    pub addr: SocketAddr,
    pub tls: Option<TlsClient>,
    /// `scheme://host:port/`, parsed once: a request's URL for its cookies
    /// is this with the target's path and query (no host parsing per
    /// request).
    root: Option<url::Url>,
    /// Connections open (or being opened) to this origin by this worker.
    open: Cell<u32>,
    /// Pooled mode: idle connections any user may take.
    #[allow(clippy::vec_box)] // boxed on purpose: see `Conn`
    idle: RefCell<Vec<Box<Conn>>>,
    freed: Notify,
    /// The last response head, shared by this worker's connections here.
    heads: Rc<HeadCache>,
    /// HTTP/2 connections (a plan that speaks HTTP/2).
    h2: H2Pool,
}

/// A connection to an origin; dropping it closes it and frees its place
/// under the origin's cap. Always boxed: a request takes it from its
/// user (or the pool) and gives it back, and moving a pointer leaves its
/// ~100 bytes where they are — moved, they were cache misses per request
/// at 1,000 connections, and as many bytes more in every user's future.
pub(crate) struct Conn {
    pub http: Connection,
    pub origin: Claim,
}

impl Conn {
    /// The connection for a protocol that takes it over (a WebSocket, an
    /// event stream); the claim keeps its place under the origin's cap
    /// until it is dropped.
    pub fn into_parts(self) -> (Connection, Claim) {
        let Conn { http, origin } = self;
        (http, origin)
    }
}

/// A connection's place under its origin's cap, freed when dropped.
pub(crate) struct Claim(Rc<Origin>);

impl std::ops::Deref for Claim {
    type Target = Rc<Origin>;
    fn deref(&self) -> &Rc<Origin> {
        &self.0
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Origin {
    pub(crate) fn new(id: u32, host_header: String, https: bool, addr: SocketAddr) -> Origin {
        let scheme = if https { "https" } else { "http" };
        let root = url::Url::parse(&format!("{scheme}://{host_header}/")).ok();
        Origin {
            id,
            host_header,
            https,
            addr,
            tls: None,
            root,
            open: Cell::new(0),
            idle: RefCell::new(Vec::new()),
            freed: Notify::new(),
            heads: Rc::default(),
            h2: H2Pool::default(),
        }
    }

    fn release(&self) {
        self.open.set(self.open.get().saturating_sub(1));
        self.freed.notify_one();
    }

    /// `scheme://host:port/`, when the host header parses as one.
    pub fn root(&self) -> Option<&url::Url> {
        self.root.as_ref()
    }

    /// `scheme://host:port/…` for cookie matching.
    pub fn url(&self, target: &str) -> Option<url::Url> {
        let mut url = self.root.clone()?;
        let target = target.split('#').next().unwrap_or(target);
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (target, None),
        };
        url.set_path(path);
        url.set_query(query);
        Some(url)
    }
}

/// Why a request's origin has no address.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unreachable(pub ErrorClass);

pub(crate) struct Origins {
    list: RefCell<Vec<Rc<Origin>>>,
    /// By `scheme://authority` as written in URLs; a failed lookup is kept
    /// too, so a host that does not resolve is asked about once per run.
    by_key: RefCell<HashMap<String, Result<u32, ErrorClass>>>,
    routes: routes::Routes,
    /// Most connections per origin on this worker (pooled mode).
    cap: Option<u32>,
    /// For `https://` origins when the plan's own is `http://`.
    default_tls: RefCell<Option<TlsClient>>,
    plan_tls: Option<TlsClient>,
    /// The protocol the run speaks (settled: never `auto`).
    version: HttpVersion,
    /// HTTP/2 and HTTP/3: most streams in flight on one connection.
    max_streams: u32,
    /// HTTP/2 keepalive PINGs (the plan's).
    keepalive: Option<Duration>,
    connect_timeout: Duration,
    /// HTTP/3: a connection with no packet from the server for this long
    /// is given up (the request timeout: its streams have timed out).
    idle_timeout: Duration,
    /// HTTP/3: resume connections with 0-RTT.
    zero_rtt: bool,
    quic: QuicState,
}

impl Drop for Origins {
    fn drop(&mut self) {
        // Pooled connections hold their origin: break the cycle.
        for o in self.list.borrow().iter() {
            o.idle.borrow_mut().clear();
            o.h2.clear();
        }
    }
}

impl Origins {
    /// The plan's endpoint as origin 0; `cap` is this worker's share of
    /// the plan's [`Plan::connection_cap`].
    pub fn new(plan: &Plan, cap: Option<u32>) -> Origins {
        let e = &plan.endpoint;
        let mut first = Origin::new(0, e.host_header.clone(), e.https, e.addr);
        first.tls = plan.tls.clone();
        let scheme = if e.https { "https" } else { "http" };
        let mut by_key = HashMap::new();
        by_key.insert(format!("{scheme}://{}", e.host_header), Ok(0));
        Origins {
            list: RefCell::new(vec![Rc::new(first)]),
            by_key: RefCell::new(by_key),
            routes: plan.routes.clone(),
            cap,
            default_tls: RefCell::new(None),
            plan_tls: plan.tls.clone(),
            version: plan.http_version,
            max_streams: plan.max_streams,
            keepalive: plan.keepalive,
            connect_timeout: plan.connect_timeout,
            idle_timeout: plan.request_timeout,
            zero_rtt: plan.zero_rtt,
            quic: QuicState::default(),
        }
    }

    /// Closes every shared connection (the run is over) and gives what
    /// QUIC counted on this worker's HTTP/3 connections.
    pub fn close_all(&self) -> QuicStats {
        for o in self.list.borrow().iter() {
            o.idle.borrow_mut().clear();
            o.h2.clear();
        }
        std::mem::take(&mut *self.quic.totals.borrow_mut())
    }

    pub fn default_origin(&self) -> Rc<Origin> {
        self.list.borrow()[0].clone()
    }

    /// HTTP/1.1 connections are shared by users (a per-host cap).
    pub fn pooled(&self) -> bool {
        self.cap.is_some() && !self.version.multiplexed()
    }

    /// The origin of `key` (`scheme://authority`), resolved on first use.
    pub async fn get(&self, key: &str) -> Result<Rc<Origin>, Unreachable> {
        let known = self.by_key.borrow().get(key).copied();
        let id = match known {
            Some(found) => found,
            None => {
                let found = self.add(key).await;
                self.by_key.borrow_mut().insert(key.to_string(), found);
                found
            }
        };
        id.map(|id| self.list.borrow()[id as usize].clone())
            .map_err(Unreachable)
    }

    async fn add(&self, key: &str) -> Result<u32, ErrorClass> {
        let url = url::Url::parse(key).map_err(|_| ErrorClass::InvalidUrl)?;
        let host = url.host_str().ok_or(ErrorClass::InvalidUrl)?.to_string();
        let port = url.port_or_known_default().ok_or(ErrorClass::InvalidUrl)?;
        let https = url.scheme() == "https";
        let addr = match self.routes.fixed(&host, port) {
            Some(addr) => addr,
            None => {
                let (to_host, to_port) = self.routes.target(&host, port);
                tokio::net::lookup_host((to_host.as_str(), to_port))
                    .await
                    .ok()
                    .and_then(|mut addrs| addrs.next())
                    .ok_or(ErrorClass::ResolveFailed)?
            }
        };
        let host_header = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        // Another key may name the same origin (`HTTP://A.test` and
        // `http://a.test:80`): share its connections.
        if let Some(same) = self
            .list
            .borrow()
            .iter()
            .find(|o| o.https == https && o.addr == addr && o.host_header == host_header)
        {
            return Ok(same.id);
        }
        let id = self.list.borrow().len() as u32;
        let mut origin = Origin::new(id, host_header, https, addr);
        if https {
            origin.tls = Some(self.tls_for(&host)?);
        }
        self.list.borrow_mut().push(Rc::new(origin));
        Ok(id)
    }

    fn tls_for(&self, host: &str) -> Result<TlsClient, ErrorClass> {
        if let Some(tls) = &self.plan_tls {
            return tls.for_host(host).map_err(|_| ErrorClass::TlsHandshake);
        }
        let mut default = self.default_tls.borrow_mut();
        if default.is_none() {
            *default = TlsClient::new(host, &TlsOptions::default())
                .ok()
                .map(|t| t.with_version(self.version));
        }
        default
            .as_ref()
            .ok_or(ErrorClass::TlsHandshake)?
            .for_host(host)
            .map_err(|_| ErrorClass::TlsHandshake)
    }

    /// Pooled mode: an idle connection to `origin`, or `None` once the
    /// caller may open one (its place under the cap is then reserved:
    /// [`Origins::open`] must follow). Waits while the origin is at its cap
    /// and nothing is idle.
    pub async fn checkout(&self, origin: &Rc<Origin>) -> Option<Box<Conn>> {
        let cap = self.cap.unwrap_or(u32::MAX);
        loop {
            if let Some(conn) = origin.idle.borrow_mut().pop() {
                return Some(conn);
            }
            if origin.open.get() < cap {
                origin.open.set(origin.open.get() + 1);
                return None;
            }
            origin.freed.notified().await;
        }
    }

    /// Pooled mode: a connection back to its origin's idle pool.
    pub fn check_in(&self, conn: Box<Conn>) {
        let origin = Rc::clone(&conn.origin);
        origin.idle.borrow_mut().push(conn);
        origin.freed.notify_one();
    }

    /// Opens a connection to `origin` (in pooled mode its place was
    /// reserved by [`Origins::checkout`]).
    pub async fn open(
        &self,
        origin: &Rc<Origin>,
        local: Option<IpAddr>,
        timeout: Duration,
    ) -> Result<Box<Conn>, Failure> {
        if !self.pooled() {
            origin.open.set(origin.open.get() + 1);
        }
        let heads = origin.heads.clone();
        match Connection::connect(origin.addr, local, timeout, origin.tls.as_ref(), heads).await {
            Ok(http) => Ok(Box::new(Conn {
                http,
                origin: Claim(origin.clone()),
            })),
            Err(failure) => {
                origin.release();
                Err(failure)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The URL built from the parsed root is the one a full parse gives
    /// (less the fragment).
    #[test]
    fn a_targets_url_is_the_fully_parsed_one() {
        for (https, host) in [(false, "127.0.0.1:8080"), (true, "App1.Example.test")] {
            let origin = Origin::new(0, host.into(), https, "127.0.0.1:1".parse().unwrap());
            let scheme = if https { "https" } else { "http" };
            for target in [
                "/",
                "/a/b?x=1&y=%20z",
                "/p#frag",
                "/ü/ä?q=é",
                "/a b?c d",
                "/?",
                "/x/../y",
            ] {
                let mut parsed = url::Url::parse(&format!("{scheme}://{host}{target}")).unwrap();
                // A fragment is never sent, and cookies do not look at it.
                parsed.set_fragment(None);
                assert_eq!(origin.url(target).unwrap(), parsed, "{target}");
            }
        }
    }
}
