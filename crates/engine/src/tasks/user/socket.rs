//! A user's WebSocket or event stream, and the session steps that use it
//! (see `plan::socket`): open it with a handshake measured as a request,
//! send messages, wait for the one that matches (the round trip measured
//! from the send), hold, close. Every message and close is counted in the
//! recorder's socket figures as it happens.

use super::grpc_stream::{grpc_end, GrpcSocket, StreamRead};
use super::{Control, User};
use crate::connections::{Claim, Origin};
use crate::metrics::{ErrorClass, Outcome};
use crate::plan::check::ResponseView;
use crate::plan::socket::{MessageExpect, Ping, SocketKind, SocketStep, CLOSE_WAIT, SSE_RECONNECT};
use crate::plan::template::Template;
use crate::plan::RequestSpec;
use crate::shared::{InFlight, Shared};
use crate::tasks::timeout::timed;
use base64::Engine as _;
use headroom_http::exchange::{self, Phase};
use headroom_http::sse::{self, EventParser, EventStream};
use headroom_http::websocket::{self, Incoming, WebSocket};
use headroom_http::{Capture, Failure};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// An open socket and its place under the origin's connection cap (a
/// gRPC stream holds its place on an HTTP/2 connection itself).
pub(crate) struct Socket {
    wire: Wire,
    /// The handshake request: an event stream reconnects with it.
    handshake: usize,
    _claim: Option<Claim>,
}

enum Wire {
    Ws(WebSocket),
    Sse(EventStream),
    Grpc(Box<GrpcSocket>),
}

/// One thing read from the socket, either protocol.
enum Received {
    Message {
        data: Vec<u8>,
        event: Option<(String, Option<String>)>,
    },
    Ping,
    Pong,
    /// Closed by the server: how, for the close counts.
    Closed(String),
    /// Not readable any more (a gRPC answer not framed as gRPC).
    Broken(ErrorClass),
}

impl Socket {
    async fn next(&mut self) -> Result<Received, Failure> {
        match &mut self.wire {
            Wire::Ws(ws) => Ok(match ws.next().await? {
                Incoming::Message { data, .. } => Received::Message { data, event: None },
                Incoming::Ping => Received::Ping,
                Incoming::Pong => Received::Pong,
                Incoming::Closed(Some(code)) => Received::Closed(format!("server:{code}")),
                Incoming::Closed(None) => Received::Closed("server:no_code".into()),
                Incoming::Ended => Received::Closed("server:no_close_frame".into()),
            }),
            Wire::Sse(stream) => Ok(match stream.next_event().await? {
                sse::Next::Event(e) => Received::Message {
                    data: e.data.into_bytes(),
                    event: Some((e.name, e.id)),
                },
                sse::Next::Ended => Received::Closed("server:ended".into()),
            }),
            Wire::Grpc(stream) => Ok(match stream.next().await {
                Ok(StreamRead::Message(data)) => Received::Message { data, event: None },
                Ok(StreamRead::Ended(status)) => Received::Closed(grpc_end(status)),
                Err(class) => Received::Broken(class),
            }),
        }
    }
}

/// What became of an event stream the server ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reconnect {
    /// Open again.
    Open,
    /// Not reconnected: not an event stream, no time left, or refused.
    No,
    /// The run began stopping while it waited to reconnect.
    Stopped,
}

/// Why waiting for a message ended without one.
enum Gone {
    /// The server closed the socket (counted under this key).
    Closed(String),
    Failed(Failure),
    Error(ErrorClass),
}

impl User {
    pub(super) async fn socket_step(&mut self, shared: &Shared, step: &SocketStep) -> Control {
        match step {
            SocketStep::Open {
                kind,
                handshake,
                expect,
            } => {
                let opening = match kind {
                    SocketKind::Grpc => self.open_grpc_stream(shared, *handshake).await,
                    _ => self.open_socket(shared, *kind, *handshake, None).await,
                };
                let opened_at = match opening {
                    Ok(at) => at,
                    Err(control) => return control,
                };
                match expect {
                    Some(expect) => self.expect_message(shared, expect, opened_at).await,
                    None => Control::Continue,
                }
            }
            SocketStep::Send {
                payload,
                binary,
                expect,
            } => self.send(shared, payload, *binary, expect.as_ref()).await,
            SocketStep::Expect(expect) => {
                if shared.stop.is_stopping() {
                    return Control::Stop;
                }
                self.expect_message(shared, expect, Instant::now()).await
            }
            SocketStep::Hold { pause, ping } => self.hold(shared, *pause, ping.as_ref()).await,
            SocketStep::Close(code) => {
                self.close_socket(shared, *code).await;
                Control::Continue
            }
        }
    }

    /// Opens the socket with handshake request `index` (closing one the
    /// user holds); the handshake is recorded as that request. `last_id`:
    /// an event stream reconnecting. `Ok(when it opened)`, or `Err` with
    /// what the session does next.
    async fn open_socket(
        &mut self,
        shared: &Shared,
        kind: SocketKind,
        index: usize,
        last_id: Option<String>,
    ) -> Result<Instant, Control> {
        let now = self.before_open(shared).await?;
        let spec = &shared.plan.requests[index];
        let mut in_flight = InFlight::begin(shared, index, now);
        let failed = |in_flight: InFlight, class: ErrorClass| {
            let outcome = Outcome {
                error: Some(class),
                ..Default::default()
            };
            in_flight.finish_at(Instant::now(), outcome);
            Err(Control::EndIteration)
        };
        let rendered = {
            let mut rng = shared.rng.borrow_mut();
            spec.render_target(&mut self.script.scope(&mut rng))
        };
        let (origin, target) = match self.origin(shared, spec, rendered.as_deref()).await {
            Ok(found) => found,
            Err(unreachable) => return failed(in_flight, unreachable.0),
        };
        let (request, key) =
            match self.handshake(shared, (spec, &origin, target), kind, last_id.as_deref()) {
                Ok(handshake) => handshake,
                Err(class) => return failed(in_flight, class),
            };
        in_flight.sent_at(now);
        in_flight.trace_ids = self.script.trace_ids;
        let mut conn = match self.connect(shared, &origin, index).await {
            Ok(conn) => conn,
            Err(failure) => return failed(in_flight, failure.into()),
        };
        let want = Capture {
            headers: true,
            set_cookies: shared.plan.cookies,
            ..Capture::default()
        };
        let due = Instant::now() + shared.plan.timeout_of(spec);
        let head = {
            let open = std::pin::pin!(conn.http.open_stream(
                &request,
                want,
                &mut self.script.captured,
                &in_flight.attempts
            ));
            timed(&mut self.request_timer, due, open).await
        };
        let head = match head {
            Err(()) => return failed(in_flight, exchange::timed_out(Phase::Exchanging).into()),
            Ok(Err(failure)) => return failed(in_flight, failure.into()),
            Ok(Ok(head)) => head,
        };
        let done = Instant::now();
        let answer = self.answered(
            shared,
            (spec, index, &origin, target),
            (kind, key.as_deref()),
            &head,
            (now, done),
        );
        let (outcome, opened) = match answer {
            Ok(outcome) => (outcome, true),
            Err(refused) => (refused, false),
        };
        in_flight.finish_at(done, outcome);
        if !opened {
            return Err(Control::EndIteration);
        }
        let (http, claim) = (*conn).into_parts();
        let wire = match kind {
            SocketKind::WebSocket => Wire::Ws(WebSocket::over(http).await),
            SocketKind::EventStream => {
                let parser = EventParser::resuming(last_id);
                Wire::Sse(EventStream::over(http, &head, parser))
            }
            SocketKind::Grpc => unreachable!("gRPC streams open in open_grpc_stream"),
        };
        self.socket = Some(Box::new(Socket {
            wire,
            handshake: index,
            _claim: Some(claim),
        }));
        let mut recorder = shared.recorder.borrow_mut();
        recorder.socket_open(true);
        match kind {
            SocketKind::WebSocket => recorder.sockets().opened_ws += 1,
            SocketKind::EventStream => recorder.sockets().opened_sse += 1,
            SocketKind::Grpc => recorder.sockets().opened_grpc += 1,
        }
        Ok(done)
    }

    /// Before a socket or stream opens: the one the session holds is
    /// closed (a session holds one at a time), and the send is allowed now.
    async fn before_open(&mut self, shared: &Shared) -> Result<Instant, Control> {
        if self.socket.is_some() {
            self.close_socket(shared, 1000).await;
        }
        self.may_send(shared).ok_or(Control::Stop)
    }

    /// Opens the gRPC stream of request `index` (closing a socket the user
    /// holds) on one of the worker's HTTP/2 connections: its head sent, no
    /// message yet. Its entry is recorded when it ends (see
    /// [`GrpcSocket`]). `Ok(when it opened)`, or `Err` with what the
    /// session does next.
    async fn open_grpc_stream(
        &mut self,
        shared: &Shared,
        index: usize,
    ) -> Result<Instant, Control> {
        let now = self.before_open(shared).await?;
        let spec = &shared.plan.requests[index];
        let failed = |class: ErrorClass| {
            let in_flight = InFlight::begin(shared, index, now);
            let outcome = Outcome {
                error: Some(class),
                ..Default::default()
            };
            in_flight.finish_at(Instant::now(), outcome);
            Err(Control::EndIteration)
        };
        let Some(method) = spec.grpc.clone() else {
            return failed(ErrorClass::MalformedRequest);
        };
        let rendered = {
            let mut rng = shared.rng.borrow_mut();
            spec.render_target(&mut self.script.scope(&mut rng))
        };
        let (origin, target) = match self.origin(shared, spec, rendered.as_deref()).await {
            Ok(found) => found,
            Err(unreachable) => return failed(unreachable.0),
        };
        let wire = match self.handshake(shared, (spec, &origin, target), SocketKind::Grpc, None) {
            Ok((wire, _)) => wire,
            Err(class) => return failed(class),
        };
        let head = match headroom_http::h2::H2Request::from_wire(&wire, origin.https) {
            Ok(request) => request.into_parts(),
            Err(failure) => return failed(failure.into()),
        };
        let acquired = match self.take_stream(shared, &origin, None, index).await {
            Ok(acquired) => acquired,
            Err(failure) => return failed(failure.into()),
        };
        let conn = acquired.slot.conn.clone();
        let attempts = headroom_http::exchange::Attempts::default();
        let opened = GrpcSocket::open(
            (&conn.http, head),
            method,
            (index, acquired.slot),
            &attempts,
        );
        let stream = match opened.await {
            Ok(stream) => stream,
            Err(failure) => return failed(failure.into()),
        };
        self.socket = Some(Box::new(Socket {
            wire: Wire::Grpc(Box::new(stream)),
            handshake: index,
            _claim: None,
        }));
        let mut recorder = shared.recorder.borrow_mut();
        recorder.socket_open(true);
        recorder.sockets().opened_grpc += 1;
        Ok(Instant::now())
    }

    /// The handshake's answer judged (checks, cookies) and whether it
    /// opened the socket: `Ok` with its outcome, or `Err` with the
    /// outcome of a refused upgrade or stream.
    fn answered(
        &mut self,
        shared: &Shared,
        (spec, index, origin, target): (&RequestSpec, usize, &Rc<Origin>, &str),
        (kind, key): (SocketKind, Option<&str>),
        head: &headroom_http::response::Head,
        (sent, done): (Instant, Instant),
    ) -> Result<Outcome, Outcome> {
        let mut outcome = Outcome {
            status: Some(head.status),
            bytes: head.len as u64,
            ..Default::default()
        };
        self.script.judge(
            shared,
            &mut self.jar,
            (spec, index, origin, target),
            head.status,
            (sent, done),
            &mut outcome,
        );
        let opened = match key {
            Some(key) => websocket::accepted(head.status, key, &self.script.captured),
            None => sse::is_event_stream(head.status, self.script.captured.header("content-type")),
        };
        if opened {
            return Ok(outcome);
        }
        outcome.error = Some(match kind {
            SocketKind::WebSocket => ErrorClass::WsUpgradeRefused,
            SocketKind::EventStream => ErrorClass::SseRefused,
            SocketKind::Grpc => unreachable!("gRPC streams open in open_grpc_stream"),
        });
        outcome.failed_check = None;
        Err(outcome)
    }

    /// The handshake request as it goes out, with its WebSocket key (new
    /// for every handshake) or, for an event stream that reconnects,
    /// where it left off (a gRPC stream's: the call's head as rendered).
    /// Kept alive: the server's answer decides (a 101 keeps it).
    fn handshake(
        &mut self,
        shared: &Shared,
        (spec, origin, target): (&RequestSpec, &Origin, &str),
        kind: SocketKind,
        last_id: Option<&str>,
    ) -> Result<(Vec<u8>, Option<String>), ErrorClass> {
        let cookie = crate::cookies::header(self.jar.as_deref(), origin, spec, target);
        let wire = self.script.write_request(
            shared,
            spec,
            (target, &origin.host_header),
            (true, cookie.as_deref()),
            &mut self.wire,
        )?;
        let wire = spec.wire(wire, &self.wire).to_vec();
        let key = (kind == SocketKind::WebSocket).then(websocket::new_key);
        let mut request = Vec::new();
        match (&key, last_id) {
            (Some(key), _) => {
                headroom_http::with_headers(
                    &wire,
                    [("Sec-WebSocket-Key", key.as_str())],
                    &mut request,
                );
            }
            (None, Some(id)) => {
                headroom_http::with_headers(&wire, [("Last-Event-ID", id)], &mut request)
            }
            (None, None) => request = wire,
        }
        Ok((request, key))
    }

    /// Sends a message on the WebSocket, then waits for `expect`.
    async fn send(
        &mut self,
        shared: &Shared,
        payload: &Template,
        binary: bool,
        expect: Option<&MessageExpect>,
    ) -> Control {
        if shared.stop.is_stopping() || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Control::Stop;
        }
        let data = {
            let mut rng = shared.rng.borrow_mut();
            let mut out = Vec::new();
            payload.render(&mut self.script.scope(&mut rng), &mut out);
            out
        };
        let data = if binary {
            base64::engine::general_purpose::STANDARD.decode(&data).ok()
        } else {
            Some(data)
        };
        let sent = Instant::now();
        let written = match (data, self.socket.as_deref_mut()) {
            // No WebSocket (the server closed it): nothing left to send on.
            (_, None)
            | (
                _,
                Some(Socket {
                    wire: Wire::Sse(_), ..
                }),
            ) => return Control::EndIteration,
            (None, _) => Err(ErrorClass::MalformedRequest),
            (
                Some(data),
                Some(Socket {
                    wire: Wire::Grpc(stream),
                    ..
                }),
            ) => stream.send(&data),
            (
                Some(data),
                Some(Socket {
                    wire: Wire::Ws(ws), ..
                }),
            ) => {
                let len = data.len() as u64;
                let due = sent + shared.plan.request_timeout;
                let write = std::pin::pin!(ws.send(data, !binary));
                match timed(&mut self.request_timer, due, write).await {
                    Ok(Ok(())) => Ok(len),
                    Err(()) => Err(exchange::timed_out(Phase::Exchanging).into()),
                    Ok(Err(failure)) => Err(failure.into()),
                }
            }
        };
        let broken = matches!(written, Err(class)
            if class != ErrorClass::RequestTimeout && class != ErrorClass::MalformedRequest);
        if let (true, Err(class)) = (broken, written) {
            // The write failed: the socket is no use any more.
            self.socket_gone(shared, Gone::Error(class));
        }
        let failure = match written {
            Ok(len) => {
                let mut recorder = shared.recorder.borrow_mut();
                let counts = recorder.sockets();
                counts.messages_sent += 1;
                counts.bytes_sent += len;
                None
            }
            Err(class) => Some(class),
        };
        match (failure, expect) {
            (None, Some(expect)) => self.expect_message(shared, expect, sent).await,
            (None, None) => Control::Continue,
            (Some(class), expect) => {
                if let Some(expect) = expect {
                    let in_flight = InFlight::begin(shared, expect.entry, sent);
                    let outcome = Outcome {
                        error: Some(class),
                        ..Default::default()
                    };
                    in_flight.finish_at(Instant::now(), outcome);
                }
                if broken {
                    Control::EndIteration
                } else {
                    Control::Continue
                }
            }
        }
    }

    /// Waits for the first message that passes `expect`'s checks, timed
    /// from `since` (the send, or the socket's opening) and recorded as
    /// its entry; other messages are counted as unmatched.
    async fn expect_message(
        &mut self,
        shared: &Shared,
        expect: &MessageExpect,
        since: Instant,
    ) -> Control {
        if self.socket.is_none() {
            // Closed by the server before (counted then): nothing to wait on.
            return Control::EndIteration;
        }
        let mut in_flight = InFlight::begin(shared, expect.entry, since);
        in_flight.sent_at(since);
        in_flight.attempts.head_sent();
        let due = since + expect.within;
        let mut outcome = Outcome::default();
        let mut control = Control::Continue;
        loop {
            let Some(socket) = self.socket.as_deref_mut() else {
                outcome.error = Some(ErrorClass::SocketClosed);
                control = Control::EndIteration;
                break;
            };
            let received = {
                let next = std::pin::pin!(socket.next());
                timed(&mut self.request_timer, due, next).await
            };
            let Ok(received) = received else {
                outcome.error = Some(ErrorClass::MessageTimeout);
                break;
            };
            match self.count(shared, received) {
                Ok(Some((data, event))) => {
                    let done = Instant::now();
                    self.script.captured.clear();
                    self.script.captured.body = data;
                    if let Some((name, id)) = event {
                        self.script.captured.headers.push(("event".into(), name));
                        if let Some(id) = id {
                            self.script.captured.headers.push(("id".into(), id));
                        }
                    }
                    if self.matches(shared, expect.entry, done.saturating_duration_since(since)) {
                        outcome.bytes = self.script.captured.body.len() as u64;
                        if let Some(failed) = self.extract(shared, expect.entry, since, done) {
                            outcome.error = Some(ErrorClass::CheckFailed);
                            outcome.failed_check = Some(failed);
                        }
                        in_flight.finish_at(done, outcome);
                        return Control::Continue;
                    }
                    shared.recorder.borrow_mut().sockets().unmatched += 1;
                }
                Ok(None) => {}
                Err(gone) => {
                    // An event stream the server ended reconnects (as a
                    // browser's does) if there is time left to wait.
                    let reconnect = self.reconnect_stream(shared, &gone, due).await;
                    if reconnect == Reconnect::Open {
                        continue;
                    }
                    outcome.error = Some(match &gone {
                        // The run's stop came while it waited to reconnect:
                        // cut off by the stop, as a request in flight is.
                        _ if reconnect == Reconnect::Stopped => ErrorClass::Aborted,
                        Gone::Closed(_) => ErrorClass::SocketClosed,
                        Gone::Failed(f) => (*f).into(),
                        Gone::Error(class) => *class,
                    });
                    self.socket_gone(shared, gone);
                    control = Control::EndIteration;
                    break;
                }
            }
        }
        in_flight.finish_at(Instant::now(), outcome);
        control
    }

    /// Whether the message in `captured` passes every check of `entry`.
    fn matches(&mut self, shared: &Shared, entry: usize, waited: Duration) -> bool {
        let spec = &shared.plan.requests[entry];
        let view = ResponseView::new(0, &self.script.captured, waited);
        let mut rng = shared.rng.borrow_mut();
        let mut scope = self.script.scope(&mut rng);
        spec.checks.iter().all(|c| c.passes(&view, &mut scope))
    }

    /// Runs `entry`'s extractions on the matching message: the id of one
    /// that found nothing.
    fn extract(
        &mut self,
        shared: &Shared,
        entry: usize,
        since: Instant,
        done: Instant,
    ) -> Option<u32> {
        let spec = &shared.plan.requests[entry];
        let view = ResponseView::new(
            0,
            &self.script.captured,
            done.saturating_duration_since(since),
        );
        let mut failed = None;
        for x in &spec.extracts {
            match x.apply(&view) {
                Some(value) => {
                    self.script.vars.insert(x.var.clone(), value);
                }
                None => failed = failed.or(Some(x.id)),
            }
        }
        failed
    }

    /// Counts what was read: `Ok(Some(message))` for a data message or an
    /// event, `Ok(None)` for a ping, `Err` when the socket is gone.
    #[allow(clippy::type_complexity)]
    fn count(
        &mut self,
        shared: &Shared,
        received: Result<Received, Failure>,
    ) -> Result<Option<(Vec<u8>, Option<(String, Option<String>)>)>, Gone> {
        let mut recorder = shared.recorder.borrow_mut();
        match received {
            Ok(Received::Message { data, event }) => {
                let counts = recorder.sockets();
                counts.messages_received += 1;
                counts.bytes_received += data.len() as u64;
                Ok(Some((data, event)))
            }
            Ok(Received::Ping) => {
                recorder.sockets().pings_received += 1;
                Ok(None)
            }
            Ok(Received::Pong) => Ok(None),
            Ok(Received::Closed(how)) => Err(Gone::Closed(how)),
            Ok(Received::Broken(class)) => Err(Gone::Error(class)),
            Err(failure) => Err(Gone::Failed(failure)),
        }
    }

    /// Stays connected for `pause` (bounded by the user's deadline),
    /// counting what comes; an event stream the server ends reconnects.
    /// With `ping`, a ping goes out every `ping.every`, each pong's round
    /// trip recorded; a ping unanswered when the next is due ends the
    /// socket (`ping_timeout`) and the iteration.
    pub(super) async fn hold(
        &mut self,
        shared: &Shared,
        pause: Duration,
        ping: Option<&Ping>,
    ) -> Control {
        self.before_pause(pause);
        let wake = Instant::now() + pause;
        let wake = self.deadline.map_or(wake, |d| wake.min(d));
        let mut ping_due = ping.map(|p| Instant::now() + p.every);
        // The ping sent and not yet answered.
        let mut unanswered: Option<InFlight> = None;
        loop {
            let Some(socket) = self.socket.as_deref_mut() else {
                return if shared.sleep_until(wake).await {
                    Control::Continue
                } else {
                    Control::Stop
                };
            };
            let until = ping_due.map_or(wake, |p| p.min(wake));
            let received = {
                let next = std::pin::pin!(socket.next());
                let stop = std::pin::pin!(shared.sleep_until(until));
                match futures_util::future::select(next, stop).await {
                    futures_util::future::Either::Left((received, _)) => Some(received),
                    futures_util::future::Either::Right((false, _)) => return Control::Stop,
                    futures_util::future::Either::Right((true, _)) => None,
                }
            };
            let Some(received) = received else {
                let now = Instant::now();
                if now >= wake {
                    return Control::Continue;
                }
                let Some(ping) = ping else { continue };
                if let Some(late) = unanswered.take() {
                    let outcome = Outcome {
                        error: Some(ErrorClass::PingTimeout),
                        ..Default::default()
                    };
                    late.finish_at(now, outcome);
                    self.socket_gone(shared, Gone::Error(ErrorClass::PingTimeout));
                    return Control::EndIteration;
                }
                let mut in_flight = InFlight::begin(shared, ping.entry, now);
                in_flight.sent_at(now);
                let sent = match self.socket.as_deref_mut() {
                    Some(Socket {
                        wire: Wire::Ws(ws), ..
                    }) => ws.ping().await,
                    _ => Err(Failure::SocketClosed),
                };
                if let Err(failure) = sent {
                    let outcome = Outcome {
                        error: Some(failure.into()),
                        ..Default::default()
                    };
                    in_flight.finish_at(Instant::now(), outcome);
                    self.socket_gone(shared, Gone::Failed(failure));
                    return Control::EndIteration;
                }
                in_flight.attempts.head_sent();
                unanswered = Some(in_flight);
                ping_due = Some(now + ping.every);
                continue;
            };
            if matches!(received, Ok(Received::Pong)) {
                if let Some(answered) = unanswered.take() {
                    answered.finish_at(Instant::now(), Outcome::default());
                }
                continue;
            }
            match self.count(shared, received) {
                Ok(Some(_)) => shared.recorder.borrow_mut().sockets().unmatched += 1,
                Ok(None) => {}
                Err(gone) => {
                    if self.reconnect_stream(shared, &gone, wake).await != Reconnect::Open {
                        self.socket_gone(shared, gone);
                    }
                }
            }
        }
    }

    /// An event stream the server ended: wait its retry time and open it
    /// again with `Last-Event-ID`, when that fits before `until`.
    async fn reconnect_stream(
        &mut self,
        shared: &Shared,
        gone: &Gone,
        until: Instant,
    ) -> Reconnect {
        let Some(socket) = self.socket.as_deref() else {
            return Reconnect::No;
        };
        let Wire::Sse(stream) = &socket.wire else {
            return Reconnect::No;
        };
        if !matches!(gone, Gone::Closed(_)) {
            return Reconnect::No;
        }
        let wait = stream
            .parser
            .retry_ms
            .map_or(SSE_RECONNECT, Duration::from_millis);
        let (last_id, handshake) = (stream.parser.last_id.clone(), socket.handshake);
        let at = Instant::now() + wait;
        if at >= until {
            return Reconnect::No;
        }
        self.socket_gone(shared, Gone::Closed("server:ended".into()));
        if !shared.sleep_until(at).await || shared.stop.is_stopping() {
            return Reconnect::Stopped;
        }
        shared.recorder.borrow_mut().sockets().sse_reconnects += 1;
        match self
            .open_socket(shared, SocketKind::EventStream, handshake, last_id)
            .await
        {
            Ok(_) => Reconnect::Open,
            Err(_) if shared.stop.is_stopping() => Reconnect::Stopped,
            Err(_) => Reconnect::No,
        }
    }

    /// The socket ended under us: counted and dropped (a gRPC stream's
    /// entry recorded: its status, or the failure).
    fn socket_gone(&mut self, shared: &Shared, gone: Gone) {
        let Some(socket) = self.socket.take() else {
            return;
        };
        if let Wire::Grpc(stream) = &socket.wire {
            let error = match &gone {
                Gone::Closed(_) => stream.status_class(),
                Gone::Failed(f) => Some((*f).into()),
                Gone::Error(class) => Some(*class),
            };
            stream.record_end(shared, error, Instant::now());
        }
        let how = match gone {
            Gone::Closed(how) => how,
            Gone::Failed(f) => format!("error:{}", ErrorClass::from(f).key()),
            Gone::Error(class) => format!("error:{}", class.key()),
        };
        let mut recorder = shared.recorder.borrow_mut();
        recorder.socket_open(false);
        recorder.sockets().close(how);
    }

    /// Closes the user's socket (if it has one) with `code`, waiting at
    /// most [`CLOSE_WAIT`] for the server's close frame (a close the server
    /// never answered is counted as `client:CODE:unanswered`).
    pub(super) async fn close_socket(&mut self, shared: &Shared, code: u16) {
        let Some(mut socket) = self.socket.take() else {
            return;
        };
        if let Wire::Grpc(stream) = &mut socket.wire {
            let how = self.close_grpc_stream(shared, stream).await;
            let mut recorder = shared.recorder.borrow_mut();
            recorder.socket_open(false);
            recorder.sockets().close(how);
            return;
        }
        let mut unanswered = false;
        if let Wire::Ws(ws) = &mut socket.wire {
            let mut pushed = (0u64, 0u64, 0u64);
            let close = ws.close(code, |m| match m {
                Incoming::Message { data, .. } => {
                    pushed.0 += 1;
                    pushed.1 += data.len() as u64;
                }
                Incoming::Ping => pushed.2 += 1,
                _ => {}
            });
            unanswered = tokio::time::timeout(CLOSE_WAIT, close).await.is_err();
            let mut recorder = shared.recorder.borrow_mut();
            let counts = recorder.sockets();
            counts.messages_received += pushed.0;
            counts.bytes_received += pushed.1;
            counts.unmatched += pushed.0;
            counts.pings_received += pushed.2;
        }
        let mut recorder = shared.recorder.borrow_mut();
        recorder.socket_open(false);
        let suffix = if unanswered { ":unanswered" } else { "" };
        recorder.sockets().close(format!("client:{code}{suffix}"));
    }

    /// A gRPC stream's close: our side half-closed, the server's status
    /// awaited (at most [`CLOSE_WAIT`]; messages meanwhile counted as
    /// unmatched), its entry recorded; past the wait it is cancelled.
    /// How it ended, for the close counts.
    async fn close_grpc_stream(&mut self, shared: &Shared, stream: &mut GrpcSocket) -> String {
        if stream.half_close().is_err() {
            stream.record_end(shared, Some(ErrorClass::SocketClosed), Instant::now());
            return format!("error:{}", ErrorClass::SocketClosed.key());
        }
        let due = Instant::now() + CLOSE_WAIT;
        loop {
            let read = {
                let next = std::pin::pin!(stream.next());
                timed(&mut self.request_timer, due, next).await
            };
            match read {
                Ok(Ok(StreamRead::Message(data))) => {
                    let mut recorder = shared.recorder.borrow_mut();
                    let counts = recorder.sockets();
                    counts.messages_received += 1;
                    counts.bytes_received += data.len() as u64;
                    counts.unmatched += 1;
                }
                Ok(Ok(StreamRead::Ended(status))) => {
                    stream.record_end(shared, stream.status_class(), Instant::now());
                    return grpc_end(status);
                }
                Ok(Err(class)) => {
                    stream.record_end(shared, Some(class), Instant::now());
                    return format!("error:{}", class.key());
                }
                Err(()) => {
                    stream.cancel();
                    stream.record_end(shared, Some(ErrorClass::GrpcCancelled), Instant::now());
                    return "client:cancelled".into();
                }
            }
        }
    }
}
