//! Closed model: N users, each on its own connection, looping
//! request → response (→ think time). A user starts its next request only
//! when the previous one has finished, so latency counts from the send.

use super::worker::{perform, InFlight, Shared};
use crate::plan::ClosedLoad;
use std::rc::Rc;
use std::time::Instant;

pub(crate) async fn run(shared: Rc<Shared>, load: &ClosedLoad) {
    // Users are striped over workers: worker w runs users w, w+W, w+2W, ...
    let users: Vec<_> = (shared.id as u64..load.vus as u64)
        .step_by(shared.workers)
        .map(|user| {
            let offset = load.ramp_up.mul_f64(user as f64 / load.vus as f64);
            tokio::task::spawn_local(user_loop(shared.clone(), load.clone(), offset))
        })
        .collect();
    for user in users {
        let _ = user.await;
    }
}

/// Keeps the active-user gauge right even when the task is cut off.
struct ActiveUser<'a>(&'a Shared);

impl Drop for ActiveUser<'_> {
    fn drop(&mut self) {
        self.0.recorder.borrow_mut().user_finished();
    }
}

async fn user_loop(shared: Rc<Shared>, load: ClosedLoad, offset: std::time::Duration) {
    let start_at = shared.start + offset;
    if !shared.sleep_until(start_at).await {
        return;
    }
    let deadline = load.duration.map(|d| shared.start + d);
    shared.recorder.borrow_mut().user_started();
    shared.users_started.set(shared.users_started.get() + 1);
    let _active = ActiveUser(&shared);
    let mut conn = None;
    let mut iteration = 0u64;
    loop {
        if shared.stop.is_stopping()
            || deadline.is_some_and(|d| Instant::now() >= d)
            || load.iterations.is_some_and(|n| iteration >= n)
            || !shared.take_budget()
        {
            break;
        }
        let request = shared.pick();
        let sent = Instant::now();
        let mut in_flight = InFlight::begin(&shared, request, sent);
        in_flight.sent_at(sent);
        let outcome = perform(&shared, &mut conn, &shared.plan.requests[request]).await;
        in_flight.finish(outcome);
        iteration += 1;
        if !load.think_time.is_zero() {
            let wake = Instant::now() + load.think_time;
            let wake = deadline.map_or(wake, |d| wake.min(d));
            if !shared.sleep_until(wake).await {
                break;
            }
        }
    }
}
