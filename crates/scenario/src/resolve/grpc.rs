//! gRPC calls in a scenario: `[grpc]`'s schema (`.proto` files, a
//! protoset, or the server's reflection service, asked once here before
//! any load), and each `grpc = "package.Service/Method"` request as the
//! HTTP/2 request gRPC makes of it — a POST to `/package.Service/Method`
//! with `content-type: application/grpc`, `te: trailers`, a `grpc-timeout`
//! from its own timeout, and its JSON message encoded as the method's
//! input type (now, when nothing in it is templated; at each send, when
//! something is).

use super::builder::Builder;
use crate::raw::{RawRequest, RawScenario};
use headroom_engine::plan::{GrpcStream, RequestSpec};
use headroom_grpc::{Compression, Method, Schema};
use headroom_http::tls::TlsClient;
use headroom_http::{ConnectOptions, Endpoint, HttpVersion};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

impl Builder<'_> {
    /// The schema of the scenario's gRPC calls, kept for its requests;
    /// nothing when it has none.
    pub(super) fn grpc_schema(
        &mut self,
        raw: &RawScenario,
        endpoint: Option<&Endpoint>,
        (tls, connect_timeout): (Option<&TlsClient>, Duration),
    ) {
        let Some(endpoint) = endpoint else {
            return;
        };
        if !raw.requests.iter().any(|r| r.grpc.is_some()) {
            return;
        }
        let section = raw.grpc.clone().unwrap_or_default();
        if let Some(name) = &section.compression {
            match Compression::parse(name) {
                Some(c) => self.grpc_compression = c,
                None => self.problem(
                    Some("grpc"),
                    "compression",
                    name,
                    format!("[grpc] compression: `{name}` is not one of gzip, identity"),
                ),
            }
        }
        if let Some(every) = &section.keepalive {
            self.grpc_keepalive = self.duration(Some("grpc"), "keepalive", every);
            if self.grpc_keepalive.is_some_and(|d| d.is_zero()) {
                let message = "[grpc] keepalive: give a time between PINGs above 0".into();
                self.problem(Some("grpc"), "keepalive", every, message);
            }
        }
        let schema = if let Some(file) = &section.protoset {
            if !section.proto.is_empty() {
                self.problem(
                    Some("grpc"),
                    "protoset",
                    file,
                    "[grpc]: give `proto` or `protoset`, not both".into(),
                );
            }
            let path = self.path(file);
            std::fs::read(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
                .and_then(|bytes| Schema::from_protoset(&bytes))
                .map_err(|e| (file.clone(), format!("[grpc] protoset: {e}")))
        } else if !section.proto.is_empty() {
            let files: Vec<PathBuf> = section.proto.iter().map(|f| self.path(f)).collect();
            let include: Vec<PathBuf> = section.import_path.iter().map(|d| self.path(d)).collect();
            Schema::from_protos(&files, &include)
                .map_err(|e| (section.proto[0].clone(), format!("[grpc] proto: {e}")))
        } else {
            let tls = tls.map(|t| t.with_version(HttpVersion::Http2));
            let options = ConnectOptions {
                local: None,
                timeout: connect_timeout.max(headroom_grpc::REFLECTION_TIMEOUT),
                tls: tls.as_ref(),
                max_streams: 1,
                keepalive: None,
            };
            headroom_grpc::reflect(
                endpoint.addr,
                (&endpoint.host_header, endpoint.https),
                options,
            )
            .map_err(|e| {
                let first = raw.requests.iter().find_map(|r| r.grpc.clone());
                (
                    first.unwrap_or_default(),
                    format!(
                        "grpc: no [grpc] proto or protoset given, and the server's reflection failed: {e}"
                    ),
                )
            })
        };
        match schema {
            Ok(schema) => self.grpc = Some(schema),
            Err((needle, message)) => self.problem(Some("grpc"), "grpc", &needle, message),
        }
    }

    /// Request `r` as the HTTP/2 request of the gRPC call it names, and
    /// the method: `Some(None)` for a request that is no gRPC call, `None`
    /// (a problem recorded) when the method is unknown.
    pub(super) fn grpc_request(
        &mut self,
        r: &RawRequest,
        http_timeout: Option<&str>,
    ) -> Option<Option<(RawRequest, Arc<Method>)>> {
        let a = Some(r.name.as_str());
        let Some(name) = r.grpc.as_deref() else {
            return Some(None);
        };
        if r.path.is_some() || r.url.is_some() {
            self.problem(
                a,
                "grpc",
                name,
                format!(
                    "request `{}`: a gRPC call's path is its method's: give `grpc` without `path` or `url`",
                    r.name
                ),
            );
            return None;
        }
        // No schema: its problem is recorded already.
        let method = match self.grpc.as_ref()?.method(name) {
            Ok(m) => Method {
                compression: self.grpc_compression,
                ..m
            },
            Err(e) => {
                self.problem(a, "grpc", name, format!("request `{}`: {e}", r.name));
                return None;
            }
        };
        let mut call = r.clone();
        call.path = Some(method.path.clone());
        call.method = Some("POST".into());
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        headers.insert("content-type".into(), "application/grpc".into());
        headers.insert("te".into(), "trailers".into());
        if let Some(encoding) = method.compression.header() {
            headers.insert("grpc-encoding".into(), encoding.into());
            headers.insert("grpc-accept-encoding".into(), encoding.into());
        }
        // The call's deadline: its own timeout, else `[http] timeout`.
        let timeout = r.timeout.as_deref().or(http_timeout);
        if let Some(t) = timeout.and_then(|t| humantime::parse_duration(t).ok()) {
            headers.insert("grpc-timeout".into(), headroom_grpc::timeout_header(t));
        }
        for (key, value) in r.headers.clone().unwrap_or_default() {
            let value = self.binary_metadata(r, &key, value)?;
            headers.insert(key, value);
        }
        call.headers = Some(headers);
        if call.json.is_none() && call.body.is_none() && call.body_file.is_none() {
            call.body = Some("{}".into());
        }
        Some(Some((call, Arc::new(method))))
    }

    /// Metadata `key: value` as it goes on the wire: a binary field (its
    /// name ends in `-bin`) is given base64-encoded, as gRPC carries it,
    /// and sent unpadded (gRPC's spec: accept either, send unpadded); one
    /// that is not base64 is a problem (a templated one goes as rendered).
    fn binary_metadata(&mut self, r: &RawRequest, key: &str, value: String) -> Option<String> {
        use base64::Engine as _;
        if !key.to_ascii_lowercase().ends_with("-bin") || value.contains("{{") {
            return Some(value);
        }
        let trimmed = value.trim_end_matches('=');
        match base64::engine::general_purpose::STANDARD_NO_PAD.decode(trimmed) {
            Ok(bytes) => Some(base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)),
            Err(e) => {
                self.problem(
                    Some(&r.name),
                    key,
                    &value,
                    format!(
                        "request `{}`: metadata `{key}` is binary (its name ends in -bin): give its value base64-encoded ({e})",
                        r.name
                    ),
                );
                None
            }
        }
    }

    /// A gRPC call's message, encoded now (nothing in it templated).
    pub(super) fn grpc_message(
        &mut self,
        r: &RawRequest,
        method: &Method,
        json: &str,
    ) -> Option<Vec<u8>> {
        match method.encode_json(json) {
            Ok(framed) => Some(framed),
            Err(e) => {
                let key = if r.json.is_some() { "json" } else { "body" };
                self.problem(
                    Some(&r.name),
                    key,
                    key,
                    format!("request `{}`: {e}", r.name),
                );
                None
            }
        }
    }

    /// Each streaming gRPC call's plan: its `stream` sends, and the two
    /// entries its answer's messages are timed in (added after every
    /// other request, weight 0: never drawn from a mix).
    pub(super) fn grpc_streams(&mut self, raw: &RawScenario, out: &mut Vec<RequestSpec>) {
        if self.grpc.is_none() {
            // No schema (its problem is recorded): nothing to say of streams.
            return;
        }
        for r in &raw.requests {
            let a = Some(r.name.as_str());
            let streaming = self.grpc_streaming(r);
            if r.stream.is_some() && !streaming.is_some_and(|(sends, _)| sends) {
                self.problem(
                    a,
                    "stream",
                    "stream",
                    format!(
                        "request `{}`: `stream` sends a gRPC call's messages one by one — the call must stream its requests (`stream` in the .proto's request type)",
                        r.name
                    ),
                );
                continue;
            }
            if streaming.is_none() {
                continue;
            }
            let raw_stream = r.stream.clone().unwrap_or_default();
            if raw_stream.count == Some(0) {
                self.problem(
                    a,
                    "count",
                    "count",
                    format!("request `{}`: stream.count must be at least 1", r.name),
                );
            }
            let interval = raw_stream
                .interval
                .as_deref()
                .and_then(|t| self.duration(a, "interval", t));
            let Some(at) = out.iter().position(|s| s.name == r.name) else {
                continue;
            };
            let entry = |what: &str| RequestSpec {
                name: format!("{} {what}", r.name),
                method: "gRPC".into(),
                weight: 0,
                encoded: Vec::new(),
                template: None,
                checks: Vec::new(),
                extracts: Vec::new(),
                capture: Default::default(),
                before: None,
                after: None,
                grpc: None,
                grpc_stream: None,
                ..out[at].clone()
            };
            let (first, next) = (entry("first message"), entry("next message"));
            for e in [&first, &next] {
                if out.iter().any(|s| s.name == e.name) {
                    self.problem(a, "name", &r.name, format!("request `{}`: its messages are timed as `{}`, the name of another request", r.name, e.name));
                }
            }
            out.extend([first, next]);
            out[at].grpc_stream = Some(GrpcStream {
                count: raw_stream.count,
                interval,
                first_message: out.len() - 2,
                next_message: out.len() - 1,
            });
        }
    }

    /// Whether request `r` is a streaming gRPC call: `Some((its requests
    /// stream, its answers stream))`, `None` for a unary call or no call.
    fn grpc_streaming(&self, r: &RawRequest) -> Option<(bool, bool)> {
        let method = self.grpc.as_ref()?.method(r.grpc.as_deref()?).ok()?;
        method
            .is_streaming()
            .then_some((method.client_streaming, method.server_streaming))
    }
}
