//! Closed model: N users, each on its own connection, looping iterations
//! (a request from the mix, or a session) → think time. A user starts its
//! next request only when the previous one has finished, so latency counts
//! from the send.

use super::user::{Control, User};
use crate::plan::ClosedLoad;
use crate::shared::Shared;
use std::rc::Rc;
use std::time::Instant;

pub(crate) async fn run(shared: Rc<Shared>, load: &ClosedLoad) {
    // Users are numbered over the whole plan and striped over shards and
    // workers (see `plan::shard`); each keeps its place in the ramp-up.
    let stride = shared.stride();
    let users: Vec<_> = (stride.first..load.vus as u64)
        .step_by(stride.step as usize)
        .map(|user| {
            let offset = load.ramp_up.mul_f64(user as f64 / load.vus as f64);
            tokio::task::spawn_local(user_loop(shared.clone(), load.clone(), user, offset))
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

async fn user_loop(shared: Rc<Shared>, load: ClosedLoad, id: u64, offset: std::time::Duration) {
    if !shared.sleep_until(shared.start + offset).await {
        return;
    }
    let deadline = load.duration.map(|d| shared.start + d);
    shared.recorder.borrow_mut().user_started();
    let _active = ActiveUser(&shared);
    let mut user = User::new(&shared, id, deadline);
    while load.iterations.is_none_or(|n| user.iteration < n) {
        let pick = shared.pick();
        if user.iteration(&shared, None, pick).await == Control::Stop {
            break;
        }
        if !load.think_time.is_zero() {
            user.before_pause(load.think_time);
            let wake = Instant::now() + load.think_time;
            let wake = deadline.map_or(wake, |d| wake.min(d));
            if !shared.sleep_until(wake).await {
                break;
            }
        }
    }
}
