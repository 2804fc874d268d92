//! The fast path: plain requests and whole scenarios —
//! sessions (steps, repeat, choice, think, feed), templates, checks,
//! extraction, feeders and cookies — over HTTP/1.1 to the plan's
//! endpoint, plain or TLS (`socket.rs`: rustls driven by readiness),
//! from one event loop per worker (mio, epoll), each user a small slot in
//! one vector — in the closed model a slot per user, in the
//! open model a slot per connection, taken by each arrival in turn (the
//! schedule, its timer and the arrivals waiting for a connection:
//! `arrivals.rs`). A scenario's user carries its [`Script`] (the
//! same the task path drives), so both paths run a session by one set of
//! rules; user stages, pooled or other origins, WebSockets and event
//! streams, HTTP/2 and HTTP/3 take the task path.
//!
//! Why it exists: the general path (`closed.rs`, a tokio task per user)
//! wakes a task and polls its nested future for every response, and the
//! state it touches lies on ~30 cache lines per request (the task's
//! header, the socket's readiness, each level of the future) — a cache
//! miss each at 1,000 connections, which kept headroom's user-space CPU per
//! request above wrk's. Here every response is read into one buffer shared
//! by the worker's connections and parsed there (a split head is the only
//! copy), and a user is one slot. `bench/user_cpu.py`, 50 / 1,000
//! connections: 0.91 / 0.99 µs of user time per request, against wrk's
//! 1.66 / 2.15 and a task per user's 2.01 / 2.82 (README, Performance).
//!
//! It does what the general path does for the plans it takes
//! ([`load_of`]): the same counts and error classes, latency from the
//! send, a stale keep-alive connection's request sent once more (each
//! rule of the exchange asked of `headroom_http::exchange`, as the task
//! path asks it), the
//! connect back-off, ramp-up, iterations, `--requests`, the graceful stop
//! and the abort. One difference: timeouts are checked every
//! [`TIMEOUT_SWEEP`] instead of by a timer per request, so a timed-out
//! request is counted up to that much late (wrk checks every 2 s).
//!
//! Over 1,000 lines: one state machine — a [`Slot`] and the steps it goes
//! through — whose transitions call each other; its socket (`socket.rs`),
//! arrivals (`arrivals.rs`) and the rules of an exchange
//! (`headroom_http::exchange`) are apart.

use crate::backoff::ConnectBackoff;
use crate::connections::Origin;
use crate::cookies;
use crate::cookies::Jar;
use crate::metrics::exemplars::TraceIds;
use crate::metrics::{ConnectionEvent, ErrorClass, Outcome};
use crate::plan::{ClosedLoad, Engine, Flow, HttpVersion, Load, Plan, Step as PlanStep, Wire};
use crate::script::{Action, Script};
use crate::shared::Shared;
use crate::stop::Phase;
use arrivals::{Arrival, Arrivals};
use headroom_http::exchange::{self, Attempts, Retry};
use headroom_http::reader::{Fed, ResponseReader};
use headroom_http::response::HeadCache;
use headroom_http::{connect_error_class, exchange_error_class, Capture, Captured, Failure};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use socket::Socket;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

mod arrivals;
mod socket;

/// Most arrivals started per turn of the loop, and most connections
/// opened for them (see [`EventLoop::dispatch`]).
const ARRIVALS_PER_TURN: usize = 64;
const CONNECTS_PER_TURN: usize = 8;

/// The poll token of the arrivals' timer (slots are numbered from 0).
const ARRIVAL_TIMER: Token = Token(usize::MAX);

/// How often requests and connects are checked against their timeouts.
pub(crate) const TIMEOUT_SWEEP: Duration = Duration::from_millis(10);

/// What a fast-path response head is read for.
const COOKIES: Capture = Capture {
    headers: false,
    set_cookies: true,
    body: false,
    grpc: false,
};

/// The worker's read buffer, shared by all its connections: larger than
/// most responses, so one read takes a whole answer.
const READ_BUFFER: usize = 64 * 1024;

/// The plan's load, when the fast path can run the plan.
pub(crate) fn load_of(plan: &Plan) -> Option<&Load> {
    // One origin: a target that could render to a full URL, or one
    // written on another origin, needs the task path's origins.
    let one_origin = plan
        .requests
        .iter()
        .all(|r| r.origin.is_none() && r.template.as_ref().is_none_or(|t| t.target.is_path()));
    let no_sockets = match &plan.flow {
        Flow::Mix => true,
        Flow::Sessions(sessions) => sessions.iter().all(|s| !any_socket(&s.steps)),
    };
    let no_stages = match &plan.load {
        Load::Closed(load) => load.stages.is_empty(),
        Load::Open(_) => true,
    };
    let fits = plan.engine == Engine::Auto
        && no_stages
        && one_origin
        && no_sockets
        && plan.max_connections_per_host.is_none()
        && plan.http_version == HttpVersion::Http1;
    fits.then_some(&plan.load)
}

/// A step of `steps`, at any depth, is on a WebSocket or event stream.
fn any_socket(steps: &[PlanStep]) -> bool {
    steps.iter().any(|step| match step {
        PlanStep::Socket(_) => true,
        PlanStep::Repeat { steps, .. } => any_socket(steps),
        PlanStep::Choice(branches) => branches.iter().any(|(_, b)| any_socket(b)),
        PlanStep::If {
            then, otherwise, ..
        } => any_socket(then) || any_socket(otherwise),
        PlanStep::While { steps, .. } => any_socket(steps),
        _ => false,
    })
}

/// Whether the plan's users need a [`Script`]: anything beyond a plain
/// request drawn from the mix (a plain user's slot stays as small as it
/// was, and touches no more memory per request).
fn scripted(plan: &Plan) -> bool {
    let plain_requests = plan.requests.iter().all(|r| {
        r.template.is_none()
            && r.checks.is_empty()
            && r.extracts.is_empty()
            && r.capture == Default::default()
            && r.before.is_none()
            && r.after.is_none()
    });
    !(matches!(plan.flow, Flow::Mix)
        && plain_requests
        && plan.feeders.is_empty()
        && plan.scripts.is_none())
}

/// A scenario's user: its script, and the target rendered for the
/// request in flight (kept for its cookies' paths).
struct Scripted {
    script: Script,
    target: String,
}

/// Where a user's slot stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Before its ramp-up offset.
    Waiting,
    Connecting,
    /// Connected; the TLS handshake under way.
    Handshaking,
    /// Bytes of the request written so far (the socket's buffer was full).
    Writing(usize),
    Reading,
    /// Thinking, or backing off after a failed connect.
    Paused,
    Finished,
}

/// One user: its connection and the request in flight.
struct Slot {
    stream: Option<Socket>,
    step: Step,
    /// The request in flight (its index in the plan).
    request: usize,
    /// When it was sent.
    sent: Instant,
    /// Its latency counts from here: when it was sent, or an open-model
    /// arrival's place in the schedule.
    intended: Instant,
    /// Open model: the arrival under way's due time, until its first
    /// request takes it.
    arrival: Option<Instant>,
    /// Open model: an arrival is under way on this slot.
    busy: bool,
    /// Open model: when the slot took its arrival.
    took: Instant,
    reader: ResponseReader,
    /// Bytes read for this request.
    received: u64,
    /// Unused bytes of the response so far (a head split over two reads).
    kept: Vec<u8>,
    /// The connection has carried a response before this request.
    reused: bool,
    /// Why the user's kept-alive connection was closed between two
    /// requests (the server closed it, or sent bytes unasked): counted
    /// when the next request opens another, as the general path counts it.
    replaced: Option<ConnectionEvent>,
    /// A stale connection's request may still be sent once more.
    retry: Retry,
    /// Times this request's head went out (a stale retry sends it again).
    attempts: Attempts,
    /// Writing the request failed; what was there to read is read first
    /// (an early answer), and this is the failure if there was none.
    write_failure: Option<Failure>,
    /// Counted in `active_users`.
    active: bool,
    iterations: u64,
    backoff: ConnectBackoff,
    /// The user's cookies (when the plan keeps them), made when the first
    /// comes: most servers under test set none.
    jar: Option<Box<Jar>>,
    /// The request with the headers its send adds (cookies, trace
    /// context), or rendered from its template; empty: the plan's bytes
    /// as they are.
    wire: Vec<u8>,
    /// The trace context the request was written with.
    trace_ids: Option<TraceIds>,
    /// A scenario's user (see [`scripted`]); `None` for plain requests.
    scripted: Option<Box<Scripted>>,
}

impl Slot {
    fn new(now: Instant, scripted: Option<Box<Scripted>>) -> Slot {
        Slot {
            stream: None,
            step: Step::Waiting,
            request: 0,
            sent: now,
            intended: now,
            arrival: None,
            busy: false,
            took: now,
            reader: ResponseReader::default(),
            received: 0,
            kept: Vec::new(),
            reused: false,
            replaced: None,
            trace_ids: None,
            retry: Retry::new(),
            attempts: Attempts::default(),
            write_failure: None,
            active: false,
            iterations: 0,
            backoff: ConnectBackoff::default(),
            jar: None,
            wire: Vec::new(),
            scripted,
        }
    }

    fn in_flight(&self) -> bool {
        matches!(
            self.step,
            Step::Connecting | Step::Handshaking | Step::Writing(_) | Step::Reading
        )
    }
}

/// Runs this worker's users of `load` to the end; `tick(upto)` every
/// second, on the second, hands the seconds before `upto` on (as the task
/// path's ticker does).
pub(crate) fn run(shared: &Shared, load: &Load, tick: impl FnMut(u32)) {
    let model = match load {
        Load::Closed(load) => Model::Closed(load),
        Load::Open(load) => Model::Open(Box::new(Arrivals::new(shared, load))),
    };
    let mut event_loop = match EventLoop::new(shared, model) {
        Ok(l) => l,
        Err(e) => {
            shared
                .stop
                .stop_because(format!("cannot make an event loop: {e}"));
            return;
        }
    };
    event_loop.run(tick);
}

/// What the slots are: users (closed), or connections arrivals take.
enum Model<'a> {
    Closed(&'a ClosedLoad),
    // Boxed: the arrivals are large, the closed model a reference.
    Open(Box<Arrivals<'a>>),
}

struct EventLoop<'a> {
    shared: &'a Shared,
    model: Model<'a>,
    poll: Poll,
    slots: Vec<Slot>,
    /// Each slot's timeout (connect or request), apart from the slots so a
    /// sweep reads one dense array.
    deadlines: Vec<Option<Instant>>,
    /// Ramp-up starts, think times and back-off pauses: (when, slot).
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    buf: Box<[u8]>,
    heads: HeadCache,
    /// The plan's endpoint (its address; its URL for cookies).
    origin: Rc<Origin>,
    /// The `Set-Cookie` values of the last head that had any.
    captured: Captured,
    /// No request starts after this (the load's duration).
    until: Option<Instant>,
    /// Closed model: users not finished.
    live: usize,
    /// The graceful stop began.
    stopping: bool,
    /// Users carry a [`Script`] (see [`scripted`]), decided once.
    scripted: bool,
}

impl<'a> EventLoop<'a> {
    fn new(shared: &'a Shared, mut model: Model<'a>) -> io::Result<EventLoop<'a>> {
        let mut timers = BinaryHeap::new();
        let mut slots = Vec::new();
        let scripted = scripted(&shared.plan);
        let poll = Poll::new()?;
        if let Model::Open(arrivals) = &mut model {
            if let Some(timer) = arrivals.timer() {
                let fd = timer.raw_fd();
                poll.registry().register(
                    &mut mio::unix::SourceFd(&fd),
                    ARRIVAL_TIMER,
                    Interest::READABLE,
                )?;
            }
        }
        // The closed model's users, each from its place in the ramp-up (the
        // open model's slots are made as arrivals need connections).
        let users = match &model {
            Model::Closed(load) => Some(*load),
            Model::Open(_) => None,
        };
        let users = users
            .into_iter()
            .flat_map(|load| shared.users_of(load).map(move |u| (load, u)));
        for (load, user) in users {
            timers.push(Reverse((
                shared.start + load.ramp_offset(user),
                slots.len(),
            )));
            let script = scripted.then(|| {
                Box::new(Scripted {
                    script: Script::new(shared, user),
                    target: String::new(),
                })
            });
            slots.push(Slot::new(shared.start, script));
        }
        let until = match &model {
            Model::Closed(load) => load.duration.map(|d| shared.start + d),
            Model::Open(_) => None,
        };
        Ok(EventLoop {
            shared,
            model,
            poll,
            deadlines: vec![None; slots.len()],
            live: slots.len(),
            slots,
            timers,
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
            heads: HeadCache::default(),
            origin: shared.origins.default_origin(),
            captured: Captured::default(),
            until,
            stopping: false,
            scripted,
        })
    }

    fn run(&mut self, mut tick: impl FnMut(u32)) {
        let shared = self.shared;
        let mut events = Events::with_capacity(1024);
        let mut upto = 1u32;
        let mut next_tick = shared.start + Duration::from_secs(1);
        let mut next_sweep = Instant::now() + TIMEOUT_SWEEP;
        let open_model = matches!(self.model, Model::Open(_));
        loop {
            if shared.stop.is_stopping() {
                if shared.stop.phase() == Phase::Abort {
                    self.abort();
                    return;
                }
                if !self.stopping {
                    self.stopping = true;
                    self.finish_waiting();
                }
            }
            let now = Instant::now();
            // Whether anything ran since `now` was read.
            let mut ran = false;
            if now >= next_tick {
                tick(upto);
                upto += 1;
                next_tick = shared.start + Duration::from_secs(upto as u64);
                ran = true;
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + TIMEOUT_SWEEP;
                ran = true;
            }
            while let Some(&Reverse((at, i))) = self.timers.peek() {
                if at > now {
                    break;
                }
                self.timers.pop();
                self.wake(i, now);
                ran = true;
            }
            if self.all_done() {
                return;
            }
            // The clock is read again only when something ran since (a
            // read per turn is a few percent of a scripted request's CPU).
            let mut now = if ran || open_model {
                Instant::now()
            } else {
                now
            };
            let mut wake = next_tick.min(next_sweep);
            if let Some(Reverse((at, _))) = self.timers.peek() {
                wake = wake.min(*at);
            }
            if open_model {
                if let Some(at) = self.arrival_wake(now) {
                    wake = wake.min(at);
                }
                now = Instant::now();
            }
            let wait = wake.saturating_duration_since(now);
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                shared.stop.stop_because(format!("epoll failed: {e}"));
                self.abort();
                return;
            }
            self.readiness(&events);
            // Arrivals after the responses that came: a connection they
            // freed takes the next arrival, rather than a new one opened
            // while its answer sat unread (opening costs more, makes the
            // loop later, and lateness would open more).
            if open_model && !self.stopping {
                self.dispatch(Instant::now());
            }
        }
    }

    /// The sockets (and the arrival timer) the poll found ready: each
    /// slot's step goes on.
    fn readiness(&mut self, events: &Events) {
        for event in events.iter() {
            if event.token() == ARRIVAL_TIMER {
                if let Model::Open(arrivals) = &mut self.model {
                    if let Some(timer) = arrivals.timer() {
                        timer.fired();
                    }
                }
                continue;
            }
            let i = event.token().0;
            match self.slots[i].step {
                Step::Connecting => self.connected(i),
                Step::Handshaking => self.handshake(i),
                Step::Writing(_) if event.is_writable() || event.is_error() => self.write(i),
                Step::Reading => {
                    // TLS records of the request the socket could not
                    // take at once go first: an edge that is both
                    // readable and writable comes once.
                    if event.is_writable() {
                        self.flush(i);
                    }
                    let stirred = event.is_readable() || event.is_error();
                    if stirred && self.slots[i].step == Step::Reading {
                        self.read(i, event.is_read_closed() || event.is_error())
                    }
                }
                Step::Paused if event.is_readable() || event.is_error() => self.idle_event(i),
                _ => {}
            }
        }
    }

    /// Everyone is done: the closed model's users, or the open model's
    /// arrivals (all out, or the stop began) with none under way.
    fn all_done(&self) -> bool {
        match &self.model {
            Model::Closed(_) => self.live == 0,
            Model::Open(arrivals) => arrivals.busy == 0 && (self.stopping || arrivals.all_out()),
        }
    }

    /// Open model: arrivals that waited for a connection take those freed,
    /// then the arrivals due now take a free connection, a new one under
    /// the cap and as far as they need (`PoolNeed`), or wait (counted at
    /// the cap).
    ///
    /// At most [`ARRIVALS_PER_TURN`] arrivals start per turn of the loop,
    /// [`CONNECTS_PER_TURN`] of them on new connections; the rest start
    /// next turn, after the responses that came meanwhile freed their
    /// connections. Starting them all at once, a loop behind schedule
    /// (at the start, with no connection open yet, or after a pause of the
    /// machine) opens a connection for each — a loopback connect costs
    /// ~20–40 µs, more than an arrival's gap at 50,000 a second — and
    /// falls further behind, opening more.
    fn dispatch(&mut self, now: Instant) {
        let (mut started, mut opened) = (0, 0);
        while started < ARRIVALS_PER_TURN {
            let Some((i, arrival, new)) = self.take_arrival(now, opened < CONNECTS_PER_TURN) else {
                return;
            };
            started += 1;
            opened += new as usize;
            self.start_arrival(i, arrival, now);
        }
    }

    /// The next arrival that may start now, the slot it takes, and whether
    /// that is a new one (only when `may_open`).
    fn take_arrival(&mut self, now: Instant, may_open: bool) -> Option<(usize, Arrival, bool)> {
        let shared = self.shared;
        let Model::Open(arrivals) = &mut self.model else {
            return None;
        };
        let waited = !arrivals.waiting.is_empty();
        let arrival = match arrivals.waiting.pop_front() {
            Some(arrival) => arrival,
            None => arrivals.next_due(shared, now)?,
        };
        let mut new = false;
        let scripted = self.scripted;
        let pool = self.slots.len();
        let i = match arrivals.idle.pop() {
            Some(i) => i,
            // Deferred to the next turn, not counted as waiting.
            None if pool < arrivals.cap && !may_open => {
                arrivals.waiting.push_front(arrival);
                return None;
            }
            // Waits for a busy connection, which will soon be free (see
            // `PoolNeed`); not counted as waiting at the cap.
            None if pool < arrivals.cap && !arrivals.need.may_grow(pool, now) => {
                arrivals.need.hold_back(now);
                arrivals.waiting.push_front(arrival);
                return None;
            }
            None if pool < arrivals.cap => {
                new = true;
                arrivals.need.opened();
                let script = scripted.then(|| {
                    Box::new(Scripted {
                        script: Script::new(shared, arrival.n),
                        target: String::new(),
                    })
                });
                self.slots.push(Slot::new(now, script));
                self.deadlines.push(None);
                self.slots.len() - 1
            }
            None => {
                if !waited {
                    shared.recorder.borrow_mut().arrival_waited_for_connection();
                }
                arrivals.waiting.push_front(arrival);
                return None;
            }
        };
        arrivals.busy += 1;
        Some((i, arrival, new))
    }

    /// Open model: when the loop must be awake for the next arrival —
    /// `None` when the arrivals' timer will wake it (set here), or there
    /// is none.
    fn arrival_wake(&mut self, now: Instant) -> Option<Instant> {
        let shared = self.shared;
        let Model::Open(arrivals) = &mut self.model else {
            return None;
        };
        if self.stopping {
            return None;
        }
        // Every connection busy and the cap reached: arrivals wait for a
        // response to free one, and the sockets wake the loop for it (a
        // turn for the due arrivals would find none, at every turn: a spin).
        let can_start = !arrivals.idle.is_empty() || self.slots.len() < arrivals.cap;
        if !can_start {
            return None;
        }
        if !arrivals.waiting.is_empty() {
            // Held back for a busy connection: a response wakes the loop,
            // or the wait outlasts the pool's turnover and one opens.
            if let (true, Some(at)) = (arrivals.idle.is_empty(), arrivals.need.give_up_at()) {
                return Some(at.max(now));
            }
            // Arrivals deferred from the last turn start at once.
            return Some(now);
        }
        let at = arrivals.wake_at(shared)?;
        if at <= now {
            return Some(now);
        }
        if let Some(timer) = arrivals.timer() {
            if timer.set(at, now).is_ok() {
                return None;
            }
        }
        // No timer: the poll's millisecond timeout, and a spin for the
        // last millisecond.
        Some(
            at.checked_sub(Duration::from_millis(1))
                .unwrap_or(now)
                .max(now),
        )
    }

    /// Open model: slot `i` takes `arrival` — a request from the mix, or a
    /// new user's session (its connection kept from the arrival before,
    /// unless arrivals are users, who bring their own).
    fn start_arrival(&mut self, i: usize, arrival: Arrival, now: Instant) {
        let shared = self.shared;
        let users = matches!(&self.model, Model::Open(a) if a.load.users);
        let slot = &mut self.slots[i];
        slot.busy = true;
        slot.took = now;
        slot.arrival = Some(arrival.intended);
        slot.jar = None;
        if users {
            slot.active = true;
            shared.recorder.borrow_mut().user_started();
        }
        match slot.scripted.as_deref_mut() {
            None => self.send(i, arrival.pick, now),
            Some(Scripted { script, .. }) => {
                script.reset(arrival.n);
                if script.begin_iteration(shared, arrival.pick, now) {
                    self.advance(i, now);
                } else {
                    self.arrival_over(i, now);
                }
            }
        }
    }

    /// Open model: slot `i`'s arrival is over; the slot is free for the
    /// next (a user's connection closes with it).
    fn arrival_over(&mut self, i: usize, now: Instant) {
        let Model::Open(arrivals) = &mut self.model else {
            return;
        };
        let slot = &mut self.slots[i];
        if !std::mem::take(&mut slot.busy) {
            return;
        }
        arrivals.busy -= 1;
        arrivals.need.released(slot.took, now);
        if std::mem::take(&mut slot.active) {
            self.shared.recorder.borrow_mut().user_finished();
        }
        if arrivals.load.users || self.stopping {
            slot.stream = None;
        }
        if let Some(s) = slot.scripted.as_deref_mut() {
            s.script.end_iteration();
        }
        // A slot whose arrival was due but never sent: counted by the
        // caller. Idle, its kept connection is watched (`idle_event`).
        slot.arrival = None;
        slot.step = Step::Paused;
        self.deadlines[i] = None;
        arrivals.idle.push(i);
    }

    /// A slot's timer: its ramp-up start or the end of its pause.
    fn wake(&mut self, i: usize, now: Instant) {
        let slot = &mut self.slots[i];
        match slot.step {
            Step::Waiting => {
                slot.active = true;
                self.shared.recorder.borrow_mut().user_started();
                self.begin(i, now);
            }
            Step::Paused => self.begin(i, now),
            _ => {}
        }
    }

    /// The user's next iteration, if it may run one; else the user is
    /// done. A scenario's user goes on with its script.
    fn begin(&mut self, i: usize, now: Instant) {
        if self.slots[i].scripted.is_some() {
            return self.advance(i, now);
        }
        let Some(load) = self.closed() else {
            return self.arrival_over(i, now);
        };
        let slot = &mut self.slots[i];
        if load.iterations.is_some_and(|n| slot.iterations >= n) {
            return self.finish(i, now);
        }
        slot.iterations += 1;
        let request = self.shared.pick();
        self.send(i, request, now);
    }

    /// A scenario's user does what its script says next: a request, a
    /// pause, or — its iteration done — the load's think time and the
    /// next iteration (the rules of the task path's `closed.rs`).
    fn advance(&mut self, i: usize, now: Instant) {
        let shared = self.shared;
        let closed = self.closed();
        loop {
            let slot = &mut self.slots[i];
            let script = &mut slot.scripted.as_mut().expect("a scenario's user").script;
            if !script.in_iteration() {
                // Open model: an arrival is one iteration.
                let Some(load) = closed else {
                    return self.arrival_over(i, now);
                };
                let may_begin = load.iterations.is_none_or(|n| slot.iterations < n)
                    && !shared.stop.is_stopping()
                    && self.until.is_none_or(|u| now < u);
                if !may_begin || !script.begin_iteration(shared, shared.pick(), now) {
                    return self.finish(i, now);
                }
                slot.iterations += 1;
            }
            match script.next(shared, now) {
                Action::Request(request) => return self.send(i, request, now),
                Action::Pause(pause) => return self.pause(i, now + pause),
                Action::Done => match closed {
                    None => return self.arrival_over(i, now),
                    Some(load) if !load.think_time.is_zero() => {
                        return self.pause(i, now + load.think_time)
                    }
                    Some(_) => {}
                },
                Action::Stop => return self.finish(i, now),
                Action::Socket(_) => unreachable!("a plan with sockets takes the task path"),
            }
        }
    }

    /// Sends request `request` for user `i`, if it may send one now (the
    /// run goes on, the load's duration and request budget allow); else
    /// the user is done.
    fn send(&mut self, i: usize, request: usize, now: Instant) {
        let shared = self.shared;
        // An open-model arrival is admitted by the schedule (and timed from
        // its place in it, or from when it went out if that was earlier);
        // later requests and closed-model users ask the gate.
        let intended = match self.slots[i].arrival.take() {
            Some(at) if !shared.stop.is_stopping() => at.min(now),
            Some(at) => {
                // Due, but the run stopped before it went out: counted.
                shared
                    .recorder
                    .borrow_mut()
                    .record_not_sent(request, at, now);
                return self.finish(i, now);
            }
            None => {
                let may_send = !shared.stop.is_stopping()
                    && self.until.is_none_or(|u| now < u)
                    && shared.take_budget();
                if !may_send {
                    return self.finish(i, now);
                }
                now
            }
        };
        let slot = &mut self.slots[i];
        slot.request = request;
        slot.sent = now;
        slot.intended = intended;
        slot.reader = ResponseReader::default();
        slot.received = 0;
        slot.kept.clear();
        slot.retry = Retry::new();
        slot.attempts.reset();
        shared.recorder.borrow_mut().request_started();
        if let Some(event) = slot.replaced.take() {
            shared
                .recorder
                .borrow_mut()
                .connection_event(slot.request, event);
        }
        slot.wire.clear();
        slot.trace_ids = None;
        let spec = &shared.plan.requests[slot.request];
        let jar = slot.jar.as_deref();
        match slot.scripted.as_deref_mut() {
            None => {
                let cookie = cookies::header(jar, &self.origin, spec, &spec.target);
                slot.trace_ids =
                    (shared.plan.trace_context.as_ref()).map(|_| shared.trace_ids(None));
                let traceparent = shared.traceparent(slot.trace_ids);
                let added = shared.added(cookie.as_deref(), traceparent.as_ref());
                if !added.is_empty() {
                    spec.encoded_with(added, &mut slot.wire);
                }
            }
            Some(Scripted { script, target }) => {
                script.captured.clear();
                let target = script.target(shared, spec, target);
                let cookie = cookies::header(jar, &self.origin, spec, target);
                let written = script.write_request(
                    shared,
                    spec,
                    (target, &self.origin.host_header),
                    (shared.plan.keep_alive, cookie.as_deref()),
                    &mut slot.wire,
                );
                slot.trace_ids = script.trace_ids;
                match written {
                    Ok(Wire::Encoded) => slot.wire.clear(),
                    Ok(Wire::Rendered) => {}
                    Err(class) => {
                        // Nothing could be sent (a header value rendered
                        // with a line break): counted, never sent.
                        let outcome = Outcome {
                            error: Some(class),
                            ..Default::default()
                        };
                        self.record_outcome(i, now, None, outcome);
                        return self.next(i, now);
                    }
                }
            }
        }
        if self.slots[i].stream.is_some() {
            self.deadlines[i] = Some(now + self.timeout(i));
            self.write(i);
        } else {
            self.connect(i, now);
        }
    }

    /// The user pauses until `wake` (or the load's end).
    fn pause(&mut self, i: usize, wake: Instant) {
        let wake = self.until.map_or(wake, |u| wake.min(u));
        self.slots[i].step = Step::Paused;
        self.timers.push(Reverse((wake, i)));
    }

    fn timeout(&self, i: usize) -> Duration {
        let plan = &self.shared.plan;
        plan.timeout_of(&plan.requests[self.slots[i].request])
    }

    fn connect(&mut self, i: usize, now: Instant) {
        let local = self.shared.next_local_address();
        let opened = open(self.origin.addr, local).and_then(|mut stream| {
            self.poll.registry().register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )?;
            Ok(stream)
        });
        let slot = &mut self.slots[i];
        slot.reused = false;
        match opened {
            Ok(stream) => {
                slot.stream = Some(Socket::plain(stream));
                slot.step = Step::Connecting;
                self.deadlines[i] = Some(now + self.shared.plan.connect_timeout);
            }
            Err(e) => self.connect_failed(i, connect_error_class(&e)),
        }
    }

    /// A connecting socket became writable (or failed).
    fn connected(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        let Some(Socket { tcp: stream, .. }) = &slot.stream else {
            return;
        };
        let failed = match stream.take_error() {
            Ok(Some(e)) | Err(e) => Some(e),
            Ok(None) => match stream.peer_addr() {
                Ok(_) => None,
                // Still connecting: a spurious wake.
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(e) => Some(e),
            },
        };
        if let Some(e) = failed {
            self.connect_failed(i, connect_error_class(&e));
            return;
        }
        // Requests are written whole; Nagle would only add delay.
        let _ = stream.set_nodelay(true);
        if let Some(tls) = &self.origin.tls {
            if let Some(socket) = &mut slot.stream {
                if let Err(failure) = socket.start_tls(tls) {
                    return self.connect_failed(i, failure);
                }
            }
            slot.step = Step::Handshaking;
            return self.handshake(i);
        }
        self.opened(i);
    }

    /// The TLS handshake's socket stirred: on with it; the request goes
    /// once it is done. Its failures are the connect's (within the
    /// connect timeout), as on the task path.
    fn handshake(&mut self, i: usize) {
        let Some(socket) = &mut self.slots[i].stream else {
            return;
        };
        match socket.handshake() {
            Ok(true) => self.opened(i),
            Ok(false) => {}
            Err(failure) => self.connect_failed(i, failure),
        }
    }

    /// The connection is open (TLS too): counted, and the request goes.
    fn opened(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        slot.backoff.reset();
        self.shared
            .recorder
            .borrow_mut()
            .connection_event(slot.request, ConnectionEvent::Opened);
        // The timeout is the exchange's, not the connect's.
        self.deadlines[i] = Some(Instant::now() + self.timeout(i));
        self.write(i);
    }

    /// The request failed to connect: counted, then the user pauses (see
    /// `backoff.rs`), as the general path's users do.
    fn connect_failed(&mut self, i: usize, failure: Failure) {
        let now = Instant::now();
        self.record(i, now, None, Some(failure.into()));
        self.slots[i].stream = None;
        if self.closed().is_none() {
            // An arrival's pace is the schedule's: no pause.
            return self.next(i, now);
        }
        let pause = self.slots[i].backoff.next_pause();
        self.pause(i, now + pause);
    }

    fn write(&mut self, i: usize) {
        let shared = self.shared;
        let slot = &mut self.slots[i];
        let bytes = match slot.wire.is_empty() {
            true => &shared.plan.requests[slot.request].encoded,
            false => &slot.wire,
        };
        let (mut at, resumed) = match slot.step {
            Step::Writing(at) => (at, true),
            _ => (0, false),
        };
        if !resumed {
            slot.attempts.writing();
        }
        let Some(stream) = &mut slot.stream else {
            return;
        };
        while at < bytes.len() {
            match stream.write(&bytes[at..]) {
                Ok(0) => return self.failed(i, Failure::ConnectionReset),
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The body waits for room: its head may be out.
                    slot.attempts.wrote(at, bytes);
                    slot.step = Step::Writing(at);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    slot.attempts.wrote(at, bytes);
                    return self.write_failed(i, exchange_error_class(&e));
                }
            }
        }
        slot.attempts.wrote(at, bytes);
        slot.step = Step::Reading;
        // The server may have answered while the request was still going
        // out (an early error); that edge came while writing.
        if resumed {
            self.read(i, false);
        }
    }

    /// A writable edge while reading: the request's TLS records still
    /// queued go out.
    fn flush(&mut self, i: usize) {
        let Some(socket) = &mut self.slots[i].stream else {
            return;
        };
        match socket.flush() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                self.failed(i, exchange_error_class(&e))
            }
            _ => {}
        }
    }

    /// The request could not be written: the server may have answered
    /// before reading all of it and closed (an early `413`), so what it
    /// sent is read — and counted, as curl and browsers count it — before
    /// the write's failure is.
    fn write_failed(&mut self, i: usize, failure: Failure) {
        let slot = &mut self.slots[i];
        slot.step = Step::Reading;
        slot.write_failure = Some(failure);
        self.read(i, true);
        // Neither an answer nor a failure to read: the write's failure.
        let slot = &mut self.slots[i];
        if let Some(failure) = slot.write_failure.take() {
            if slot.stream.is_some() {
                self.failed(i, failure);
            }
        }
    }

    /// Reads what has arrived. `closed`: the event said the server closed
    /// or reset its end, so read on to the end of the stream (edge-
    /// triggered: no later event would say so again).
    fn read(&mut self, i: usize, closed: bool) {
        let shared = self.shared;
        let plan = &shared.plan;
        loop {
            let slot = &mut self.slots[i];
            let Some(stream) = &mut slot.stream else {
                return;
            };
            let n = match stream.read(&mut self.buf) {
                Ok(0) => return self.end_of_stream(i),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    if exchange::head_discarded(e.kind(), slot.received > 0) {
                        slot.attempts.head_discarded();
                    }
                    return self.failed(i, exchange_error_class(&e));
                }
            };
            slot.received += n as u64;
            let spec = &plan.requests[slot.request];
            let read = &self.buf[..n];
            if !slot.kept.is_empty() {
                slot.kept.extend_from_slice(read);
            }
            let data = if slot.kept.is_empty() {
                read
            } else {
                &slot.kept[..]
            };
            // A scenario's checks may need the body: kept in its script.
            let body = match slot.scripted.as_deref_mut() {
                Some(s) if spec.capture.body => Some(&mut s.script.captured.body),
                _ => None,
            };
            let fed = slot.reader.feed(&self.heads, data, spec.is_head(), body);
            if let Ok(Fed {
                head: Some((start, end)),
                sets_cookie,
                ..
            }) = fed
            {
                let head = &data[start..end];
                match slot.scripted.as_deref_mut() {
                    // Its headers and cookies, judged when it is done.
                    Some(s) => {
                        let want = Capture {
                            set_cookies: (spec.capture.set_cookies || plan.cookies) && sets_cookie,
                            body: false,
                            ..spec.capture
                        };
                        if want.headers || want.set_cookies {
                            s.script.captured.keep_head(head, want);
                        }
                    }
                    // A plain request keeps only the head's cookies.
                    None if plan.cookies && sets_cookie => {
                        self.captured.set_cookies.clear();
                        self.captured.keep_head(head, COOKIES);
                        let request = slot.request;
                        let set = &self.captured.set_cookies;
                        cookies::keep(
                            shared,
                            &self.origin,
                            request,
                            &spec.target,
                            set,
                            &mut slot.jar,
                        );
                    }
                    None => {}
                }
            }
            // What the reader left, for the next read.
            let fed = fed.inspect(|fed| match slot.kept.is_empty() {
                true => slot.kept.extend_from_slice(&read[fed.used..]),
                false => drop(slot.kept.drain(..fed.used)),
            });
            match fed {
                Err(_) => return self.failed(i, Failure::MalformedResponse),
                // Bytes after the end of the response: with one request
                // outstanding, the server sent them unasked.
                Ok(fed) if fed.done && !slot.kept.is_empty() => {
                    return self.failed(i, Failure::MalformedResponse)
                }
                Ok(fed) if fed.done => return self.completed(i, closed),
                Ok(_) => {}
            }
            // A short read emptied the socket; the next bytes bring an event.
            let emptied = slot
                .stream
                .as_ref()
                .is_some_and(|s| s.emptied(n < self.buf.len()));
            if emptied && !closed {
                return;
            }
        }
    }

    /// The server closed the connection: the end of a body delimited by
    /// the close, or a failure.
    fn end_of_stream(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        if slot.reader.closed() && slot.kept.is_empty() {
            return self.completed(i, true);
        }
        let failure = exchange::closed_early(slot.received > 0);
        self.failed(i, failure);
    }

    /// A whole response: counted; the connection kept for the next request
    /// unless either side closes it.
    fn completed(&mut self, i: usize, closed: bool) {
        let now = Instant::now();
        if self.slots[i].write_failure.take().is_some() {
            // Answered though the write failed: its head got there.
            self.slots[i].attempts.answered_anyway();
        }
        let shared = self.shared;
        let slot = &mut self.slots[i];
        let status = slot
            .reader
            .status()
            .expect("a complete response has a head");
        let keep = slot.reader.keep_alive() && shared.plan.keep_alive && !closed;
        let spec = &shared.plan.requests[slot.request];
        let mut outcome = Outcome {
            status: Some(status),
            bytes: slot.received,
            ..Default::default()
        };
        match slot.scripted.as_deref_mut() {
            None => outcome.error = spec.expect.check(status),
            // Its checks, extractions and cookies.
            Some(Scripted { script, target }) => {
                let target = match spec.template {
                    Some(_) => target.as_str(),
                    None => spec.target.as_str(),
                };
                script.judge(
                    shared,
                    &mut slot.jar,
                    (spec, slot.request, &self.origin, target),
                    status,
                    (slot.intended, now),
                    &mut outcome,
                );
            }
        }
        let sent = slot.sent;
        self.record_outcome(i, now, Some(sent), outcome);
        let slot = &mut self.slots[i];
        if keep {
            slot.reused = true;
        } else {
            // The server closed it without saying so in its answer: the
            // general path finds that out when it reuses the connection.
            if closed && slot.reader.keep_alive() {
                slot.replaced = Some(ConnectionEvent::ReconnectIdleClosed);
            }
            slot.stream = None;
        }
        self.next(i, now);
    }

    /// After a request: the next one, or first the load's think time (a
    /// scenario's user: what its script says next).
    fn next(&mut self, i: usize, now: Instant) {
        if self.slots[i].scripted.is_some() {
            return self.advance(i, now);
        }
        let Some(load) = self.closed() else {
            return self.arrival_over(i, now);
        };
        if load.think_time.is_zero() {
            return self.begin(i, now);
        }
        self.pause(i, now + load.think_time);
    }

    /// The socket of a pausing user's kept-alive connection stirred: the
    /// server closed it (its keep-alive timeout was shorter than the
    /// pause), or sent bytes nobody asked for. Either way it is closed,
    /// and the next request opens another — counted as the general path
    /// counts it when it looks at the connection before reusing it.
    fn idle_event(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        let Some(stream) = &mut slot.stream else {
            return;
        };
        let mut spare = [0u8; 64];
        slot.replaced = match stream.read(&mut spare) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Ok(0) | Err(_) => Some(ConnectionEvent::ReconnectIdleClosed),
            Ok(_) => Some(ConnectionEvent::UnrequestedBytes),
        };
        slot.stream = None;
    }

    /// The exchange failed. A reused connection that the server had closed
    /// before the request reached it (nothing read, EOF or RST) gets the
    /// request once more on a new connection (RFC 9112 §9.3.1), once.
    fn failed(&mut self, i: usize, failure: Failure) {
        let plan = &self.shared.plan;
        let slot = &mut self.slots[i];
        let failure = slot.write_failure.take().unwrap_or(failure);
        slot.stream = None;
        let stale = exchange::is_stale(slot.reused, slot.received > 0, failure);
        let method = &plan.requests[slot.request].method;
        if slot.retry.again(stale, plan.stale_retry, method) {
            self.shared
                .recorder
                .borrow_mut()
                .connection_event(slot.request, ConnectionEvent::RetriedStale);
            self.connect(i, Instant::now());
            return;
        }
        let now = Instant::now();
        self.record(i, now, None, Some(failure.into()));
        self.next(i, now);
    }

    /// Files slot `i`'s request as finished now.
    fn record(&mut self, i: usize, done: Instant, status: Option<u16>, error: Option<ErrorClass>) {
        let slot = &self.slots[i];
        let outcome = Outcome {
            status,
            error,
            bytes: if status.is_some() { slot.received } else { 0 },
            ..Default::default()
        };
        let sent = slot.sent;
        self.record_outcome(i, done, Some(sent), outcome);
    }

    /// Files slot `i`'s request as finished now with `outcome`; `sent`:
    /// when it went out (`None`: it never could).
    fn record_outcome(&mut self, i: usize, done: Instant, sent: Option<Instant>, outcome: Outcome) {
        let slot = &self.slots[i];
        self.deadlines[i] = None;
        let outcome = Outcome {
            attempts: slot.attempts.count(),
            trace_ids: slot.trace_ids,
            ..outcome
        };
        self.shared
            .recorder
            .borrow_mut()
            .record(slot.request, slot.intended, sent, done, &outcome);
    }

    /// Requests and connects past their timeout fail.
    fn sweep(&mut self, now: Instant) {
        for i in 0..self.deadlines.len() {
            if self.deadlines[i].is_none_or(|d| d > now) {
                continue;
            }
            match self.slots[i].step {
                Step::Connecting | Step::Handshaking => {
                    self.connect_failed(i, exchange::timed_out(exchange::Phase::Connecting))
                }
                Step::Writing(_) | Step::Reading => {
                    self.slots[i].stream = None;
                    let failure = exchange::timed_out(exchange::Phase::Exchanging);
                    self.record(i, now, None, Some(failure.into()));
                    self.next(i, now);
                }
                _ => self.deadlines[i] = None,
            }
        }
    }

    /// The closed model's load (`None`: the open model).
    fn closed(&self) -> Option<&'a ClosedLoad> {
        match &self.model {
            Model::Closed(load) => Some(load),
            Model::Open(_) => None,
        }
    }

    /// The user leaves: its connection closes (open model: its arrival is
    /// over).
    fn finish(&mut self, i: usize, now: Instant) {
        if self.closed().is_none() {
            return self.arrival_over(i, now);
        }
        let slot = &mut self.slots[i];
        if slot.step == Step::Finished {
            return;
        }
        slot.step = Step::Finished;
        slot.stream = None;
        self.deadlines[i] = None;
        if std::mem::take(&mut slot.active) {
            self.shared.recorder.borrow_mut().user_finished();
        }
        self.live -= 1;
    }

    /// The graceful stop began: users not yet started or pausing leave now
    /// (those with a request in flight leave when it is done).
    fn finish_waiting(&mut self) {
        let now = Instant::now();
        for Reverse((_, i)) in std::mem::take(&mut self.timers) {
            self.finish(i, now);
        }
        self.drop_waiting_arrivals();
    }

    /// Open model: arrivals that were due but waited for a connection
    /// never went out: counted `not_sent`.
    fn drop_waiting_arrivals(&mut self) {
        let Model::Open(arrivals) = &mut self.model else {
            return;
        };
        let now = Instant::now();
        let mut recorder = self.shared.recorder.borrow_mut();
        for arrival in arrivals.waiting.drain(..) {
            let request = self.shared.plan.first_request(arrival.pick);
            recorder.record_not_sent(request, arrival.intended, now);
        }
    }

    /// The hard stop: what is in flight is cut off, counted `aborted`.
    fn abort(&mut self) {
        let now = Instant::now();
        for i in 0..self.slots.len() {
            if self.slots[i].in_flight() {
                let class = self.slots[i].attempts.cut_off();
                self.record(i, now, None, Some(class));
            }
            self.finish(i, now);
        }
        self.drop_waiting_arrivals();
    }
}

/// A non-blocking connect to `addr`, from source address `local` when
/// given (any free port).
fn open(addr: SocketAddr, local: Option<IpAddr>) -> io::Result<TcpStream> {
    let Some(ip) = local else {
        return TcpStream::connect(addr);
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::new(ip, 0).into())?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(socket.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ClosedLoad;

    #[test]
    fn http1_loads_to_the_plans_endpoint_take_the_fast_path() {
        let mut plan = Plan::get("http://127.0.0.1:1/").unwrap();
        plan.cookies = true;
        assert!(load_of(&plan).is_some(), "a plain GET, cookies kept");
        assert!(!scripted(&plan), "a plain GET needs no script");
        let mut checked = plan.clone();
        checked.requests[0].capture.body = true;
        assert!(load_of(&checked).is_some(), "a capture for checks");
        assert!(scripted(&checked));
        let mut templated = plan.clone();
        let target = |t| crate::plan::template::Template::parse_target(t).unwrap();
        templated.requests[0].template = Some(crate::plan::RequestTemplate {
            target: target("/item/{{n}}"),
            headers: Vec::new(),
            body: crate::plan::template::Template::parse("").unwrap(),
        });
        assert!(load_of(&templated).is_some(), "a templated path");
        type Change = fn(&mut Plan);
        let not_fitting: [(&str, Change); 6] = [
            ("tasks asked for", |p| p.engine = Engine::Tasks),
            ("user stages", |p| {
                p.load = Load::Closed(ClosedLoad {
                    stages: vec![crate::plan::UserStage {
                        duration: Duration::from_secs(1),
                        from: 0,
                        to: 2,
                    }],
                    ..ClosedLoad::users(1, Duration::from_secs(1))
                })
            }),
            ("a per-origin pool", |p| {
                p.max_connections_per_host = Some(4)
            }),
            ("another origin", |p| {
                p.requests[0].origin = Some("http://127.0.0.2:1".into())
            }),
            ("a target that may render to a full URL", |p| {
                if let Some(t) = &mut p.requests[0].template {
                    t.target = crate::plan::template::Template::parse_target("{{url}}").unwrap();
                }
            }),
            ("HTTP/2", |p| p.http_version = HttpVersion::Http2),
        ];
        let mut open = templated.clone();
        open.load = Load::Open(crate::plan::OpenLoad {
            schedule: crate::plan::schedule::Schedule::constant(100.0, Duration::from_secs(1))
                .unwrap(),
            max_connections: 10,
            users: false,
        });
        assert!(load_of(&open).is_some(), "the open model");
        let mut https = templated.clone();
        https.endpoint.https = true;
        let insecure = headroom_http::tls::TlsOptions {
            insecure: true,
            ..Default::default()
        };
        https.tls = Some(headroom_http::tls::TlsClient::new("127.0.0.1", &insecure).unwrap());
        assert!(load_of(&https).is_some(), "HTTPS");
        for (what, change) in not_fitting {
            let mut p = templated.clone();
            change(&mut p);
            assert!(load_of(&p).is_none(), "{what}");
        }
    }
}
