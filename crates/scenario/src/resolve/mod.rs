//! Raw scenario → validated [`Scenario`]. Every problem is collected (not
//! just the first) and pointed at the line and column where its value
//! appears.
//!
//! `builder`: the Builder and the values every section shares. Its steps,
//! one file each: `load` (`[load]`), `requests`
//! (`[[request]]`, `[[feeder]]`, template variables), `checks` (checks and
//! extractions), `flow` (the mix or `[[session]]`s), `objectives`
//! (`[capacity]`, `[thresholds]`), `events` (`[[event]]`), `trace` (`[trace]`).

use super::errors::{Problem, Problems};
use super::raw::*;
use headroom_engine::plan::{
    default_threads, Flow, HttpVersion, Load, Plan, DEFAULT_CONNECT_TIMEOUT, DEFAULT_GRACEFUL_STOP,
    DEFAULT_MAX_STREAMS, DEFAULT_REQUEST_TIMEOUT,
};
use headroom_http::tls::{TlsClient, TlsOptions};
use headroom_http::Endpoint;
use headroom_objectives::abort::AbortRule;
use headroom_objectives::capacity::Settings;
use headroom_objectives::slo::Slo;
use std::time::Duration;

mod builder;
mod checks;
mod events;
mod flow;
mod grpc;
mod load;
mod objectives;
mod requests;
mod scripts;
mod sockets;
mod trace;

pub use builder::Builder;

/// A validated scenario: the plan the engine runs, and the objectives its
/// runs are held to (which the engine never reads).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub plan: Plan,
    /// `[thresholds]`: pass/fail bounds on a run's results.
    pub thresholds: Slo,
    /// Thresholds with `abort = true`: they stop the run early.
    pub aborts: Vec<AbortRule>,
    /// `[capacity]`: the objective and search settings of
    /// `headroom capacity` (command-line flags overlay them).
    pub capacity: Settings,
}

impl Builder<'_> {
    pub fn build(mut self, raw: &RawScenario, label: &str) -> Result<Scenario, Vec<Problem>> {
        let http = raw.http.clone().unwrap_or_default();
        let keep_alive = http.keep_alive.unwrap_or(true);
        let (connect_timeout, request_timeout) = self.timeouts(&http);
        self.check_http_limits(&http);
        let (mut load, max_requests, graceful_stop) = self.load(raw.load.as_ref());
        let feeders = self.feeders(&raw.feeders);
        self.script_section(raw);
        let (raw_requests, socket_names) = self.with_socket_requests(raw);
        let routes = self.routes(&raw_requests);
        let endpoint = self.endpoint(&raw_requests, &routes);
        let https = endpoint.as_ref().filter(|e| e.https);
        let tls = https.and_then(|e| self.tls(raw.tls.as_ref(), &e.host));
        // Socket steps' gRPC streams are gRPC calls too.
        self.grpc_schema(
            &raw_requests,
            endpoint.as_ref(),
            (tls.as_ref(), connect_timeout),
        );
        let http_version = self.http_version(&raw_requests, &http);
        let mut check_names = Vec::new();
        let mut requests = match &endpoint {
            Some(endpoint) => self.requests(
                &raw_requests,
                &http,
                (endpoint, &routes),
                keep_alive,
                &mut check_names,
            ),
            None => Vec::new(),
        };
        self.message_entries(raw, &mut requests, &socket_names);
        let flow = self.flow(
            raw,
            &feeders,
            &flow::SocketContext {
                names: &socket_names,
                requests: &requests,
                default_within: request_timeout,
            },
        );
        if let (Some(Load::Open(open)), Flow::Sessions(_)) = (&mut load, &flow) {
            open.users = true;
        }
        self.check_transport(raw, &http, endpoint.as_ref());
        let capacity = self.capacity(raw.capacity.as_ref());
        let (thresholds, aborts) = self.thresholds(raw.thresholds.as_ref(), &requests);
        let events = load
            .as_ref()
            .map(|l| self.events(&raw.events, l))
            .unwrap_or_default();
        let scripts = self.script_program(&mut requests);
        let trace_context = self.trace_context(raw.trace.as_ref());

        let problems = std::mem::replace(&mut self.problems, Problems::new(""));
        problems.into_result(())?;
        let (Some(endpoint), Some(load)) = (endpoint, load) else {
            unreachable!("no problems means the endpoint and load were built");
        };
        let plan = Plan {
            endpoint,
            label: headroom_http::redact::url(label),
            requests,
            flow,
            feeders,
            check_names,
            load,
            keep_alive,
            cookies: http.cookies.unwrap_or(true),
            tls,
            connect_timeout,
            request_timeout,
            graceful_stop: graceful_stop.unwrap_or(DEFAULT_GRACEFUL_STOP),
            threads: http.threads.unwrap_or_else(default_threads).max(1),
            max_requests,
            stale_retry: http.stale_connection_retry.unwrap_or_default(),
            shard: Default::default(),
            local_addresses: Vec::new(),
            events,
            routes,
            max_connections_per_host: http.max_connections_per_host,
            engine: Default::default(),
            http_version,
            zero_rtt: http.zero_rtt.unwrap_or(false),
            max_streams: http.max_streams.unwrap_or(DEFAULT_MAX_STREAMS),
            keepalive: self.grpc_keepalive,
            keep_second_histograms: false,
            trace_context,
            scripts,
            script_data: None,
        };
        Ok(Scenario {
            plan,
            thresholds,
            aborts,
            capacity,
        })
    }

    /// The file's requests and, after them, its socket steps'
    /// handshakes and awaited messages (requests too); the socket steps'
    /// entries by step.
    fn with_socket_requests<'r>(
        &mut self,
        raw: &'r RawScenario,
    ) -> (std::borrow::Cow<'r, RawScenario>, sockets::SocketNames) {
        let (socket_requests, socket_names) = self.socket_requests(raw);
        let raw_requests = match socket_requests.is_empty() {
            true => std::borrow::Cow::Borrowed(raw),
            false => std::borrow::Cow::Owned(RawScenario {
                requests: [raw.requests.clone(), socket_requests].concat(),
                ..raw.clone()
            }),
        };
        (raw_requests, socket_names)
    }

    /// Entries that stand for messages: socket steps' awaited messages
    /// labelled with their protocol, and the file's streaming gRPC calls'
    /// received messages (the socket steps' streams have their `expect`s).
    fn message_entries(
        &mut self,
        raw: &RawScenario,
        requests: &mut Vec<headroom_engine::plan::RequestSpec>,
        socket_names: &sockets::SocketNames,
    ) {
        sockets::label_messages(requests, socket_names);
        self.grpc_streams(raw, requests);
    }

    /// `[http] version`, or its default: HTTP/2 where the scenario makes
    /// gRPC calls (they need it: another version asked is a problem).
    fn http_version(&mut self, raw: &RawScenario, http: &RawHttp) -> HttpVersion {
        let asked = http.version.map(|v| v.0);
        if !raw.requests.iter().any(|r| r.grpc.is_some()) {
            return asked.unwrap_or_default();
        }
        match asked {
            None | Some(HttpVersion::Http2) => HttpVersion::Http2,
            Some(other) => {
                self.problem(
                    None,
                    "version",
                    "version",
                    format!("http.version: gRPC calls go over HTTP/2, not {other:?}"),
                );
                other
            }
        }
    }

    /// `[http] connect_timeout` and `timeout`, or their defaults.
    fn timeouts(&mut self, http: &RawHttp) -> (Duration, Duration) {
        let connect_timeout = http
            .connect_timeout
            .as_deref()
            .and_then(|t| self.duration(None, "connect_timeout", t))
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        let request_timeout = http
            .timeout
            .as_deref()
            .and_then(|t| self.duration(None, "timeout", t))
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        (connect_timeout, request_timeout)
    }

    /// `[http]`'s counts that must be at least 1.
    fn check_http_limits(&mut self, http: &RawHttp) {
        if http.threads == Some(0) {
            self.problem(
                None,
                "threads",
                "threads",
                "http.threads: must be at least 1".into(),
            );
        }
        if http.max_connections_per_host == Some(0) {
            self.problem(
                None,
                "max_connections_per_host",
                "max_connections_per_host",
                "http.max_connections_per_host: must be at least 1".into(),
            );
        }
        if http.max_streams == Some(0) {
            self.problem(
                None,
                "max_streams",
                "max_streams",
                "http.max_streams: must be at least 1".into(),
            );
        }
    }

    /// The transport the file asks for fits its base URL: HTTP/3 and
    /// `[tls]` need https://, 0-RTT needs HTTP/3.
    fn check_transport(&mut self, raw: &RawScenario, http: &RawHttp, endpoint: Option<&Endpoint>) {
        let http3 = http.version.is_some_and(|v| v.0 == HttpVersion::Http3);
        if http3 && endpoint.is_some_and(|e| !e.https) {
            self.problem(
                None,
                "version",
                "version",
                "http.version = \"3\": HTTP/3 runs over QUIC, which is always TLS — the base \
                 URL must be https://"
                    .into(),
            );
        }
        if http.zero_rtt == Some(true) && !http3 {
            self.problem(
                None,
                "zero_rtt",
                "zero_rtt",
                "http.zero_rtt: 0-RTT is QUIC's — set version = \"3\" (--http3)".into(),
            );
        }
        if raw.tls.is_some() && endpoint.is_some_and(|e| !e.https) {
            self.problem(
                None,
                "[tls]",
                "tls",
                "[tls] is set but the base URL is not https://".into(),
            );
        }
    }

    fn tls(&mut self, raw: Option<&RawTls>, host: &str) -> Option<TlsClient> {
        let raw = raw.cloned().unwrap_or_default();
        let options = TlsOptions {
            ca_file: raw.ca_file.as_deref().map(|f| self.path(f)),
            server_name: raw.server_name.clone(),
            insecure: raw.insecure.unwrap_or(false),
        };
        match TlsClient::new(host, &options) {
            Ok(t) => Some(t),
            Err(e) => {
                let needle = raw.ca_file.clone().unwrap_or_else(|| "tls".into());
                self.problem(None, "", &needle, format!("tls: {e}"));
                None
            }
        }
    }
}
