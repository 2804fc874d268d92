//! One virtual user: its connection, variables, cookie jar and feeder
//! positions, and how it runs one iteration — a request drawn from the mix,
//! or a whole session of steps.

use super::timeout::{timed, RequestTimer};
use crate::backoff::ConnectBackoff;
use crate::connections::{Acquired, Carrier, Conn, H2Conn, Origin, Unreachable};
use crate::cookies;
use crate::cookies::Jar;
use crate::metrics::{ConnectionEvent, ErrorClass, Outcome};
use crate::plan::{HttpVersion, Load, RequestSpec, Wire};
use crate::script::{Action, Script};
use crate::shared::{InFlight, Shared};
use headroom_http::exchange::{self, Attempts, Phase, Retry, StaleRetry};
use headroom_http::h2::{H2Parts, H2Request};
use headroom_http::{routes, Capture, Captured, Failure, Idle, Response};
use smallvec::SmallVec;
use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

mod grpc_stream;
mod socket;

/// Whether the user goes on after an iteration or a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    Continue,
    Stop,
    /// The iteration ends here (its socket is gone: the steps left need
    /// it); the user goes on with the next.
    EndIteration,
}

/// A pause this long is worth giving buffers back for (see
/// [`User::before_pause`]).
const IDLE_LONG_ENOUGH: Duration = Duration::from_millis(100);

/// Most origins a user keeps a connection to; past it, the one used
/// longest ago is closed (a user drawing from thousands of host names
/// would otherwise hold a connection to each).
const MAX_ORIGINS_PER_USER: usize = 16;

/// What a user's iterations are: requests from the mix, or sessions. A
/// user's task is made for one (`closed.rs`, `open.rs`), so a session
/// user's future does not hold a request's state (~3.6 KB) inline through
/// its think times and socket holds.
pub(crate) trait Flavor {
    fn iteration<'a>(
        user: &'a mut User,
        shared: &'a Shared,
        intended: Option<Instant>,
        pick: usize,
    ) -> impl Future<Output = Control> + 'a;
}

pub(crate) struct Mix;
pub(crate) struct Sessions;

impl Flavor for Mix {
    fn iteration<'a>(
        user: &'a mut User,
        shared: &'a Shared,
        intended: Option<Instant>,
        pick: usize,
    ) -> impl Future<Output = Control> + 'a {
        user.mix_iteration(shared, intended, pick)
    }
}

impl Flavor for Sessions {
    fn iteration<'a>(
        user: &'a mut User,
        shared: &'a Shared,
        intended: Option<Instant>,
        pick: usize,
    ) -> impl Future<Output = Control> + 'a {
        user.session_iteration(shared, intended, pick)
    }
}

pub(crate) struct User {
    /// Its variables, feeder rows and place in the iteration.
    pub script: Script,
    /// Kept-alive connections, one per origin, the most recently used last
    /// (none between requests when connections are pooled per host). The
    /// first is held in the user itself: a user of one origin, the usual
    /// case, then takes and keeps its connection without touching another
    /// cache line (a miss per request at 1,000 connections).
    conns: SmallVec<[Box<Conn>; 1]>,
    /// The cookie jar (when the plan keeps cookies), made when the first
    /// cookie comes: until then a request does not look into it, nor is
    /// it in the user's memory (112 bytes, a cache line per request at
    /// 1,000 connections, for the many tests whose server sets none).
    jar: Option<Box<Jar>>,
    /// The request as written on the wire, reused.
    wire: Vec<u8>,
    /// The target rendered for the request at hand, reused.
    target: String,
    /// Closed model: no request starts after this.
    pub deadline: Option<Instant>,
    /// The intended time of the next request, when it is an open-model
    /// arrival (taken by the first request of the iteration).
    intended: Option<Instant>,
    backoff: ConnectBackoff,
    /// The last connect failed: pause (closed model) or yield before the
    /// next request.
    backoff_pending: bool,
    /// The request timeout: one timer per user, made on the first request.
    request_timer: Option<RequestTimer>,
    /// The user's WebSocket or event stream, while a session holds one.
    socket: Option<Box<socket::Socket>>,
}

impl User {
    pub fn new(shared: &Shared, id: u64, deadline: Option<Instant>) -> User {
        User {
            script: Script::new(shared, id),
            conns: SmallVec::new(),
            jar: None,
            wire: Vec::with_capacity(256),
            target: String::new(),
            deadline,
            intended: None,
            backoff: ConnectBackoff::default(),
            backoff_pending: false,
            request_timer: None,
            socket: None,
        }
    }

    /// Before a pause (think time): a long one gives the connection's read
    /// buffer, the request buffer and the request timer back to the
    /// allocator — allocations when the user wakes, against ~8 KiB held per
    /// idle connection when tens of thousands of users mostly think.
    pub fn before_pause(&mut self, pause: Duration) {
        if pause < IDLE_LONG_ENOUGH {
            return;
        }
        for conn in &mut self.conns {
            conn.http.release_buffer();
        }
        self.wire = Vec::new();
        self.request_timer = None;
    }

    /// Closes every connection this user holds (an arriving user that
    /// leaves takes its connections with it).
    pub fn close_connections(&mut self) {
        self.conns.clear();
    }

    /// Starts over as a new user (open model: each arrival is a new user),
    /// keeping the pooled connection and buffers.
    pub fn reset(&mut self, id: u64) {
        self.script.reset(id);
        self.jar = None;
    }

    /// One iteration of the mix: its feeder rows, then request `pick`.
    pub async fn mix_iteration(
        &mut self,
        shared: &Shared,
        intended: Option<Instant>,
        pick: usize,
    ) -> Control {
        self.intended = intended;
        if !self.script.begin_iteration(shared, pick, Instant::now()) {
            return Control::Stop;
        }
        let control = self.request(shared, pick).await;
        self.script.end_iteration();
        control
    }

    /// One iteration of session `pick`: its feeder rows, then its steps as
    /// the script gives them (a request's state boxed, so a waiting user
    /// holds little).
    pub async fn session_iteration(
        &mut self,
        shared: &Shared,
        intended: Option<Instant>,
        pick: usize,
    ) -> Control {
        self.intended = intended;
        if !self.script.begin_iteration(shared, pick, Instant::now()) {
            return Control::Stop;
        }
        let control = loop {
            let control = match self.script.next(shared, Instant::now()) {
                Action::Done => break Control::Continue,
                Action::Stop => break Control::Stop,
                // Boxed: a request's state (~3.6 KB) would otherwise be
                // held by every user through its think times and socket
                // holds, not only while it is in flight.
                Action::Request(i) => Box::pin(self.request(shared, i)).await,
                // Receiving while pausing when a socket is open: pings
                // answered, pushed messages counted.
                Action::Pause(pause) if self.socket.is_some() => {
                    self.hold(shared, pause, None).await
                }
                Action::Pause(pause) => self.think(shared, pause).await,
                Action::Socket(step) => Box::pin(self.socket_step(shared, step)).await,
            };
            if control != Control::Continue {
                break control;
            }
        };
        // A socket the session left open closes with it.
        if control != Control::Stop {
            self.close_socket(shared, 1000).await;
        }
        self.script.end_iteration();
        match control {
            Control::EndIteration => Control::Continue,
            other => other,
        }
    }

    /// Pauses (a think time) until `pause` passed or the user's deadline.
    async fn think(&mut self, shared: &Shared, pause: Duration) -> Control {
        self.before_pause(pause);
        let wake = Instant::now() + pause;
        let wake = self.deadline.map_or(wake, |d| wake.min(d));
        if shared.sleep_until(wake).await {
            Control::Continue
        } else {
            Control::Stop
        }
    }

    /// May this user start another request now? If so, now (one read of
    /// the clock for the deadline and the request's send time).
    fn may_send(&self, shared: &Shared) -> Option<Instant> {
        if shared.stop.is_stopping() {
            return None;
        }
        let now = Instant::now();
        (self.deadline.is_none_or(|d| now < d) && shared.take_budget()).then_some(now)
    }

    /// Sends request `index`, reads the response, runs its checks and
    /// extractions, and records the outcome.
    async fn request(&mut self, shared: &Shared, index: usize) -> Control {
        let spec = &shared.plan.requests[index];
        // An open-model arrival is admitted by the schedule; later steps
        // and closed-model users ask the gate.
        // `scheduled`: an open-model arrival, timed from its place in the
        // schedule; any other request is timed from when it was decided
        // (latency counts from the send: its clock read is the send's).
        let (intended, scheduled) = match self.intended.take() {
            Some(at) if !shared.stop.is_stopping() => (at, true),
            Some(at) => {
                // Due, but the run stopped before it went out: counted.
                shared
                    .recorder
                    .borrow_mut()
                    .record_not_sent(index, at, Instant::now());
                return Control::Stop;
            }
            None => match self.may_send(shared) {
                Some(now) => (now, false),
                None => return Control::Stop,
            },
        };
        let in_flight = InFlight::begin(shared, index, intended);
        // The rendered target's buffer, taken while the user is borrowed
        // for the exchange, given back after.
        let mut buffer = std::mem::take(&mut self.target);
        let control = self
            .admitted(
                shared,
                (spec, index),
                (intended, scheduled),
                &mut buffer,
                in_flight,
            )
            .await;
        self.target = buffer;
        control
    }

    /// [`User::request`] once admitted: its target (rendered into
    /// `buffer`), origin and bytes, the exchange, and the verdict.
    async fn admitted(
        &mut self,
        shared: &Shared,
        (spec, index): (&RequestSpec, usize),
        (intended, scheduled): (Instant, bool),
        buffer: &mut String,
        mut in_flight: InFlight<'_>,
    ) -> Control {
        let rendered = self.script.target(shared, spec, buffer);
        let rendered = spec.template.is_some().then_some(rendered);
        let (origin, target) = match self.origin(shared, spec, rendered).await {
            Ok(found) => found,
            Err(Unreachable(class)) => {
                let outcome = Outcome {
                    error: Some(class),
                    ..Default::default()
                };
                in_flight.finish_at(Instant::now(), outcome);
                return Control::Continue;
            }
        };
        let cookie = cookies::header(self.jar.as_deref(), &origin, spec, target);
        let wire = self.script.write_request(
            shared,
            spec,
            (target, &origin.host_header),
            (shared.plan.keep_alive, cookie.as_deref()),
            &mut self.wire,
        );
        let wire = match wire {
            Ok(wire) => wire,
            Err(class) => {
                let outcome = Outcome {
                    error: Some(class),
                    ..Default::default()
                };
                in_flight.finish_at(Instant::now(), outcome);
                return Control::Continue;
            }
        };
        in_flight.trace_ids = self.script.trace_ids;
        let sent = if scheduled { Instant::now() } else { intended };
        in_flight.sent_at(sent);
        let mut outcome = self
            .exchange(
                shared,
                (spec, wire),
                index,
                &origin,
                (sent, &in_flight.attempts),
            )
            .await;
        let done = Instant::now();
        if let Some(status) = outcome.status {
            self.script.judge(
                shared,
                &mut self.jar,
                (spec, index, &origin, target),
                status,
                (intended, done),
                &mut outcome,
            );
        }
        in_flight.finish_at(done, outcome);
        if std::mem::take(&mut self.backoff_pending) {
            return self.back_off(shared).await;
        }
        Control::Continue
    }

    /// After a failed connect. A closed-model user pauses (growing, capped:
    /// see `backoff.rs`); an open-model arrival's pace is the schedule's, so
    /// its connection only yields, letting the other tasks run.
    async fn back_off(&mut self, shared: &Shared) -> Control {
        if !matches!(shared.plan.load, Load::Closed(_)) {
            tokio::task::yield_now().await;
            return Control::Continue;
        }
        let wake = Instant::now() + self.backoff.next_pause();
        let wake = self.deadline.map_or(wake, |d| wake.min(d));
        if shared.sleep_until(wake).await {
            Control::Continue
        } else {
            Control::Stop
        }
    }

    /// Where request `spec` goes this time, and the target to send: the
    /// plan's endpoint for a path; the URL's origin for a full URL.
    async fn origin<'r>(
        &self,
        shared: &Shared,
        spec: &'r RequestSpec,
        rendered: Option<&'r str>,
    ) -> Result<(Rc<Origin>, &'r str), Unreachable> {
        let target = rendered.unwrap_or(&spec.target);
        if let Some(key) = &spec.origin {
            return Ok((shared.origins.get(key).await?, target));
        }
        match rendered.and_then(routes::split_absolute) {
            Some((key, path)) => Ok((shared.origins.get(key).await?, path)),
            None if rendered.is_some_and(|t| t.contains("://")) => {
                Err(Unreachable(ErrorClass::InvalidUrl))
            }
            None => Ok((shared.origins.default_origin(), target)),
        }
    }

    /// A kept-alive connection to `origin`, if this user (or, pooled, any
    /// user of this worker) has one that is still open; the server may
    /// have closed it while it sat idle. Pooled, waits while the origin is
    /// at its cap.
    async fn idle_connection(
        &mut self,
        shared: &Shared,
        origin: &Rc<Origin>,
        index: usize,
    ) -> Option<Box<Conn>> {
        loop {
            let mut conn = if shared.origins.pooled() {
                shared.origins.checkout(origin).await?
            } else {
                let at = self.conns.iter().position(|c| c.origin.id == origin.id)?;
                self.conns.remove(at)
            };
            let event = match conn.http.check_idle() {
                Idle::Open => return Some(conn),
                Idle::Closed => ConnectionEvent::ReconnectIdleClosed,
                Idle::UnrequestedBytes => ConnectionEvent::UnrequestedBytes,
            };
            shared.recorder.borrow_mut().connection_event(index, event);
            if !shared.origins.pooled() {
                return None;
            }
        }
    }

    /// A connection done with: kept for the next request to its origin.
    fn keep(&mut self, shared: &Shared, conn: Box<Conn>) {
        if shared.origins.pooled() {
            shared.origins.check_in(conn);
            return;
        }
        if self.conns.len() >= MAX_ORIGINS_PER_USER {
            self.conns.remove(0);
        }
        self.conns.push(conn);
    }

    /// One exchange of request `spec` (its bytes: `wire`) with `origin` on
    /// this user's connection to it (connecting first if needed); on a
    /// kept-alive connection the timeout runs from `sent`.
    ///
    /// If the server closes a reused connection just as the request goes
    /// out (EOF/RST before any response byte), the request never reached
    /// it and is sent once more on a new connection, when the method allows.
    async fn exchange(
        &mut self,
        shared: &Shared,
        (spec, wire): (&RequestSpec, Wire),
        index: usize,
        origin: &Rc<Origin>,
        (sent, attempts): (Instant, &Attempts),
    ) -> Outcome {
        let plan = &shared.plan;
        if plan.speaks_h2() {
            return self
                .exchange_h2(shared, spec, wire, index, origin, attempts)
                .await;
        }
        let mut outcome = Outcome::default();
        let mut conn = self.idle_connection(shared, origin, index).await;
        let want = Capture {
            set_cookies: spec.capture.set_cookies || plan.cookies,
            ..spec.capture
        };
        let timeout = plan.timeout_of(spec);
        // Whether a request cut off by a stale connection may go again.
        let mut retry = Retry::new();
        // A pooled connection may have been waited for: the wait is not
        // the exchange's.
        let pooled = plan.max_connections_per_host.is_some();
        let mut due = if pooled { Instant::now() } else { sent } + timeout;
        loop {
            let c = match &mut conn {
                Some(c) => c,
                None => match self.connect(shared, origin, index).await {
                    Ok(c) => {
                        // The timeout is the exchange's, not the connect's.
                        due = Instant::now() + timeout;
                        conn.insert(c)
                    }
                    Err(failure) => {
                        outcome.error = Some(failure.into());
                        return outcome;
                    }
                },
            };
            let finished = {
                let exchange = std::pin::pin!(c.http.exchange(
                    spec.wire(wire, &self.wire),
                    spec.is_head(),
                    want,
                    &mut self.script.captured,
                    attempts
                ));
                timed(&mut self.request_timer, due, exchange).await
            };
            match finished {
                Err(()) => outcome.error = Some(exchange::timed_out(Phase::Exchanging).into()),
                Ok(Err(failure))
                    if retry.again(
                        exchange::is_stale(c.http.is_reused(), c.http.answered(), failure),
                        plan.stale_retry,
                        &spec.method,
                    ) =>
                {
                    conn = None;
                    shared
                        .recorder
                        .borrow_mut()
                        .connection_event(index, ConnectionEvent::RetriedStale);
                    continue;
                }
                Ok(Err(failure)) => outcome.error = Some(failure.into()),
                Ok(Ok(response)) => {
                    outcome.status = Some(response.status);
                    outcome.bytes = response.bytes;
                    if response.keep_alive && plan.keep_alive {
                        if let Some(c) = conn.take() {
                            self.keep(shared, c);
                        }
                    }
                }
            }
            return outcome;
        }
    }

    /// [`User::exchange`] over HTTP/2: a stream on one of the worker's
    /// connections to `origin`. The timeout runs from when the stream is
    /// had (the wait for one is not the exchange's).
    ///
    /// A stream the server refused (REFUSED_STREAM) or left unprocessed
    /// by its GOAWAY never reached the application: it is sent once more,
    /// on another connection when there is one, when the method allows.
    async fn exchange_h2(
        &mut self,
        shared: &Shared,
        spec: &RequestSpec,
        wire: Wire,
        index: usize,
        origin: &Rc<Origin>,
        attempts: &Attempts,
    ) -> Outcome {
        let plan = &shared.plan;
        let mut outcome = Outcome::default();
        let want = Capture {
            set_cookies: spec.capture.set_cookies || plan.cookies,
            ..spec.capture
        };
        let mut avoid = None;
        let mut retry = Retry::new();
        loop {
            let stream = match self.take_stream(shared, origin, avoid.take(), index).await {
                Ok(stream) => stream,
                Err(failure) => {
                    outcome.error = Some(failure.into());
                    return outcome;
                }
            };
            let conn = stream.slot.conn.clone();
            let request = match wire {
                Wire::Encoded => shared.h2_request(index, origin.https),
                Wire::Rendered => H2Request::from_wire(&self.wire, origin.https)
                    .and_then(|r| grpc_message(spec, r))
                    .map(H2Request::into_parts),
            };
            let request = match request {
                Ok(request) => request,
                Err(failure) => {
                    outcome.error = Some(failure.into());
                    return outcome;
                }
            };
            let due = Instant::now() + plan.timeout_of(spec);
            let finished = {
                let call = (request, (want, &mut self.script.captured), attempts);
                let exchange = std::pin::pin!(on_stream(shared, spec, &conn.http, call));
                timed(&mut self.request_timer, due, exchange).await
            };
            drop(stream);
            let failure = match finished {
                Err(()) => {
                    outcome.error = Some(timed_out(spec));
                    return outcome;
                }
                Ok(Ok(response)) => {
                    outcome.status = Some(response.status);
                    outcome.bytes = response.bytes;
                    return outcome;
                }
                Ok(Err(failure)) => failure,
            };
            let retry_event = exchange::unprocessed(failure);
            if !exchange::connection_goes_on(failure) {
                conn.retire();
            }
            if failure == Failure::QuicZeroRttRejected {
                shared.origins.zero_rtt_refused();
            }
            match retry_event {
                Some(event) if retry.again(true, unprocessed_policy(plan, spec), &spec.method) => {
                    shared.recorder.borrow_mut().connection_event(index, event);
                    avoid = Some(conn);
                }
                _ => {
                    outcome.error = Some(failure.into());
                    return outcome;
                }
            }
        }
    }

    /// A stream on one of the worker's HTTP/2 or HTTP/3 connections to
    /// `origin` (not `avoid`) for request `index`; a connection opened for
    /// it is counted, and a failed open backs the user off as a failed
    /// connect does.
    pub(super) async fn take_stream(
        &mut self,
        shared: &Shared,
        origin: &Rc<Origin>,
        avoid: Option<Rc<H2Conn>>,
        index: usize,
    ) -> Result<Acquired, Failure> {
        let local = shared.next_local_address();
        let stream = match shared.origins.h2_stream(origin, avoid, local).await {
            Ok(stream) => stream,
            Err(failure) => {
                self.backoff_pending = true;
                return Err(failure);
            }
        };
        if stream.opened {
            self.backoff.reset();
            let mut recorder = shared.recorder.borrow_mut();
            recorder.connection_event(index, ConnectionEvent::Opened);
            recorder.connection_event(
                index,
                if shared.plan.http_version == HttpVersion::Http3 {
                    ConnectionEvent::OpenedHttp3
                } else {
                    ConnectionEvent::OpenedHttp2
                },
            );
        }
        Ok(stream)
    }

    /// Opens a connection to `origin` for request `index`. A failed
    /// connect backs the user off (see [`ConnectBackoff`]) so that failing
    /// users yield to the ones that have connections.
    async fn connect(
        &mut self,
        shared: &Shared,
        origin: &Rc<Origin>,
        index: usize,
    ) -> Result<Box<Conn>, Failure> {
        // Boxed: the connect (TLS handshake included) is ~1.4 KB of state
        // that every user's future would otherwise carry all run long, for
        // the rare moment it connects.
        let result = Box::pin(shared.origins.open(
            origin,
            shared.next_local_address(),
            shared.plan.connect_timeout,
        ))
        .await;
        match &result {
            Ok(_) => {
                self.backoff.reset();
                shared
                    .recorder
                    .borrow_mut()
                    .connection_event(index, ConnectionEvent::Opened);
            }
            Err(_) => self.backoff_pending = true,
        }
        result
    }
}

/// Whether a request the server never processed may go again: by the
/// plan's policy — and a gRPC call whatever its method (a POST), as gRPC
/// retries such a call transparently; only `never` stops it.
fn unprocessed_policy(plan: &crate::plan::Plan, spec: &RequestSpec) -> StaleRetry {
    match (spec.grpc.is_some(), plan.stale_retry) {
        (true, StaleRetry::Idempotent) => StaleRetry::All,
        (_, policy) => policy,
    }
}

/// A request on a new stream of `carrier`: one exchange, or a gRPC
/// streaming call's messages each way (boxed: a stream's state is not
/// carried in every request's future).
async fn on_stream(
    shared: &Shared,
    spec: &RequestSpec,
    carrier: &Carrier,
    (request, (want, captured), attempts): (H2Parts, (Capture, &mut Captured), &Attempts),
) -> Result<Response, Failure> {
    match &spec.grpc_stream {
        Some(plan) => {
            let compressed = spec.grpc.as_ref().and_then(|m| m.compression.header());
            let call = (request, (want, captured), attempts);
            let plan = (plan, compressed.is_some());
            Box::pin(grpc_stream::call(shared, plan, carrier, call)).await
        }
        None => carrier.exchange(request, want, captured, attempts).await,
    }
}

/// A gRPC call's rendered request: the JSON its template rendered encoded
/// as the method's message (a message that does not fit its type is a
/// malformed request, not sent). Without a template, the plan's bytes
/// carry the message encoded already: the send only added headers
/// (cookies, trace context).
fn grpc_message(spec: &RequestSpec, request: H2Request) -> Result<H2Request, Failure> {
    let Some(method) = &spec.grpc else {
        return Ok(request);
    };
    if spec.template.is_none() {
        return Ok(request);
    }
    let json = std::str::from_utf8(request.body()).map_err(|_| Failure::MalformedRequest)?;
    let framed = method
        .encode_json(json)
        .map_err(|_| Failure::MalformedRequest)?;
    Ok(request.with_body(framed))
}

/// A request with no answer by its timeout. A gRPC call's timeout is its
/// deadline (`grpc-timeout`): past it, gRPC's status is DEADLINE_EXCEEDED.
fn timed_out(spec: &RequestSpec) -> ErrorClass {
    match spec.grpc {
        Some(_) => ErrorClass::GrpcDeadlineExceeded,
        None => exchange::timed_out(Phase::Exchanging).into(),
    }
}
