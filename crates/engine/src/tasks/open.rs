//! Open model: arrivals (requests, or users starting a session) are due at
//! scheduled times whether or not earlier ones have returned. A scheduler
//! puts each due arrival on a queue; a pool of tasks (grown on demand, as
//! far as the arrivals need — `pacing::PoolNeed` — and up to the cap)
//! takes them off. Latency counts from the *intended* time, so
//! an arrival that waited for a free task carries its wait (no coordinated
//! omission). Each arrival is a new user. A request arrival goes out on the
//! task's kept-alive connection; an arriving *user* (Gatling's open model)
//! opens its own connections and closes them when it leaves, so the server
//! sees the connection churn real users make.

use super::arrival_clock::ArrivalClock;
use super::user::{Flavor, Mix, Sessions, User};
use crate::pacing::PoolNeed;
use crate::plan::{Flow, OpenLoad};
use crate::shared::{ActiveUser, Shared};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// While behind schedule, the scheduler yields to the connections after
/// this many arrivals.
const YIELD_EVERY: u64 = 32;

pub(crate) struct Arrival {
    pub intended: Instant,
    /// Arrival number (the user's id).
    pub n: u64,
    /// The request (mix) or session drawn for it.
    pub pick: usize,
}

pub(crate) type Queue = (
    async_channel::Sender<Arrival>,
    async_channel::Receiver<Arrival>,
);

pub(crate) async fn run(shared: Rc<Shared>, load: &OpenLoad, queue: Queue) {
    let (tx, rx) = queue;
    // A shard's cap is its share of the plan's, so the shards together
    // hold no more connections than the plan allows.
    // Requests in flight at once: one per connection, or over HTTP/2 as
    // many as the connections' streams.
    let streams = if shared.plan.speaks_h2() {
        shared.plan.max_streams.max(1) as u64
    } else {
        1
    };
    let in_flight = (load.max_connections as u64).saturating_mul(streams);
    let shard_cap = shared.plan.shard.share(in_flight) as usize;
    let cap = shard_cap.div_ceil(shared.workers).max(1);
    let idle = Rc::new(Cell::new(0usize));
    let need = Rc::new(RefCell::new(PoolNeed::default()));
    let mut connections = Vec::new();
    let limit = shared.plan.max_requests.unwrap_or(u64::MAX);
    // Arrivals are numbered over the whole schedule and striped over
    // shards and workers (see `plan::shard`).
    let step = shared.stride().step;
    // A run that joins late (its start lies in the past, as a shard started
    // after the shared `--start-at`) counts what it missed as not sent and
    // follows the schedule from where it is.
    let joined = shared.joined;
    let mut n = shared.next_arrival.get();
    let clock = ArrivalClock::new();
    let mut last: Option<Instant> = None;
    while n < limit {
        let Some(offset) = load.schedule.at(n) else {
            break;
        };
        let intended = shared.start + offset;
        if intended < joined {
            let request = shared.plan.first_request(shared.pick());
            shared
                .recorder
                .borrow_mut()
                .record_not_sent(request, intended, joined);
            n += step;
            shared.next_arrival.set(n);
            continue;
        }
        // This worker's arrivals are this far apart now (the rate may move).
        let gap = last.map_or(Duration::MAX, |last| {
            intended.saturating_duration_since(last)
        });
        need.borrow_mut().arrived(gap);
        last = Some(intended);
        if intended > Instant::now() {
            if !clock.wait_for(&shared, intended, gap).await {
                break;
            }
        } else if n % YIELD_EVERY < shared.workers as u64 {
            // Behind schedule every arrival is already due; without a
            // yield the scheduler would queue them all before a single
            // connection task ran.
            tokio::task::yield_now().await;
        }
        if shared.stop.is_stopping() {
            break;
        }
        let pick = shared.pick();
        if tx.try_send(Arrival { intended, n, pick }).is_err() {
            break;
        }
        // Grow the pool only when every connection is busy, and as far as
        // the arrivals need.
        if tx.len() > idle.get() {
            let now = Instant::now();
            let pool = connections.len();
            if pool < cap && !need.borrow().may_grow(pool, now) {
                need.borrow_mut().hold_back(now);
            } else if pool < cap {
                need.borrow_mut().opened();
                let (shared, rx, idle, need) =
                    (shared.clone(), rx.clone(), idle.clone(), need.clone());
                connections.push(match shared.plan.flow {
                    Flow::Mix => tokio::task::spawn_local(connection::<Mix>(
                        shared, rx, idle, need, load.users,
                    )),
                    Flow::Sessions(_) => tokio::task::spawn_local(connection::<Sessions>(
                        shared, rx, idle, need, load.users,
                    )),
                });
            } else {
                shared.recorder.borrow_mut().arrival_waited_for_connection();
            }
        }
        n += step;
        shared.next_arrival.set(n);
    }
    // Nothing more is due: connections drain the queue, then end.
    tx.close();
    for c in connections {
        let _ = c.await;
    }
}

async fn connection<F: Flavor>(
    shared: Rc<Shared>,
    rx: async_channel::Receiver<Arrival>,
    idle: Rc<Cell<usize>>,
    need: Rc<RefCell<PoolNeed>>,
    users: bool,
) {
    let mut user = User::new(&shared, 0, None);
    loop {
        // Once the run stops, arrivals stay in the queue: the worker counts
        // them `not_sent`. (Taking them here would drop them uncounted, the
        // whole queue in one go, without a single await.)
        if shared.stop.is_stopping() {
            break;
        }
        let arrival = match rx.try_recv() {
            Ok(a) => a,
            Err(async_channel::TryRecvError::Closed) => break,
            Err(async_channel::TryRecvError::Empty) => {
                idle.set(idle.get() + 1);
                let next = rx.recv().await;
                idle.set(idle.get() - 1);
                match next {
                    Ok(a) => a,
                    Err(_) => break,
                }
            }
        };
        let took = Instant::now();
        user.reset(arrival.n);
        if users {
            let _active = ActiveUser::start(&shared);
            F::iteration(&mut user, &shared, Some(arrival.intended), arrival.pick).await;
            user.close_connections();
        } else {
            F::iteration(&mut user, &shared, Some(arrival.intended), arrival.pick).await;
        }
        need.borrow_mut().released(took, Instant::now());
    }
}
