//! Which protocol a run speaks, settled once before it starts: `auto`
//! asks the plan's endpoint (ALPN `h2,http/1.1`) and the run then offers
//! only what it chose, so every connection of the run speaks one protocol;
//! `2` is checked the same way by whoever wants a clear error before any
//! load (the command line does).

use crate::plan::{HttpVersion, Plan};
use headroom_http::h2::H2Connection;
use headroom_http::h3::{H3ConnectOptions, H3Connection, QuicEndpoint};
use headroom_http::{ConnectOptions, Failure, Protocol};
use std::fmt;

/// The server at the plan's endpoint did not agree to HTTP/2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotNegotiated {
    pub failure: Failure,
    /// The endpoint, as the user wrote it.
    pub server: String,
    pub https: bool,
    /// HTTP/3 was asked for.
    pub http3: bool,
    /// The endpoint's port.
    pub port: u16,
}

impl fmt::Display for NotNegotiated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let server = &self.server;
        match (self.failure, self.https) {
            (Failure::H3NotNegotiated, _) => write!(
                f,
                "{server} answered QUIC but did not agree to HTTP/3 (ALPN `h3`); enable \
                 HTTP/3 on the server, or drop --http3"
            ),
            (Failure::ConnectTimeout, true) if self.http3 => write!(
                f,
                "{server} did not answer a QUIC handshake on UDP port {port} within the connect \
                 timeout: no HTTP/3 there (is it enabled, and is UDP {port} open?) — drop \
                 --http3, or use --http2",
                port = self.port
            ),
            (failure, _) if self.http3 => write!(
                f,
                "{server}: could not open an HTTP/3 connection ({})",
                crate::metrics::ErrorClass::from(failure).describe()
            ),
            (Failure::H2NotNegotiated, _) => write!(
                f,
                "{server} did not agree to HTTP/2: offered only `h2` in TLS (ALPN), it chose \
                 HTTP/1.1 or nothing; enable HTTP/2 on the server, or use --http-version auto \
                 (`[http] version = \"auto\"`) to fall back to HTTP/1.1"
            ),
            (failure, false) if !failure_is_connect(failure) => write!(
                f,
                "{server} did not answer HTTP/2 with prior knowledge (h2c: {}); it may speak \
                 HTTP/1.1 only over cleartext — drop --http2, or enable h2c on the server",
                crate::metrics::ErrorClass::from(failure).key()
            ),
            (failure, _) => write!(
                f,
                "{server}: could not open an HTTP/2 connection to ask ({})",
                crate::metrics::ErrorClass::from(failure).describe()
            ),
        }
    }
}

impl std::error::Error for NotNegotiated {}

impl NotNegotiated {
    /// The server answered, but not in HTTP/2 (rather than not at all).
    pub fn is_protocol(&self) -> bool {
        !failure_is_connect(self.failure) || self.failure == Failure::H3NotNegotiated
    }
}

fn failure_is_connect(failure: Failure) -> bool {
    matches!(
        failure,
        Failure::ConnectRefused
            | Failure::ConnectTimeout
            | Failure::ConnectError
            | Failure::TooManyOpenFiles
            | Failure::TlsHandshake
    )
}

/// The protocol the plan's endpoint speaks for the plan's version: one
/// connection opened and closed (for `2` and `auto`; `1.1` asks nothing).
pub fn negotiate(plan: &Plan) -> Result<Protocol, NotNegotiated> {
    let offer = match plan.http_version {
        HttpVersion::Http1 => return Ok(Protocol::Http1),
        HttpVersion::Auto if !plan.endpoint.https => return Ok(Protocol::Http1),
        version => version,
    };
    let tls = plan.tls.as_ref().map(|t| t.with_version(offer));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a single-threaded runtime can be built");
    let options = ConnectOptions {
        local: plan.local_addresses.first().copied(),
        timeout: plan.connect_timeout,
        tls: tls.as_ref(),
        max_streams: plan.max_streams,
        keepalive: None,
    };
    let asked = tokio::task::LocalSet::new().block_on(&runtime, async {
        if offer == HttpVersion::Http3 {
            ask_h3(plan, options).await.map(|_| Protocol::Http3)
        } else {
            H2Connection::connect(plan.endpoint.addr, options)
                .await
                .map(|_| Protocol::Http2)
        }
    });
    match asked {
        Ok(protocol) => Ok(protocol),
        Err(Failure::H2NotNegotiated) if offer == HttpVersion::Auto => Ok(Protocol::Http1),
        Err(failure) => Err(NotNegotiated {
            failure,
            server: plan.label.clone(),
            https: plan.endpoint.https,
            http3: offer == HttpVersion::Http3,
            port: plan.endpoint.addr.port(),
        }),
    }
}

/// One HTTP/3 connection opened to the plan's endpoint and closed.
async fn ask_h3(plan: &Plan, options: ConnectOptions<'_>) -> Result<(), Failure> {
    let tls = options.tls.ok_or(Failure::H3NotNegotiated)?;
    let endpoint =
        QuicEndpoint::bind(options.local, plan.endpoint.addr).map_err(|_| Failure::ConnectError)?;
    let options = H3ConnectOptions {
        endpoint: &endpoint,
        tls,
        timeout: options.timeout,
        idle_timeout: plan.request_timeout,
        zero_rtt: false,
    };
    H3Connection::connect(plan.endpoint.addr, options)
        .await
        .map(drop)
}

/// The plan as a run speaks it: `auto` settled (HTTP/1.1 when the
/// endpoint could not be asked: its connections fail as they will), and
/// TLS offering only the settled protocol.
pub(crate) fn settle(plan: &Plan) -> Plan {
    let mut plan = plan.clone();
    if plan.http_version == HttpVersion::Auto {
        plan.http_version = match negotiate(&plan) {
            Ok(Protocol::Http2) => HttpVersion::Http2,
            _ => HttpVersion::Http1,
        };
    }
    plan.tls = plan.tls.map(|t| {
        let tls = t.with_version(plan.http_version);
        if plan.zero_rtt {
            tls.with_early_data()
        } else {
            tls
        }
    });
    plan
}
