//! Open model: requests are due at scheduled times whether or not earlier
//! ones have returned. A scheduler puts each due request on a queue; a pool
//! of connections (grown on demand, up to the cap) takes them off. Latency
//! counts from the *intended* time, so a request that waited for a free
//! connection carries its wait (no coordinated omission).

use super::worker::{perform, InFlight, Shared};
use crate::plan::OpenLoad;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

pub(crate) struct Arrival {
    pub intended: Instant,
    pub request: usize,
}

pub(crate) type Queue = (
    async_channel::Sender<Arrival>,
    async_channel::Receiver<Arrival>,
);

pub(crate) async fn run(shared: Rc<Shared>, load: &OpenLoad, queue: Queue) {
    let (tx, rx) = queue;
    let cap = load.max_connections.div_ceil(shared.workers).max(1);
    let idle = Rc::new(Cell::new(0usize));
    let mut connections = Vec::new();
    let limit = shared.plan.max_requests.unwrap_or(u64::MAX);
    // Arrivals are striped over workers: worker w takes n = w, w+W, ...
    let mut n = shared.id as u64;
    while n < limit {
        let Some(offset) = load.schedule.at(n) else {
            break;
        };
        let intended = shared.start + offset;
        if intended > Instant::now() && !shared.sleep_until(intended).await {
            break;
        }
        if shared.stop.is_stopping() {
            break;
        }
        shared.recorder.borrow_mut().request_started();
        let request = shared.pick();
        if tx.try_send(Arrival { intended, request }).is_err() {
            break;
        }
        // Grow the pool only when every connection is busy.
        if tx.len() > idle.get() && connections.len() < cap {
            connections.push(tokio::task::spawn_local(connection(
                shared.clone(),
                rx.clone(),
                idle.clone(),
            )));
        }
        n += shared.workers as u64;
    }
    // Nothing more is due: connections drain the queue, then end.
    tx.close();
    for c in connections {
        let _ = c.await;
    }
}

async fn connection(
    shared: Rc<Shared>,
    rx: async_channel::Receiver<Arrival>,
    idle: Rc<Cell<usize>>,
) {
    let mut conn = None;
    loop {
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
        let mut in_flight = InFlight::already_counted(&shared, arrival.request, arrival.intended);
        in_flight.sent_at(Instant::now());
        let outcome = perform(&shared, &mut conn, &shared.plan.requests[arrival.request]).await;
        in_flight.finish(outcome);
    }
}
