//! One virtual user: its connection, variables, cookie jar and feeder
//! positions, and how it runs one iteration — a request drawn from the mix,
//! or a whole session of steps.

use crate::backoff::ConnectBackoff;
use crate::metrics::{ConnectionEvent, ErrorClass, LimitReached, Outcome};
use crate::plan::check::ResponseView;
use crate::plan::limits::MAX_COOKIES_PER_USER;
use crate::plan::template::Scope;
use crate::plan::{Flow, Load, RequestSpec, Step};
use crate::shared::{InFlight, Shared};
use cookie_store::CookieStore;
use headroom_http::{Capture, Captured, Connection, Failure, Idle};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// Whether the user goes on after an iteration or a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    Continue,
    Stop,
}

/// A pause this long is worth giving buffers back for (see
/// [`User::before_pause`]).
const IDLE_LONG_ENOUGH: Duration = Duration::from_millis(100);

pub(crate) struct User {
    pub id: u64,
    pub iteration: u64,
    pub conn: Option<Connection>,
    vars: HashMap<String, String>,
    jar: Option<CookieStore>,
    feeder_cursors: Vec<u64>,
    captured: Captured,
    /// The request as written on the wire, reused.
    wire: Vec<u8>,
    /// Closed model: no request starts after this.
    deadline: Option<Instant>,
    /// The intended time of the next request, when it is an open-model
    /// arrival (taken by the first request of the iteration).
    intended: Option<Instant>,
    backoff: ConnectBackoff,
    /// The last connect failed: pause (closed model) or yield before the
    /// next request.
    backoff_pending: bool,
}

impl User {
    pub fn new(shared: &Shared, id: u64, deadline: Option<Instant>) -> User {
        User {
            id,
            iteration: 0,
            conn: None,
            vars: HashMap::new(),
            jar: shared.plan.cookies.then(CookieStore::default),
            feeder_cursors: vec![0; shared.plan.feeders.len()],
            captured: Captured::default(),
            wire: Vec::with_capacity(256),
            deadline,
            intended: None,
            backoff: ConnectBackoff::default(),
            backoff_pending: false,
        }
    }

    /// Before a pause (think time): a long one gives the connection's read
    /// buffer and the request buffer back to the allocator — one allocation
    /// when the user wakes, against ~8 KiB held per idle connection when
    /// tens of thousands of users mostly think.
    pub fn before_pause(&mut self, pause: Duration) {
        if pause < IDLE_LONG_ENOUGH {
            return;
        }
        if let Some(conn) = &mut self.conn {
            conn.release_buffer();
        }
        self.wire = Vec::new();
    }

    /// Starts over as a new user (open model: each arrival is a new user),
    /// keeping the pooled connection and buffers.
    pub fn reset(&mut self, id: u64) {
        self.id = id;
        self.iteration = 0;
        self.vars.clear();
        if let Some(jar) = &mut self.jar {
            *jar = CookieStore::default();
        }
        self.feeder_cursors.iter_mut().for_each(|c| *c = 0);
    }

    /// Takes the next row of feeder `index` into the variables.
    fn feed(&mut self, shared: &Shared, index: usize) -> Control {
        let feeder = &shared.plan.feeders[index];
        let mut rng = shared.rng.borrow_mut();
        match feeder.next_row(&mut self.feeder_cursors[index], &mut rng) {
            Ok(row) => {
                for (column, value) in feeder.columns.iter().zip(row) {
                    match self.vars.get_mut(column) {
                        Some(v) => v.clone_from(value),
                        None => {
                            self.vars.insert(column.clone(), value.clone());
                        }
                    }
                }
                Control::Continue
            }
            Err(dry) => {
                shared.stop.stop_because(format!(
                    "feeder `{}` ({:?}) ran out of rows after {} rows",
                    feeder.name, feeder.order, dry.rows
                ));
                Control::Stop
            }
        }
    }

    /// One iteration: a feeder row from each feeder, then a request drawn
    /// from the mix or a session drawn by weight. `intended` is the
    /// open-model arrival time of its first request.
    pub async fn iteration(
        &mut self,
        shared: &Shared,
        intended: Option<Instant>,
        pick: usize,
    ) -> Control {
        self.intended = intended;
        for i in 0..shared.plan.feeders.len() {
            if self.feed(shared, i) == Control::Stop {
                return Control::Stop;
            }
        }
        let control = match &shared.plan.flow {
            Flow::Mix => self.request(shared, pick).await,
            Flow::Sessions(sessions) => self.steps(shared, &sessions[pick].steps).await,
        };
        self.iteration += 1;
        control
    }

    fn steps<'a>(
        &'a mut self,
        shared: &'a Shared,
        steps: &'a [Step],
    ) -> Pin<Box<dyn Future<Output = Control> + 'a>> {
        Box::pin(async move {
            for step in steps {
                let control = match step {
                    Step::Request(i) => self.request(shared, *i).await,
                    Step::Think { min, max } => {
                        let pause = if min == max {
                            *min
                        } else {
                            let span = (*max - *min).as_nanos() as u64;
                            *min + Duration::from_nanos(shared.rng.borrow_mut().u64(0..=span))
                        };
                        self.before_pause(pause);
                        let wake = Instant::now() + pause;
                        let wake = self.deadline.map_or(wake, |d| wake.min(d));
                        if shared.sleep_until(wake).await {
                            Control::Continue
                        } else {
                            Control::Stop
                        }
                    }
                    Step::Repeat { times, steps } => {
                        let mut c = Control::Continue;
                        for _ in 0..*times {
                            c = self.steps(shared, steps).await;
                            if c == Control::Stop {
                                break;
                            }
                        }
                        c
                    }
                    Step::Choice(branches) => {
                        let total: u64 = branches.iter().map(|(w, _)| *w as u64).sum();
                        let mut x = shared.rng.borrow_mut().u64(0..total.max(1));
                        let branch = branches
                            .iter()
                            .find(|(w, _)| {
                                let hit = x < *w as u64;
                                x = x.saturating_sub(*w as u64);
                                hit
                            })
                            .map_or(&branches[0].1, |(_, s)| s);
                        self.steps(shared, branch).await
                    }
                    Step::Feed(i) => self.feed(shared, *i),
                };
                if control == Control::Stop {
                    return Control::Stop;
                }
            }
            Control::Continue
        })
    }

    /// May this user start another request now?
    fn may_send(&self, shared: &Shared) -> bool {
        !shared.stop.is_stopping()
            && self.deadline.is_none_or(|d| Instant::now() < d)
            && shared.take_budget()
    }

    /// Sends request `index`, reads the response, runs its checks and
    /// extractions, and records the outcome.
    async fn request(&mut self, shared: &Shared, index: usize) -> Control {
        let spec = &shared.plan.requests[index];
        // An open-model arrival is admitted by the schedule; later steps
        // and closed-model users ask the gate.
        let intended = match self.intended.take() {
            Some(at) if !shared.stop.is_stopping() => at,
            Some(at) => {
                // Due, but the run stopped before it went out: counted.
                shared
                    .recorder
                    .borrow_mut()
                    .record_not_sent(index, at, Instant::now());
                return Control::Stop;
            }
            None if self.may_send(shared) => Instant::now(),
            None => return Control::Stop,
        };
        let mut in_flight = InFlight::begin(shared, index, intended);
        let cookie = self.cookie_header(shared, spec);
        {
            let mut rng = shared.rng.borrow_mut();
            let mut scope = Scope {
                vars: &self.vars,
                user_id: self.id,
                iteration: self.iteration,
                rng: &mut rng,
            };
            spec.render(
                &mut scope,
                &shared.plan.endpoint.host_header,
                shared.plan.keep_alive,
                cookie.as_deref(),
                &mut self.wire,
            );
        }
        let sent = Instant::now();
        in_flight.sent_at(sent);
        let mut outcome = self.exchange(shared, spec, index).await;
        let done = Instant::now();
        if let Some(status) = outcome.status {
            self.judge(
                shared,
                spec,
                index,
                status,
                done.saturating_duration_since(intended),
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

    /// One exchange on this user's connection (connecting first if needed).
    ///
    /// A kept-alive connection is looked at before it is reused: if the
    /// server closed it while it sat idle, a new one is opened instead. If
    /// the server closes it just as the request goes out (EOF/RST before
    /// any response byte on a reused connection), the request never reached
    /// it and is sent once more on a new connection, when the method allows.
    async fn exchange(&mut self, shared: &Shared, spec: &RequestSpec, index: usize) -> Outcome {
        let plan = &shared.plan;
        let mut outcome = Outcome::default();
        if let Some(conn) = &mut self.conn {
            let event = match conn.check_idle() {
                Idle::Open => None,
                Idle::Closed => Some(ConnectionEvent::ReconnectIdleClosed),
                Idle::UnrequestedBytes => Some(ConnectionEvent::UnrequestedBytes),
            };
            if let Some(event) = event {
                self.conn = None;
                shared.recorder.borrow_mut().connection_event(index, event);
            }
        }
        let want = Capture {
            set_cookies: spec.capture.set_cookies || self.jar.is_some(),
            ..spec.capture
        };
        let timeout = spec.timeout.unwrap_or(plan.request_timeout);
        let mut may_retry = plan.stale_retry.allows(&spec.method);
        loop {
            let conn = match &mut self.conn {
                Some(c) => c,
                None => match self.connect(shared, index).await {
                    Ok(c) => self.conn.insert(c),
                    Err(failure) => {
                        outcome.error = Some(failure.into());
                        return outcome;
                    }
                },
            };
            let exchange = conn.exchange(&self.wire, spec.is_head(), want, &mut self.captured);
            match tokio::time::timeout(timeout, exchange).await {
                Err(_) => {
                    self.conn = None;
                    outcome.error = Some(ErrorClass::RequestTimeout);
                }
                Ok(Err(failure)) if may_retry && conn.was_stale(failure) => {
                    self.conn = None;
                    may_retry = false;
                    shared
                        .recorder
                        .borrow_mut()
                        .connection_event(index, ConnectionEvent::RetriedStale);
                    continue;
                }
                Ok(Err(failure)) => {
                    self.conn = None;
                    outcome.error = Some(failure.into());
                }
                Ok(Ok(response)) => {
                    outcome.status = Some(response.status);
                    outcome.bytes = response.bytes;
                    if !response.keep_alive || !plan.keep_alive {
                        self.conn = None;
                    }
                }
            }
            return outcome;
        }
    }

    /// Opens a connection for request `index`. A failed connect backs the
    /// user off (see [`ConnectBackoff`]) so that failing users yield to the
    /// ones that have connections.
    async fn connect(&mut self, shared: &Shared, index: usize) -> Result<Connection, Failure> {
        let plan = &shared.plan;
        let result = Connection::connect(
            plan.endpoint.addr,
            shared.next_local_address(),
            plan.connect_timeout,
            plan.tls.as_ref(),
        )
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

    /// Status expectation, checks, extractions and cookies for a response.
    fn judge(
        &mut self,
        shared: &Shared,
        spec: &RequestSpec,
        index: usize,
        status: u16,
        latency: Duration,
        outcome: &mut Outcome,
    ) {
        if let Some(jar) = &mut self.jar {
            if !self.captured.set_cookies.is_empty() {
                if let Some(url) = request_url(shared, spec) {
                    let dropped = store_cookies(jar, &self.captured.set_cookies, &url);
                    if dropped > 0 {
                        shared.recorder.borrow_mut().limit_reached(
                            index,
                            LimitReached::CookieJar,
                            dropped,
                        );
                    }
                }
            }
        }
        if spec.capture.body && self.captured.body_at_limit() {
            shared
                .recorder
                .borrow_mut()
                .limit_reached(index, LimitReached::BodyCapture, 1);
        }
        outcome.error = spec.expect.check(status);
        if spec.checks.is_empty() && spec.extracts.is_empty() {
            return;
        }
        let view = ResponseView::new(status, &self.captured, latency);
        if outcome.error.is_none() {
            if let Some(failed) = spec.checks.iter().find(|c| !c.passes(&view)) {
                outcome.error = Some(ErrorClass::CheckFailed);
                outcome.failed_check = Some(failed.id);
            }
        }
        for x in &spec.extracts {
            match x.apply(&view) {
                Some(value) => {
                    self.vars.insert(x.var.clone(), value);
                }
                None if outcome.error.is_none() => {
                    outcome.error = Some(ErrorClass::CheckFailed);
                    outcome.failed_check = Some(x.id);
                }
                None => {}
            }
        }
    }

    /// The `Cookie` header for this request, when the jar has any.
    fn cookie_header(&self, shared: &Shared, spec: &RequestSpec) -> Option<String> {
        let jar = self.jar.as_ref()?;
        jar.iter_unexpired().next()?;
        let url = request_url(shared, spec)?;
        let pairs: Vec<String> = jar
            .get_request_values(&url)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        (!pairs.is_empty()).then(|| pairs.join("; "))
    }
}

/// Stores a response's cookies, up to [`MAX_COOKIES_PER_USER`] in the jar:
/// a cookie of a name the jar has is updated, a new one past the cap is
/// dropped. Returns how many were dropped.
fn store_cookies(jar: &mut CookieStore, set_cookies: &[String], url: &url::Url) -> u64 {
    let mut held = jar.iter_any().count();
    let mut dropped = 0;
    let cookies: Vec<_> = set_cookies
        .iter()
        .filter_map(|c| cookie_store::RawCookie::parse(c.clone()).ok())
        .filter(|c| {
            if jar.iter_any().any(|have| have.name() == c.name()) {
                return true;
            }
            if held >= MAX_COOKIES_PER_USER {
                dropped += 1;
                return false;
            }
            held += 1;
            true
        })
        .collect();
    jar.store_response_cookies(cookies.into_iter(), url);
    dropped
}

/// The request's URL for cookie matching: the origin and the literal part
/// of the target (before any template).
fn request_url(shared: &Shared, spec: &RequestSpec) -> Option<url::Url> {
    let e = &shared.plan.endpoint;
    let scheme = if e.https { "https" } else { "http" };
    let path = spec.target.split("{{").next().unwrap_or("/");
    url::Url::parse(&format!("{scheme}://{}{path}", e.host_header)).ok()
}
