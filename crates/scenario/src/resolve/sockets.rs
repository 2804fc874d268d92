//! Socket steps of sessions (`ws`, `sse`, `send`, `send_binary`, `expect`,
//! `hold`, `close`). Each measured step becomes an entry of the plan's
//! requests, written here as a `[[request]]` would be and built with them:
//! the handshake is a GET with the step's headers (and the upgrade's), and
//! each `expect` an entry whose checks are the message's match rules and
//! whose extractions are the step's `extract`.

use super::builder::Builder;
use crate::raw::*;
use headroom_engine::plan::socket::{MessageExpect, Ping, SocketKind, SocketStep};
use headroom_engine::plan::RequestSpec;
use std::collections::BTreeMap;
use std::time::Duration;

/// The entries of one socket step, by the step's place in its session.
#[derive(Clone, Debug)]
pub(super) struct SocketEntries {
    pub kind: SocketKind,
    /// The handshake (`ws`, `sse`).
    pub handshake: Option<String>,
    /// The awaited message.
    pub expect: Option<String>,
}

/// Every socket step's entries, keyed by `session/path` (see [`key`]).
pub(super) type SocketNames = BTreeMap<String, SocketEntries>;

/// A step's key: its session and its place (`3.1`: the first step inside
/// step 3; `4/2.1`: inside the second branch of choice 4).
pub(super) fn key(session: &str, path: &str) -> String {
    format!("{session}/{path}")
}

/// The method shown for a message entry in the results.
pub const MESSAGE_METHODS: [&str; 3] = ["WS", "SSE", "gRPC"];

/// Whether a raw step is one of the socket kinds.
pub(super) fn is_socket_step(st: &RawStep) -> bool {
    st.ws.is_some()
        || st.sse.is_some()
        || st.grpc_stream.is_some()
        || st.send.is_some()
        || st.send_binary.is_some()
        || st.hold.is_some()
        || st.close.is_some()
        || (st.expect.is_some() && st.request.is_none())
}

/// A `ws://` / `wss://` URL as the `http://` / `https://` URL its handshake
/// goes to; a path as it is.
fn handshake_target(text: &str) -> (Option<String>, Option<String>) {
    let lower = text.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("ws://").map(|_| &text[5..]) {
        (Some(format!("http://{rest}")), None)
    } else if let Some(rest) = lower.strip_prefix("wss://").map(|_| &text[6..]) {
        (Some(format!("https://{rest}")), None)
    } else if text.contains("://") {
        (Some(text.to_string()), None)
    } else {
        (None, Some(text.to_string()))
    }
}

/// A measured step's entry, as a `[[request]]` on the socket's target
/// (a GET: the handshake's own, or one that stands for a message and is
/// never sent); weight 0, as it is never drawn from a mix.
fn entry(name: &str, target: &str) -> RawRequest {
    let (url, path) = handshake_target(target);
    RawRequest {
        name: name.to_string(),
        method: Some("GET".into()),
        url,
        path,
        weight: Some(0),
        ..Default::default()
    }
}

/// The match rules of an awaited message, as checks on a body.
fn message_checks(e: &RawMessageExpect) -> Vec<RawCheck> {
    let mut checks = Vec::new();
    if let Some(c) = &e.contains {
        checks.push(RawCheck {
            body_contains: Some(c.clone()),
            ..Default::default()
        });
    }
    if let Some(r) = &e.regex {
        checks.push(RawCheck {
            body_regex: Some(r.clone()),
            ..Default::default()
        });
    }
    if let Some(p) = &e.json_path {
        checks.push(RawCheck {
            json_path: Some(p.clone()),
            equals: e.equals.clone(),
            exists: e.exists,
            ..Default::default()
        });
    }
    if let Some(name) = &e.event {
        // An event's name is read as a header of the message.
        checks.push(RawCheck {
            header: Some("event".into()),
            equals: Some(serde_json::Value::String(name.clone())),
            ..Default::default()
        });
    }
    checks
}

impl Builder<'_> {
    /// The requests socket steps add to the plan, and their names by step.
    pub(super) fn socket_requests(&mut self, raw: &RawScenario) -> (Vec<RawRequest>, SocketNames) {
        let mut out = Vec::new();
        let mut names = SocketNames::new();
        for s in &raw.sessions {
            let mut open = None;
            self.walk_sockets(&s.name, &s.steps, "", &mut open, &mut out, &mut names);
        }
        (out, names)
    }

    /// `open`: the socket the steps so far opened (its kind and target),
    /// in file order.
    fn walk_sockets(
        &mut self,
        session: &str,
        steps: &[RawStep],
        prefix: &str,
        open: &mut Option<(SocketKind, String)>,
        out: &mut Vec<RawRequest>,
        names: &mut SocketNames,
    ) {
        let a = Some(session);
        for (i, st) in steps.iter().enumerate() {
            let path = format!("{prefix}{}", i + 1);
            if let Some(inner) = &st.steps {
                self.walk_sockets(session, inner, &format!("{path}."), open, out, names);
            }
            for (b, branch) in st.choice.iter().flatten().enumerate() {
                let at = format!("{path}/{}.", b + 1);
                self.walk_sockets(session, &branch.steps, &at, open, out, names);
            }
            if !is_socket_step(st) {
                continue;
            }
            let label = st
                .name
                .clone()
                .unwrap_or_else(|| format!("{session}: step {path}"));
            let opening = match (&st.ws, &st.sse, &st.grpc_stream) {
                (Some(t), _, _) => Some((SocketKind::WebSocket, t.clone())),
                (None, Some(t), _) => Some((SocketKind::EventStream, t.clone())),
                // Its entries are placed at the method's path.
                (None, None, Some(m)) => {
                    Some((SocketKind::Grpc, format!("/{}", m.trim_start_matches('/'))))
                }
                _ => None,
            };
            let mut entries = SocketEntries {
                kind: SocketKind::WebSocket,
                handshake: None,
                expect: None,
            };
            if let Some((kind, target)) = &opening {
                let request = handshake_request(st, *kind, target, &label);
                entries.handshake = Some(request.name.clone());
                out.push(request);
                *open = Some((*kind, target.clone()));
            } else if st.headers.is_some() {
                self.problem(
                    a,
                    "headers",
                    "headers",
                    format!("session `{session}` step {path}: `headers` go with `ws` or `sse`"),
                );
            }
            let Some((kind, target)) = open.clone() else {
                self.problem(
                    a,
                    "steps",
                    "steps",
                    format!(
                        "session `{session}` step {path}: no socket is open here — open one with `ws` or `sse` first"
                    ),
                );
                continue;
            };
            entries.kind = kind;
            self.check_send((session, &path), st, kind);
            if let Some(expect) = &st.expect {
                let name = expect_name(st, opening.is_some(), entries.handshake.as_deref(), &label);
                out.push(RawRequest {
                    checks: message_checks(expect),
                    extracts: st.extract.clone().unwrap_or_default(),
                    ..entry(&name, &target)
                });
                entries.expect = Some(name);
            } else if st.extract.is_some() {
                self.problem(
                    a,
                    "extract",
                    "extract",
                    format!("session `{session}` step {path}: `extract` takes from the message an `expect` waits for — add one"),
                );
            }
            if let Some(ping) = self.ping_entry((session, &path), st, (kind, &target), &label) {
                entries.expect = Some(ping.name.clone());
                out.push(ping);
            }
            if st.close.is_some() {
                *open = None;
            }
            names.insert(key(session, &path), entries);
        }
    }

    /// A `send` or `send_binary` on a socket that cannot take it: an event
    /// stream only receives; a gRPC stream's messages are JSON.
    fn check_send(&mut self, (session, path): (&str, &str), st: &RawStep, kind: SocketKind) {
        let (field, why) = match kind {
            SocketKind::Grpc if st.send_binary.is_some() => (
                "send_binary",
                "a gRPC stream's messages are JSON — use `send`",
            ),
            SocketKind::EventStream if st.send.is_some() || st.send_binary.is_some() => (
                "send",
                "an event stream only receives — `send` needs a `ws` socket",
            ),
            _ => return,
        };
        let message = format!("session `{session}` step {path}: {why}");
        self.problem(Some(session), field, field, message);
    }

    /// A held WebSocket's pings (`ping_every`): each round trip is an
    /// entry, like a message's. `None` without pings, or where they do not
    /// belong (a problem said).
    fn ping_entry(
        &mut self,
        (session, path): (&str, &str),
        st: &RawStep,
        (kind, target): (SocketKind, &str),
        label: &str,
    ) -> Option<RawRequest> {
        let a = Some(session);
        let misplaced = match (&st.ping_every, st.hold.is_some(), kind) {
            (None, _, _) => return None,
            (Some(_), true, SocketKind::WebSocket) => {
                let name = st.name.clone().unwrap_or_else(|| format!("{label} ping"));
                return Some(entry(&name, target));
            }
            (Some(_), false, _) => "`ping_every` goes with `hold`",
            (Some(_), true, SocketKind::EventStream | SocketKind::Grpc) => {
                "pings are WebSocket's — `ping_every` needs a `ws` socket"
            }
        };
        self.problem(
            a,
            "ping_every",
            "ping_every",
            format!("session `{session}` step {path}: {misplaced}"),
        );
        None
    }

    /// The engine's step for socket step `st` (at `path` of `session`).
    pub(super) fn socket_step(
        &mut self,
        (session, path): (&str, &str),
        st: &RawStep,
        names: &SocketNames,
        requests: &[RequestSpec],
        default_within: Duration,
    ) -> Option<SocketStep> {
        let a = Some(session);
        let entries = names.get(&key(session, path))?;
        let index = |name: &Option<String>| {
            name.as_ref()
                .and_then(|n| requests.iter().position(|r| &r.name == n))
        };
        let expect = match (&st.expect, index(&entries.expect)) {
            (Some(e), Some(entry)) => {
                let within = match &e.within {
                    Some(w) => self.duration(a, "within", w)?,
                    None => default_within,
                };
                Some(MessageExpect { entry, within })
            }
            _ => None,
        };
        if st.ws.is_some() || st.sse.is_some() || st.grpc_stream.is_some() {
            return Some(SocketStep::Open {
                kind: entries.kind,
                handshake: index(&entries.handshake)?,
                expect,
            });
        }
        if let Some(text) = st.send.as_ref().or(st.send_binary.as_ref()) {
            let field = if st.send.is_some() {
                "send"
            } else {
                "send_binary"
            };
            let payload = self.template(a, field, text)?;
            if st.send_binary.is_some() && !text.contains("{{") {
                use base64::Engine as _;
                if base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .is_err()
                {
                    self.problem(
                        a,
                        "send_binary",
                        text,
                        format!("session `{session}` step {path}: send_binary is not base64"),
                    );
                    return None;
                }
            }
            return Some(SocketStep::Send {
                payload,
                binary: st.send_binary.is_some(),
                expect,
            });
        }
        if let Some(hold) = &st.hold {
            let pause = self.duration(a, "hold", hold)?;
            let ping = match (&st.ping_every, index(&entries.expect)) {
                (Some(every), Some(entry)) => Some(Ping {
                    every: self.duration(a, "ping_every", every)?,
                    entry,
                }),
                _ => None,
            };
            return Some(SocketStep::Hold { pause, ping });
        }
        if let Some(code) = st.close {
            // RFC 6455 §7.4: codes an endpoint may send.
            if !matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999) {
                self.problem(
                    a,
                    "close",
                    &code.to_string(),
                    format!(
                        "session `{session}` step {path}: close code {code} may not be sent (use 1000, 1001, 1008, 1011, or 3000–4999)"
                    ),
                );
                return None;
            }
            return Some(SocketStep::Close(code));
        }
        expect.map(SocketStep::Expect)
    }
}

/// Message entries are shown as `WS` / `SSE` in the results (nothing of
/// theirs goes on the wire as a request).
pub(super) fn label_messages(requests: &mut [RequestSpec], names: &SocketNames) {
    for entries in names.values() {
        let Some(name) = &entries.expect else {
            continue;
        };
        if let Some(spec) = requests.iter_mut().find(|r| &r.name == name) {
            spec.method = match entries.kind {
                SocketKind::WebSocket => MESSAGE_METHODS[0],
                SocketKind::EventStream => MESSAGE_METHODS[1],
                SocketKind::Grpc => MESSAGE_METHODS[2],
            }
            .to_string();
            spec.encoded.clear();
        }
    }
}
/// The entry of the message a socket step waits for: after the step's
/// name or its handshake's, and what it does (`send`, `expect`).
fn expect_name(st: &RawStep, opens: bool, handshake: Option<&str>, label: &str) -> String {
    let sends = st.send.is_some() || st.send_binary.is_some();
    match (&st.name, opens) {
        (Some(n), true) => format!("{n} expect"),
        (Some(n), false) => n.clone(),
        (None, true) => format!("{} expect", handshake.unwrap_or(label)),
        (None, false) if sends => format!("{label} send"),
        (None, false) => format!("{label} expect"),
    }
}

/// The handshake that opens socket step `st`'s socket: the protocol's
/// headers (unless the step sets them), named after the step.
fn handshake_request(st: &RawStep, kind: SocketKind, target: &str, label: &str) -> RawRequest {
    if kind == SocketKind::Grpc {
        // The call's head as any gRPC request's (`grpc_request`); its
        // messages go by `send` steps.
        let method = target.trim_start_matches('/').to_string();
        return RawRequest {
            name: st
                .name
                .clone()
                .unwrap_or_else(|| format!("{label} grpc_stream {method}")),
            grpc: Some(method),
            headers: st.headers.clone(),
            weight: Some(0),
            ..RawRequest::default()
        };
    }
    let mut headers = st.headers.clone().unwrap_or_default();
    let protocol: &[(&str, &str)] = match kind {
        SocketKind::WebSocket => &[
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Version", "13"),
        ],
        SocketKind::EventStream => &[
            ("Accept", "text/event-stream"),
            ("Cache-Control", "no-cache"),
        ],
        // gRPC's head is `grpc_request`'s (returned above).
        SocketKind::Grpc => &[],
    };
    for (k, v) in protocol {
        if !headers.keys().any(|h| h.eq_ignore_ascii_case(k)) {
            headers.insert(k.to_string(), v.to_string());
        }
    }
    let word = match kind {
        SocketKind::WebSocket => "ws",
        SocketKind::EventStream => "sse",
        SocketKind::Grpc => "grpc_stream",
    };
    let name = match &st.name {
        Some(n) => n.clone(),
        None => format!("{label} {word} {target}"),
    };
    RawRequest {
        headers: Some(headers),
        ..entry(&name, target)
    }
}
