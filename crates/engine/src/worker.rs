//! One worker: a thread with its own single-threaded tokio runtime and its
//! own recorder. Workers share nothing on the hot path; each sends its
//! finished seconds to the controller once a second.

use super::stop::{Phase, StopSignal};
use super::{closed, open, WorkerMsg};
use crate::metrics::{ErrorClass, Outcome, Recorder};
use crate::plan::{Flow, Load, Plan, Step};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::LocalSet;

pub(crate) struct WorkerCtx {
    pub id: usize,
    pub workers: usize,
    pub plan: Arc<Plan>,
    pub start: Instant,
    pub stop: StopSignal,
    pub tx: Sender<WorkerMsg>,
    /// Requests left in a `--requests N` run, shared by all workers.
    pub budget: Option<Arc<AtomicU64>>,
}

/// What every task of one worker shares (single thread: `Rc`, `RefCell`).
pub(crate) struct Shared {
    pub id: usize,
    pub workers: usize,
    pub plan: Arc<Plan>,
    pub start: Instant,
    pub stop: StopSignal,
    pub recorder: RefCell<Recorder>,
    budget: Option<Arc<AtomicU64>>,
    pub rng: RefCell<fastrand::Rng>,
    /// Cumulative weights of the requests (mix) or sessions, for a
    /// weighted pick.
    cumulative: Vec<u64>,
}

impl Shared {
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
        if self.stop.is_stopping() {
            return false;
        }
        let mut phase = self.stop.subscribe();
        tokio::select! {
            _ = tokio::time::sleep_until(at.into()) => !self.stop.is_stopping(),
            _ = phase.wait_for(|p| *p != Phase::Running) => false,
        }
    }
}

/// One request on its way. If the task holding it is dropped (the run's
/// hard stop), `Drop` still counts it, so totals stay exact.
pub(crate) struct InFlight<'a> {
    shared: &'a Shared,
    request: usize,
    intended: Instant,
    sent: Option<Instant>,
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
            finished: false,
        }
    }

    /// An open-model arrival woken a timer tick early (see `open.rs`) is
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
        self.shared.recorder.borrow_mut().record(
            self.request,
            self.intended,
            self.sent,
            done,
            outcome,
        );
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let class = if self.sent.is_some() {
                ErrorClass::Aborted
            } else {
                ErrorClass::NotSent
            };
            let outcome = Outcome {
                error: Some(class),
                ..Default::default()
            };
            self.record(Instant::now(), &outcome);
        }
    }
}

/// Every second, on the second: hand the finished seconds to the controller.
async fn tick(shared: Rc<Shared>, tx: Sender<WorkerMsg>) {
    let mut upto = 1u32;
    loop {
        tokio::time::sleep_until((shared.start + Duration::from_secs(upto as u64)).into()).await;
        let intervals = shared.recorder.borrow_mut().take_completed(upto);
        if tx
            .send(WorkerMsg::Tick {
                worker: shared.id,
                upto,
                intervals,
            })
            .is_err()
        {
            return;
        }
        upto += 1;
    }
}

pub(crate) fn run(ctx: WorkerCtx) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    let weights: Vec<u32> = match &ctx.plan.flow {
        Flow::Mix => ctx.plan.requests.iter().map(|r| r.weight).collect(),
        Flow::Sessions(sessions) => sessions.iter().map(|s| s.weight).collect(),
    };
    let cumulative = weights
        .iter()
        .scan(0u64, |sum, &w| {
            *sum += w as u64;
            Some(*sum)
        })
        .collect();
    let shared = Rc::new(Shared {
        id: ctx.id,
        workers: ctx.workers,
        plan: ctx.plan.clone(),
        start: ctx.start,
        stop: ctx.stop.clone(),
        recorder: RefCell::new(Recorder::new(ctx.start, ctx.plan.requests.len())),
        budget: ctx.budget,
        rng: RefCell::new(fastrand::Rng::new()),
        cumulative,
    });
    // The open model's queue outlives the tasks, so what is left in it at a
    // hard stop can still be counted as not sent.
    let queue = async_channel::unbounded::<open::Arrival>();
    let local = LocalSet::new();
    local.spawn_local(tick(shared.clone(), ctx.tx.clone()));
    local.block_on(&runtime, async {
        let mut phase = ctx.stop.subscribe();
        let work = async {
            match &ctx.plan.load {
                Load::Closed(load) => closed::run(shared.clone(), load).await,
                Load::Open(load) => open::run(shared.clone(), load, queue.clone()).await,
            }
        };
        tokio::select! {
            _ = work => {}
            _ = phase.wait_for(|p| *p == Phase::Abort) => {}
        }
    });
    // Dropping the tasks runs their in-flight guards: cut-off requests are
    // recorded as aborted.
    drop(local);
    drop(runtime);
    let now = Instant::now();
    while let Ok(arrival) = queue.1.try_recv() {
        let request = first_request(&ctx.plan, arrival.pick);
        shared
            .recorder
            .borrow_mut()
            .record_not_sent(request, arrival.intended, now);
    }
    let recorder = shared
        .recorder
        .replace(Recorder::new(ctx.start, ctx.plan.requests.len()));
    let _ = ctx.tx.send(WorkerMsg::Done {
        worker: ctx.id,
        report: recorder.finish(),
    });
}

/// The request an arrival would have sent first (to file it as not sent).
fn first_request(plan: &Plan, pick: usize) -> usize {
    fn first(steps: &[Step]) -> Option<usize> {
        steps.iter().find_map(|s| match s {
            Step::Request(i) => Some(*i),
            Step::Repeat { steps, .. } => first(steps),
            Step::Choice(branches) => branches.iter().find_map(|(_, s)| first(s)),
            Step::Think { .. } | Step::Feed(_) => None,
        })
    }
    match &plan.flow {
        Flow::Mix => pick,
        Flow::Sessions(sessions) => first(&sessions[pick].steps).unwrap_or(0),
    }
}
