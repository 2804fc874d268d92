//! A user's scenario apart from its connections: its variables, feeder
//! positions, what the last response kept, and where it stands in its
//! iteration (the mix's one request, or a session's steps). It does no
//! I/O: it says what comes next ([`Action`]) and judges what came back.
//!
//! Both engines drive it — the task path (`tasks/user.rs`) awaiting each
//! action, the event loop (`event_loop/`) one event at a time — so a
//! session's steps, templates, feeders, checks and extractions follow one
//! set of rules whichever path runs them.

use crate::connections::Origin;
use crate::cookies;
use crate::cookies::Jar;
use crate::metrics::exemplars::TraceIds;
use crate::metrics::{ErrorClass, LimitReached, Outcome};
use crate::plan::check::ResponseView;
use crate::plan::socket::SocketStep;
use crate::plan::template::{Scope, Vars};
use crate::plan::trace_context::TracePer;
use crate::plan::{Added, Flow, RequestSpec, Step, Wire};
use crate::shared::Shared;
use headroom_http::Captured;
use std::time::{Duration, Instant};

/// What the user does next in its iteration.
#[derive(Debug)]
pub(crate) enum Action<'p> {
    /// Send request `plan.requests[i]`.
    Request(usize),
    /// Pause this long: a think time, or the wait for a repeat's beat.
    Pause(Duration),
    /// A step on the user's WebSocket or event stream.
    Socket(&'p SocketStep),
    /// The iteration's steps are done.
    Done,
    /// The user stops: a feeder ran dry (the run is stopping).
    Stop,
}

/// Where an iteration stands.
#[derive(Debug, Default)]
enum Position {
    /// Between iterations.
    #[default]
    Idle,
    /// A mix iteration: its request, until it is taken.
    Mix(Option<usize>),
    /// Session `pick`, at the script's frames.
    Session(usize),
}

/// A place in a list of steps.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// The step at hand.
    at: usize,
    /// When the step at hand is a repeat: the round it runs, and when its
    /// first round started (rounds with `every` keep that beat).
    round: u32,
    started: Instant,
    /// When the step at hand is a choice: the branch drawn.
    branch: usize,
}

impl Frame {
    fn first(now: Instant) -> Frame {
        Frame {
            at: 0,
            round: 0,
            started: now,
            branch: 0,
        }
    }
}

pub(crate) struct Script {
    pub id: u64,
    /// Iterations begun.
    pub iteration: u64,
    pub vars: Vars,
    feeder_cursors: Vec<u64>,
    /// What the response at hand kept for checks, extractions and cookies
    /// (buffers reused from one request to the next).
    pub captured: Captured,
    at: Position,
    /// In a session: a frame per level of nested steps (repeat, choice,
    /// if, while).
    frames: Vec<Frame>,
    /// The user's variables object in the worker's script engine (a plan
    /// with scripts).
    js: Option<headroom_js::User>,
    /// The last response's status (0: none yet, or it failed without
    /// one): what scripts read as `ctx.response.status`.
    last_status: u16,
    /// An `after` hook asked to end the iteration or the user: taken at
    /// the next step.
    pending: headroom_js::Flow,
    /// The iteration's trace ID (trace context per iteration), once its
    /// first request is written.
    iteration_trace: Option<u128>,
    /// The trace context the last request written was sent with.
    pub trace_ids: Option<TraceIds>,
}

impl Script {
    pub fn new(shared: &Shared, id: u64) -> Script {
        Script {
            id,
            iteration: 0,
            vars: Vars::default(),
            feeder_cursors: vec![0; shared.plan.feeders.len()],
            captured: Captured::default(),
            at: Position::Idle,
            frames: Vec::new(),
            js: shared.js.as_ref().map(|w| {
                let mut user = w.user();
                user.id = id;
                user
            }),
            last_status: 0,
            pending: headroom_js::Flow::Continue,
            iteration_trace: None,
            trace_ids: None,
        }
    }

    /// Starts over as a new user (an open-model arrival), keeping buffers.
    pub fn reset(&mut self, id: u64) {
        self.id = id;
        self.iteration = 0;
        self.vars.clear();
        self.feeder_cursors.iter_mut().for_each(|c| *c = 0);
        self.at = Position::Idle;
        self.last_status = 0;
        self.pending = headroom_js::Flow::Continue;
        if let Some(js) = &mut self.js {
            js.reset();
            (js.id, js.iteration) = (id, 0);
        }
    }

    /// An iteration is under way (its steps are not all done).
    pub fn in_iteration(&self) -> bool {
        !matches!(self.at, Position::Idle)
    }

    /// Begins an iteration of request or session `pick`: a row from each
    /// feeder first (not those the session feeds from in its own steps).
    /// `false`: a feeder ran dry, the user stops.
    pub fn begin_iteration(&mut self, shared: &Shared, pick: usize, now: Instant) -> bool {
        let sessions = match &shared.plan.flow {
            Flow::Sessions(sessions) => Some(sessions),
            Flow::Mix => None,
        };
        for i in 0..shared.plan.feeders.len() {
            // A feeder the session feeds from itself gives rows only there
            // (a row taken here too would be skipped, and burn a unique one).
            let fed_by_steps = sessions.is_some_and(|s| s[pick].feeds(i));
            if !fed_by_steps && !feed(shared, i, &mut self.vars, &mut self.feeder_cursors) {
                return false;
            }
        }
        self.iteration_trace = None;
        self.at = match sessions {
            None => Position::Mix(Some(pick)),
            Some(_) => {
                self.frames.clear();
                self.frames.push(Frame::first(now));
                Position::Session(pick)
            }
        };
        true
    }

    /// The iteration ends here, whatever steps it had left (its socket is
    /// gone, and they need it), and is counted.
    pub fn end_iteration(&mut self) {
        if self.in_iteration() {
            self.iteration += 1;
            if let Some(js) = &mut self.js {
                js.iteration = self.iteration;
            }
            self.at = Position::Idle;
            self.frames.clear();
        }
    }

    /// What comes next in the iteration; [`Action::Done`] ends it (and
    /// counts it). Feeds, choices and repeats are taken on the way. `now`
    /// starts the beat of a repeat with `every`.
    pub fn next<'p>(&mut self, shared: &'p Shared, now: Instant) -> Action<'p> {
        let Script {
            vars,
            feeder_cursors,
            at,
            frames,
            js,
            captured,
            last_status,
            pending,
            ..
        } = self;
        let action = match (std::mem::take(pending), at) {
            (headroom_js::Flow::EndUser, _) => Action::Stop,
            (headroom_js::Flow::EndIteration, _) | (_, Position::Idle) => Action::Done,
            (_, Position::Mix(pending)) => pending.take().map_or(Action::Done, Action::Request),
            (_, Position::Session(pick)) => {
                let Flow::Sessions(sessions) = &shared.plan.flow else {
                    unreachable!("a session iteration runs a plan of sessions");
                };
                let root = &sessions[*pick].steps;
                let mut effects = Effects {
                    vars,
                    feeder_cursors,
                    js,
                    captured,
                    status: *last_status,
                    judging: false,
                };
                next_step(shared, root, frames, now, &mut effects)
            }
        };
        if matches!(action, Action::Done) {
            self.end_iteration();
        }
        action
    }

    /// The template scope of this user now.
    pub fn scope<'a>(&'a self, rng: &'a mut fastrand::Rng) -> Scope<'a> {
        Scope {
            vars: &self.vars,
            user_id: self.id,
            iteration: self.iteration,
            rng,
        }
    }

    /// The target of request `spec` for this send: as written, or its
    /// template rendered into `out` (a buffer the caller reuses).
    pub fn target<'a>(
        &self,
        shared: &Shared,
        spec: &'a RequestSpec,
        out: &'a mut String,
    ) -> &'a str {
        let Some(t) = &spec.template else {
            return &spec.target;
        };
        let mut bytes = std::mem::take(out).into_bytes();
        bytes.clear();
        t.target
            .render_target(&mut self.scope(&mut shared.rng.borrow_mut()), &mut bytes);
        *out = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        out
    }

    /// Request `spec` for this send, to `target` on `host`, with this
    /// user's variables (see [`RequestSpec::render`]) and, in a run that
    /// sends trace context, a `traceparent` (its IDs kept in
    /// [`Script::trace_ids`]), into `out`.
    pub fn write_request(
        &mut self,
        shared: &Shared,
        spec: &RequestSpec,
        (target, host): (&str, &str),
        (keep_alive, cookie): (bool, Option<&str>),
        out: &mut Vec<u8>,
    ) -> Result<Wire, ErrorClass> {
        self.trace_ids = shared.plan.trace_context.as_ref().map(|context| {
            let trace = match context.per {
                TracePer::Request => None,
                TracePer::Iteration => self.iteration_trace,
            };
            let ids = shared.trace_ids(trace);
            self.iteration_trace = Some(ids.trace_id);
            ids
        });
        let traceparent = shared.traceparent(self.trace_ids);
        let added = shared.added(cookie, traceparent.as_ref());
        if let Some(code) = spec.before {
            return self.write_scripted(
                shared,
                (spec, code),
                (target, host),
                (keep_alive, added),
                out,
            );
        }
        let mut rng = shared.rng.borrow_mut();
        spec.render(
            &mut self.scope(&mut rng),
            target,
            host,
            keep_alive,
            added,
            out,
        )
    }

    /// Request `spec` as its `before` hook (script code `code`) leaves it:
    /// rendered into parts, handed to the script, then written. A hook
    /// that fails sends nothing (`script_error`).
    fn write_scripted(
        &mut self,
        shared: &Shared,
        (spec, code): (&RequestSpec, usize),
        (target, host): (&str, &str),
        (keep_alive, added): (bool, Added<'_>),
        out: &mut Vec<u8>,
    ) -> Result<Wire, ErrorClass> {
        let scheme = if shared.plan.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let origin = format!("{scheme}://{host}");
        let mut request = {
            let mut rng = shared.rng.borrow_mut();
            let mut scope = self.scope(&mut rng);
            spec.parts(&mut scope, &origin, target, added)
        };
        let Script { vars, js, .. } = self;
        let mut effects = Effects {
            vars,
            feeder_cursors: &mut [],
            js,
            captured: &Captured::default(),
            status: 0,
            judging: false,
        };
        let called = effects.js(shared, code, Some(&mut request));
        let Some(called) = called else {
            return Err(ErrorClass::ScriptError);
        };
        self.pending = called.flow;
        // The path and query may change; the origin was chosen already.
        let target = match request.url.strip_prefix(&origin) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') || rest.starts_with('?') => rest,
            _ if request.url.starts_with('/') => request.url.as_str(),
            _ => {
                let message = format!(
                    "a before hook may change the URL's path and query, not its origin (`{}`)",
                    request.url
                );
                let label = &shared.js.as_ref().expect("a plan with scripts").labels()[code];
                shared.recorder.borrow_mut().scripts().record(
                    label,
                    0,
                    crate::metrics::scripts::CallEnd::Threw(&message),
                );
                return Err(ErrorClass::ScriptError);
            }
        };
        out.clear();
        let sets_host = request
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("host"));
        let host = (!sets_host).then_some(host);
        let mut head = headroom_http::RequestWriter::start(out, &request.method, target, host);
        for (name, value) in &request.headers {
            head.header(name, |out| out.extend_from_slice(value.as_bytes()));
        }
        head.finish(keep_alive, |out| {
            out.extend_from_slice(request.body.as_bytes())
        })
        .map_err(|_| ErrorClass::InvalidHeaderValue)?;
        Ok(Wire::Rendered)
    }

    /// Status expectation, checks, extractions and cookies for the
    /// response to request `index` (what it kept is in `captured`).
    pub fn judge(
        &mut self,
        shared: &Shared,
        jar: &mut Option<Box<Jar>>,
        (spec, index, origin, target): (&RequestSpec, usize, &Origin, &str),
        status: u16,
        (intended, done): (Instant, Instant),
        outcome: &mut Outcome,
    ) {
        if shared.plan.cookies && !self.captured.set_cookies.is_empty() {
            let set = &self.captured.set_cookies;
            cookies::keep(shared, origin, index, target, set, jar);
        }
        if spec.capture.body && self.captured.body_at_limit() {
            shared
                .recorder
                .borrow_mut()
                .limit_reached(index, LimitReached::BodyCapture, 1);
        }
        self.last_status = status;
        outcome.error = spec.expect.check(status);
        if let Some(method) = &spec.grpc {
            self.grpc_answer(method, outcome);
        }
        if !spec.checks.is_empty() || !spec.extracts.is_empty() {
            self.checks_and_extractions(shared, spec, status, (intended, done), outcome);
        }
        if let Some((code, check)) = spec.after {
            self.after_hook(shared, (code, check), status, outcome);
        }
    }

    /// A gRPC call's answer: its status judged (each code its own class;
    /// none at all is malformed), its messages decoded to JSON for the
    /// checks, extractions and scripts that read the body.
    fn grpc_answer(&mut self, method: &headroom_grpc::Method, outcome: &mut Outcome) {
        if outcome.error.is_none() {
            outcome.error = match self.captured.grpc_status {
                Some(code) => ErrorClass::of_grpc_status(code),
                None => Some(ErrorClass::GrpcMalformed),
            };
        }
        if self.captured.body.is_empty() {
            return;
        }
        match method.decode_to_json(&self.captured.body) {
            Ok(json) => self.captured.body = json.into_bytes(),
            Err(_) => {
                self.captured.body.clear();
                if outcome.error.is_none() {
                    outcome.error = Some(ErrorClass::GrpcMalformed);
                }
            }
        }
    }

    /// A request's `after` hook: a failure it reports (or a throw) fails
    /// the request's check of the hook, unless it failed already.
    fn after_hook(
        &mut self,
        shared: &Shared,
        (code, check): (usize, u32),
        status: u16,
        outcome: &mut Outcome,
    ) {
        let Script {
            vars, js, captured, ..
        } = self;
        let mut effects = Effects {
            vars,
            feeder_cursors: &mut [],
            js,
            captured,
            status,
            judging: true,
        };
        let failed = match effects.js(shared, code, None) {
            Some(called) => {
                self.pending = called.flow;
                called.failed.is_some()
            }
            None => true,
        };
        if failed && outcome.error.is_none() {
            outcome.error = Some(ErrorClass::CheckFailed);
            outcome.failed_check = Some(check);
        }
    }

    fn checks_and_extractions(
        &mut self,
        shared: &Shared,
        spec: &RequestSpec,
        status: u16,
        (intended, done): (Instant, Instant),
        outcome: &mut Outcome,
    ) {
        let latency = done.saturating_duration_since(intended);
        let view = ResponseView::new(status, &self.captured, latency);
        if outcome.error.is_none() {
            let mut rng = shared.rng.borrow_mut();
            let mut scope = self.scope(&mut rng);
            if let Some(failed) = spec.checks.iter().find(|c| !c.passes(&view, &mut scope)) {
                outcome.error = Some(ErrorClass::CheckFailed);
                outcome.failed_check = Some(failed.id);
            }
        }
        for x in &spec.extracts {
            match x.apply(&view) {
                Some(value) => match self.vars.get_mut(&x.var) {
                    Some(v) => *v = value,
                    None => {
                        self.vars.insert(x.var.clone(), value);
                    }
                },
                None if outcome.error.is_none() => {
                    outcome.error = Some(ErrorClass::CheckFailed);
                    outcome.failed_check = Some(x.id);
                }
                None => {}
            }
        }
    }
}

/// The next action of a session whose place is `frames` in `root`.
fn next_step<'p>(
    shared: &Shared,
    root: &'p [Step],
    frames: &mut Vec<Frame>,
    now: Instant,
    effects: &mut Effects,
) -> Action<'p> {
    loop {
        let Some(depth) = frames.len().checked_sub(1) else {
            return Action::Done;
        };
        let list = steps_at(root, &frames[..depth]);
        let Some(step) = list.get(frames[depth].at) else {
            // This list is done: the step holding it goes on.
            frames.pop();
            match list_done(shared, root, frames, now, effects) {
                Some(action) => return action,
                None => continue,
            }
        };
        let frame = &mut frames[depth];
        match step {
            Step::Request(i) => {
                frame.at += 1;
                return Action::Request(*i);
            }
            Step::Think { min, max } => {
                frame.at += 1;
                let pause = if min == max {
                    *min
                } else {
                    let span = (*max - *min).as_nanos() as u64;
                    *min + Duration::from_nanos(shared.rng.borrow_mut().u64(0..=span))
                };
                return Action::Pause(pause);
            }
            Step::Repeat { times: 0, .. } => frame.at += 1,
            Step::Repeat { .. } => {
                frame.round = 0;
                frame.started = now;
                frames.push(Frame::first(now));
            }
            Step::Choice(branches) => {
                let total: u64 = branches.iter().map(|(w, _)| *w as u64).sum();
                let mut x = shared.rng.borrow_mut().u64(0..total.max(1));
                frame.branch = branches
                    .iter()
                    .position(|(w, _)| {
                        let hit = x < *w as u64;
                        x = x.saturating_sub(*w as u64);
                        hit
                    })
                    .unwrap_or(0);
                frames.push(Frame::first(now));
            }
            Step::Feed(i) => {
                frame.at += 1;
                if !effects.feed(shared, *i) {
                    return Action::Stop;
                }
            }
            Step::Js(code) => {
                frame.at += 1;
                match effects.js(shared, *code, None).map(|c| c.flow) {
                    Some(headroom_js::Flow::Continue) => {}
                    Some(headroom_js::Flow::EndUser) => return Action::Stop,
                    // A step that failed ends its iteration.
                    Some(headroom_js::Flow::EndIteration) | None => return Action::Done,
                }
            }
            Step::If { cond, .. } => match effects.condition(shared, *cond) {
                Ok(holds) => {
                    frame.branch = usize::from(!holds);
                    frames.push(Frame::first(now));
                }
                Err(end) => return end,
            },
            Step::While { max: 0, .. } => frame.at += 1,
            Step::While { cond, .. } => match effects.condition(shared, *cond) {
                Ok(true) => {
                    frame.round = 0;
                    frames.push(Frame::first(now));
                }
                Ok(false) => frame.at += 1,
                Err(end) => return end,
            },
            Step::Socket(step) => {
                frame.at += 1;
                return Action::Socket(step);
            }
        }
    }
}

/// After the list of steps a frame ran is done: the step holding it goes
/// on (a while's next round, a repeat's, or the step after it). `None`:
/// look again at the frames.
fn list_done<'p>(
    shared: &Shared,
    root: &'p [Step],
    frames: &mut Vec<Frame>,
    now: Instant,
    effects: &mut Effects,
) -> Option<Action<'p>> {
    let Some(parent) = frames.len().checked_sub(1) else {
        return Some(Action::Done);
    };
    let holder = &steps_at(root, &frames[..parent])[frames[parent].at];
    let frame = &mut frames[parent];
    if let Step::While { cond, max, .. } = holder {
        frame.round += 1;
        if frame.round < *max {
            match effects.condition(shared, *cond) {
                Ok(true) => {
                    frames.push(Frame::first(now));
                    return None;
                }
                Ok(false) => {}
                Err(end) => return Some(end),
            }
        }
    }
    if let Step::Repeat { times, every, .. } = holder {
        frame.round += 1;
        if frame.round < *times {
            let started = frame.started;
            let round = frame.round;
            frames.push(Frame::first(now));
            // Rounds start on a fixed beat (a message rate), not
            // one after the other.
            if let Some(every) = every {
                let pause = (started + *every * round).saturating_duration_since(now);
                if !pause.is_zero() {
                    return Some(Action::Pause(pause));
                }
            }
            return None;
        }
    }
    frame.at += 1;
    None
}

/// The list of steps the innermost of `outer` frames leads into.
fn steps_at<'p>(root: &'p [Step], outer: &[Frame]) -> &'p [Step] {
    outer
        .iter()
        .fold(root, |list, frame| match &list[frame.at] {
            Step::Repeat { steps, .. } => steps,
            Step::Choice(branches) => &branches[frame.branch].1,
            Step::If { then, .. } if frame.branch == 0 => then,
            Step::If { otherwise, .. } => otherwise,
            Step::While { steps, .. } => steps,
            other => unreachable!("a frame leads into nested steps, not {other:?}"),
        })
}

/// What a session's steps may touch beside their place: the user's
/// variables and feeder positions, its script engine object, and the last
/// response.
struct Effects<'a> {
    vars: &'a mut Vars,
    feeder_cursors: &'a mut [u64],
    js: &'a mut Option<headroom_js::User>,
    captured: &'a Captured,
    status: u16,
    /// An `after` hook: a `false` it returns fails the request.
    judging: bool,
}

impl Effects<'_> {
    fn feed(&mut self, shared: &Shared, index: usize) -> bool {
        feed(shared, index, self.vars, self.feeder_cursors)
    }

    /// Runs script code `code` for this user, counted under its label;
    /// `None` when it failed (the failure counted, with where and why).
    fn js(
        &mut self,
        shared: &Shared,
        code: usize,
        request: Option<&mut headroom_js::Request>,
    ) -> Option<headroom_js::Called> {
        use crate::metrics::scripts::CallEnd;
        let worker = shared
            .js
            .as_ref()
            .expect("a plan with scripts has an engine");
        let user = self
            .js
            .as_mut()
            .expect("a plan with scripts gives each user an object");
        let response = (request.is_none()).then_some(headroom_js::Response {
            status: self.status,
            headers: &self.captured.headers,
            body: &self.captured.body,
        });
        let judging = self.judging;
        let result = worker.call_as(code, user, self.vars, (response, request), judging);
        let label = &worker.labels()[code];
        let mut recorder = shared.recorder.borrow_mut();
        let scripts = recorder.scripts();
        match result {
            Ok(called) => {
                let end = match &called.failed {
                    Some(message) => CallEnd::Failed(message),
                    None => CallEnd::Returned,
                };
                scripts.record(label, called.cpu_ns, end);
                Some(called)
            }
            Err(e) => {
                scripts.record(label, e.cpu_ns, CallEnd::Threw(&e.to_string()));
                None
            }
        }
    }

    /// A condition's answer, or how the iteration ends instead (it failed,
    /// or asked to end).
    fn condition<'p>(&mut self, shared: &Shared, code: usize) -> Result<bool, Action<'p>> {
        match self.js(shared, code, None) {
            Some(c) if c.flow == headroom_js::Flow::Continue => Ok(c.truthy),
            Some(c) if c.flow == headroom_js::Flow::EndUser => Err(Action::Stop),
            _ => Err(Action::Done),
        }
    }
}

/// Takes the next row of feeder `index` into `vars`; `false` when it ran
/// dry (the run then stops, saying why).
fn feed(shared: &Shared, index: usize, vars: &mut Vars, cursors: &mut [u64]) -> bool {
    let feeder = &shared.plan.feeders[index];
    let mut rng = shared.rng.borrow_mut();
    match feeder.next_row(&mut cursors[index], &mut rng) {
        Ok(row) => {
            for (column, value) in feeder.columns.iter().zip(row) {
                match vars.get_mut(column) {
                    Some(v) => v.clone_from(value),
                    None => {
                        vars.insert(column.clone(), value.clone());
                    }
                }
            }
            true
        }
        Err(dry) => {
            shared.stop.stop_because(format!(
                "feeder `{}` ({:?}) ran out of rows after {} rows",
                feeder.name, feeder.order, dry.rows
            ));
            false
        }
    }
}
