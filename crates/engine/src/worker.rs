//! One worker: a thread with its own single-threaded tokio runtime and its
//! own recorder. Workers share nothing on the hot path; each sends its
//! finished seconds to the controller once a second.

use super::stop::{Phase, StopSignal};
use crate::event_loop;
use crate::metrics::{Interval, Recorder, WorkerReport};
use crate::plan::{Load, OpenLoad, Plan};
use crate::shared::Shared;
use crate::tasks::{closed, open};
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::LocalSet;

/// What a worker tells the controller.
pub(crate) enum WorkerMsg {
    Tick {
        worker: usize,
        upto: u32,
        intervals: Vec<Interval>,
    },
    Done {
        worker: usize,
        report: WorkerReport,
    },
}

pub(crate) struct WorkerCtx {
    pub id: usize,
    pub workers: usize,
    pub plan: Arc<Plan>,
    pub start: Instant,
    /// When the run began (later than `start` for a late shard).
    pub joined: Instant,
    pub stop: StopSignal,
    pub tx: Sender<WorkerMsg>,
    /// Requests left in a `--requests N` run, shared by all workers.
    pub budget: Option<Arc<AtomicU64>>,
}

/// Starts worker `ctx.id` on a thread of its own.
pub(crate) fn spawn(ctx: WorkerCtx) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("headroom-worker-{}", ctx.id))
        .spawn(move || run(ctx))
        .expect("a worker thread can be spawned")
}

/// Every second, on the second: hand the finished seconds to the controller.
async fn tick(shared: Rc<Shared>, tx: Sender<WorkerMsg>) {
    let mut upto = 1u32;
    loop {
        tokio::time::sleep_until((shared.start + Duration::from_secs(upto as u64)).into()).await;
        if !send_tick(&shared, &tx, upto) {
            return;
        }
        upto += 1;
    }
}

/// Hands the seconds before `upto` to the controller; false once it is gone.
fn send_tick(shared: &Shared, tx: &Sender<WorkerMsg>, upto: u32) -> bool {
    let intervals = shared.recorder.borrow_mut().take_completed(upto);
    tx.send(WorkerMsg::Tick {
        worker: shared.id,
        upto,
        intervals,
    })
    .is_ok()
}

pub(crate) fn run(ctx: WorkerCtx) {
    let shared = Rc::new(Shared::new(
        ctx.id,
        ctx.workers,
        ctx.plan.clone(),
        (ctx.start, ctx.joined),
        ctx.stop.clone(),
        ctx.budget.clone(),
    ));
    // The open model's queue outlives the tasks, so what is left in it at a
    // hard stop can still be counted as not sent.
    let queue = async_channel::unbounded::<open::Arrival>();
    match event_loop::load_of(&ctx.plan) {
        Some(load) => event_loop::run(&shared, load, |upto| {
            send_tick(&shared, &ctx.tx, upto);
        }),
        None => run_tasks(&ctx, &shared, &queue),
    }
    let now = Instant::now();
    while let Ok(arrival) = queue.1.try_recv() {
        let request = ctx.plan.first_request(arrival.pick);
        shared
            .recorder
            .borrow_mut()
            .record_not_sent(request, arrival.intended, now);
    }
    if let Load::Open(load) = &ctx.plan.load {
        count_unreached_arrivals(&shared, load, &ctx.stop, now);
    }
    let recorder = shared
        .recorder
        .replace(Recorder::new(ctx.start, ctx.plan.requests.len()));
    let _ = ctx.tx.send(WorkerMsg::Done {
        worker: ctx.id,
        report: recorder.finish(),
    });
}

/// The plan's users or arrivals as tokio tasks, on this thread's runtime.
fn run_tasks(
    ctx: &WorkerCtx,
    shared: &Rc<Shared>,
    queue: &(
        async_channel::Sender<open::Arrival>,
        async_channel::Receiver<open::Arrival>,
    ),
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
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
    let quic = shared.origins.close_all();
    if quic.handshakes > 0 {
        shared.recorder.borrow_mut().quic(&quic);
    }
    drop(runtime);
}

/// A scheduler that fell behind (every arrival already due, the machine
/// saturated) can reach the hard stop before it has even queued some
/// arrivals that were due. They are counted `not_sent` like the queued
/// ones, so the total is what the schedule asked for until the load ended
/// or stopping began.
fn count_unreached_arrivals(shared: &Shared, load: &OpenLoad, stop: &StopSignal, now: Instant) {
    let load_end = shared.start + load.schedule.duration();
    let due_until = stop.stopped_at().map_or(load_end, |s| s.min(load_end));
    let limit = shared.plan.max_requests.unwrap_or(u64::MAX);
    let mut n = shared.next_arrival.get();
    let mut recorder = shared.recorder.borrow_mut();
    while n < limit {
        let Some(offset) = load.schedule.at(n) else {
            break;
        };
        let intended = shared.start + offset;
        if intended >= due_until {
            break;
        }
        let request = shared.plan.first_request(shared.pick());
        recorder.record_not_sent(request, intended, now);
        n += shared.stride().step;
    }
}
