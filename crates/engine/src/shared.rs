//! What the tasks of one worker share (one thread: `Rc`, `RefCell`), and
//! the guard that records a request in flight exactly once — answered,
//! failed, or cut off by the stop.

use crate::connections::Origins;
use crate::metrics::exemplars::TraceIds;
use crate::metrics::{ErrorClass, Outcome, Recorder};
use crate::plan::shard::Stride;
use crate::plan::trace_context::{self, Traceparent};
use crate::plan::{Added, ClosedLoad, Flow, Plan};
use crate::stop::{Phase, StopSignal};
use headroom_http::exchange::Attempts;
use headroom_http::h2::{H2Parts, H2Request};
use headroom_http::Failure;
use std::cell::RefCell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// What every task of one worker shares (single thread: `Rc`, `RefCell`).
pub(crate) struct Shared {
    pub id: usize,
    pub workers: usize,
    pub plan: Arc<Plan>,
    pub start: Instant,
    /// When the run actually began: `start`, or later when the run was
    /// started after its own start time (a late shard).
    pub joined: Instant,
    pub stop: StopSignal,
    pub recorder: RefCell<Recorder>,
    budget: Option<Arc<AtomicU64>>,
    pub rng: RefCell<fastrand::Rng>,
    /// Cumulative weights of the requests (mix) or sessions, for a
    /// weighted pick.
    cumulative: Vec<u64>,
    /// Open model: the next arrival this worker's scheduler would have
    /// queued (so arrivals it never reached can be counted).
    pub next_arrival: std::cell::Cell<u64>,
    /// Connections this worker has opened: which source address is next.
    connects: std::cell::Cell<usize>,
    /// Where requests go, and the connections open to each origin.
    pub origins: Origins,
    /// HTTP/2: each request without templates as HTTP/2 sends it, made on
    /// its first send (index = the plan's request).
    h2_requests: RefCell<Vec<Option<H2Request>>>,
    /// The worker's script engine, when the plan has scripts (its users'
    /// variables objects live in it).
    pub js: Option<headroom_js::Worker>,
}

impl Shared {
    /// Request `index` (one without templates: its encoded wire) as HTTP/2
    /// sends it to an origin of scheme `https`.
    pub fn h2_request(&self, index: usize, https: bool) -> Result<H2Parts, Failure> {
        let mut cache = self.h2_requests.borrow_mut();
        if let Some(request) = &cache[index] {
            return Ok(request.to_parts());
        }
        let request = H2Request::from_wire(&self.plan.requests[index].encoded, https)?;
        let parts = request.to_parts();
        cache[index] = Some(request);
        Ok(parts)
    }

    pub fn new(
        id: usize,
        workers: usize,
        plan: Arc<Plan>,
        (start, joined): (Instant, Instant),
        stop: StopSignal,
        budget: Option<Arc<AtomicU64>>,
    ) -> Shared {
        let weights: Vec<u32> = match &plan.flow {
            Flow::Mix => plan.requests.iter().map(|r| r.weight).collect(),
            Flow::Sessions(sessions) => sessions.iter().map(|s| s.weight).collect(),
        };
        let cumulative = weights
            .iter()
            .scan(0u64, |sum, &w| {
                *sum += w as u64;
                Some(*sum)
            })
            .collect();
        Shared {
            id,
            workers,
            recorder: RefCell::new(
                Recorder::new(start, plan.requests.len()).tracing(&plan.trace_windows()),
            ),
            start,
            joined,
            stop,
            budget,
            rng: RefCell::new(fastrand::Rng::new()),
            cumulative,
            next_arrival: std::cell::Cell::new(0),
            connects: std::cell::Cell::new(id),
            origins: Origins::new(&plan, per_host_cap(&plan, id, workers)),
            h2_requests: RefCell::new(vec![None; plan.requests.len()]),
            js: plan
                .scripts
                .as_ref()
                .map(|program| script_engine(program, &plan, id)),
            plan,
        }
        .with_first_arrival()
    }

    fn with_first_arrival(self) -> Shared {
        self.next_arrival.set(self.stride().first);
        self.connects.set(self.stride().first as usize);
        self
    }

    /// The users (closed) or arrivals (open) of the whole plan this worker
    /// takes: its stripe of its shard's.
    /// The users of a closed load this worker runs: numbered over the
    /// whole plan, striped over shards and workers (see `plan::shard`).
    pub fn users_of(&self, load: &ClosedLoad) -> impl Iterator<Item = u64> {
        let stride = self.stride();
        (stride.first..load.vus as u64).step_by(stride.step as usize)
    }

    pub fn stride(&self) -> Stride {
        self.plan.shard.stride(self.id, self.workers)
    }

    /// Trace IDs for a request about to be written: a fresh span of trace
    /// `trace`, or of a fresh trace.
    pub fn trace_ids(&self, trace: Option<u128>) -> TraceIds {
        let mut rng = self.rng.borrow_mut();
        TraceIds {
            trace_id: trace.unwrap_or_else(|| trace_context::new_trace_id(&mut rng)),
            span_id: trace_context::new_span_id(&mut rng),
        }
    }

    /// `traceparent`'s value for a request sent with `ids`.
    pub fn traceparent(&self, ids: Option<TraceIds>) -> Option<Traceparent> {
        let context = self.plan.trace_context.as_ref()?;
        Some(Traceparent::new(ids?, context.sampled))
    }

    /// The headers a send adds: its cookies, its trace context.
    pub fn added<'a>(
        &'a self,
        cookie: Option<&'a str>,
        traceparent: Option<&'a Traceparent>,
    ) -> Added<'a> {
        Added {
            cookie,
            traceparent: traceparent.map(Traceparent::as_str),
            tracestate: (self.plan.trace_context.as_ref()).and_then(|c| c.tracestate.as_deref()),
        }
    }

    /// The source address of the next connection, in turn over the plan's
    /// (workers start at different ones, so all are used from the start).
    pub fn next_local_address(&self) -> Option<std::net::IpAddr> {
        let list = &self.plan.local_addresses;
        if list.is_empty() {
            return None;
        }
        let i = self.connects.get();
        self.connects.set(i.wrapping_add(1));
        Some(list[i % list.len()])
    }

    /// Takes one request from the run's `--requests` budget.
    pub fn take_budget(&self) -> bool {
        match &self.budget {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    /// Index of the next request (mix) or session, drawn by weight.
    pub fn pick(&self) -> usize {
        if self.cumulative.len() == 1 {
            return 0;
        }
        let total = *self.cumulative.last().expect("at least one request");
        let x = self.rng.borrow_mut().u64(0..total);
        self.cumulative.partition_point(|&c| c <= x)
    }

    /// Sleeps until `at`; `false` if the run began stopping meanwhile.
    pub async fn sleep_until(&self, at: Instant) -> bool {
        self.unless_stopping(tokio::time::sleep_until(at.into()))
            .await
            .is_some()
    }

    /// Waits for `wait`, cut short when the run begins stopping: `None`
    /// then, or when it already had.
    pub async fn unless_stopping<T>(&self, wait: impl Future<Output = T>) -> Option<T> {
        if self.stop.is_stopping() {
            return None;
        }
        let mut phase = self.stop.subscribe();
        tokio::select! {
            out = wait => (!self.stop.is_stopping()).then_some(out),
            _ = phase.wait_for(|p| *p != Phase::Running) => None,
        }
    }
}

/// A user counted active (the `active_users` gauge) while this lives,
/// even when its task is cut off.
pub(crate) struct ActiveUser<'a>(&'a Shared);

impl<'a> ActiveUser<'a> {
    pub fn start(shared: &'a Shared) -> Self {
        shared.recorder.borrow_mut().user_started();
        ActiveUser(shared)
    }
}

impl Drop for ActiveUser<'_> {
    fn drop(&mut self) {
        self.0.recorder.borrow_mut().user_finished();
    }
}

/// Worker `id`'s share of the plan's [`Plan::connection_cap`]: the
/// shard's share split exactly over its workers (who are never more than
/// it; see `Plan::effective_threads`).
fn per_host_cap(plan: &Plan, id: usize, workers: usize) -> Option<u32> {
    let cap = plan.connection_cap()?;
    let shard = plan.shard.share(cap as u64).max(1);
    let w = workers as u64;
    let mine = shard / w + u64::from((id as u64) < shard % w);
    Some(mine.max(1) as u32)
}

/// One request on its way. If the task holding it is dropped (the run's
/// hard stop), `Drop` still counts it, so totals stay exact.
pub(crate) struct InFlight<'a> {
    shared: &'a Shared,
    request: usize,
    intended: Instant,
    sent: Option<Instant>,
    /// Times its head was written (counted by the exchange as it writes,
    /// so a request cut off by the stop still says whether it left).
    pub attempts: Attempts,
    /// The trace context it was written with.
    pub trace_ids: Option<TraceIds>,
    finished: bool,
}

impl<'a> InFlight<'a> {
    /// A request counted as in flight from now.
    pub fn begin(shared: &'a Shared, request: usize, intended: Instant) -> Self {
        shared.recorder.borrow_mut().request_started();
        InFlight {
            shared,
            request,
            intended,
            sent: None,
            attempts: Attempts::default(),
            trace_ids: None,
            finished: false,
        }
    }

    /// An open-model arrival may go out a little before its time (up to
    /// 50 µs; 0.5 ms above 5,000 a second: see `arrival_clock.rs`): it is
    /// timed from when it was actually sent, never from before it.
    pub fn sent_at(&mut self, at: Instant) {
        self.intended = self.intended.min(at);
        self.sent = Some(at);
    }

    pub fn finish_at(mut self, done: Instant, outcome: Outcome) {
        self.record(done, &outcome);
    }

    fn record(&mut self, done: Instant, outcome: &Outcome) {
        self.finished = true;
        let outcome = Outcome {
            attempts: self.attempts.count(),
            trace_ids: self.trace_ids.or(outcome.trace_ids),
            ..*outcome
        };
        self.shared.recorder.borrow_mut().record(
            self.request,
            self.intended,
            self.sent,
            done,
            &outcome,
        );
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Cut off by the stop (the exchange's rule; not sent when it
            // never got as far as its send).
            let class = match self.sent {
                Some(_) => self.attempts.cut_off(),
                None => ErrorClass::NotSent,
            };
            let outcome = Outcome {
                error: Some(class),
                ..Default::default()
            };
            self.record(Instant::now(), &outcome);
        }
    }
}

/// Worker `id`'s script engine: the program was compiled when the plan was
/// built, so it loads; its `Math.random` follows the program's seed (one
/// stream per worker and shard), or a fresh one.
fn script_engine(program: &headroom_js::Program, plan: &Plan, id: usize) -> headroom_js::Worker {
    let seed = match program.seed {
        Some(seed) => seed
            .wrapping_add((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add(u64::from(plan.shard.index) << 32),
        None => fastrand::u64(..),
    };
    headroom_js::Worker::new(program, plan.script_data.as_deref(), seed).unwrap_or_else(|e| {
        panic!("the scenario's scripts compiled when the plan was built, yet: {e:?}")
    })
}
