//! Closed model: N users, each on its own connection, looping iterations
//! (a request from the mix, or a session) → think time. A user starts its
//! next request only when the previous one has finished, so latency counts
//! from the send. With user stages (k6's ramping-vus) users join and leave
//! as the count rises and falls; one that leaves finishes its iteration,
//! then closes its connections.

use super::user::{Control, Flavor, Mix, Sessions, User};
use crate::plan::{ClosedLoad, Flow, Load, UserStage};
use crate::shared::{ActiveUser, Shared};
use std::rc::Rc;
use std::time::{Duration, Instant};

pub(crate) async fn run(shared: Rc<Shared>, load: &ClosedLoad) {
    // Users are numbered over the whole plan and striped over shards and
    // workers (see `plan::shard`); each keeps its place in the ramp-up.
    let users: Vec<_> = shared
        .users_of(load)
        .map(|user| {
            let spans = if load.stages.is_empty() {
                vec![(load.ramp_offset(user), None)]
            } else {
                UserStage::spans(&load.stages, user as u32)
            };
            match shared.plan.flow {
                Flow::Mix => {
                    tokio::task::spawn_local(user_loop::<Mix>(shared.clone(), user, spans))
                }
                Flow::Sessions(_) => {
                    tokio::task::spawn_local(user_loop::<Sessions>(shared.clone(), user, spans))
                }
            }
        })
        .collect();
    for user in users {
        let _ = user.await;
    }
}

/// The plan's closed load. Read there by every user, not copied into each:
/// a copy per user is a cache miss per request at 1,000 users.
fn closed_load(shared: &Shared) -> &ClosedLoad {
    match &shared.plan.load {
        Load::Closed(load) => load,
        Load::Open(_) => unreachable!("closed-model users run a closed load"),
    }
}

/// One user over its active spans (one, from its ramp-up offset to the
/// end, without stages).
async fn user_loop<F: Flavor>(
    shared: Rc<Shared>,
    id: u64,
    spans: Vec<(Duration, Option<Duration>)>,
) {
    let load = closed_load(&shared);
    let deadline = load.duration.map(|d| shared.start + d);
    let mut user = User::new(&shared, id, deadline);
    for (start, stop) in spans {
        if !shared.sleep_until(shared.start + start).await {
            return;
        }
        let retire = stop.map(|s| shared.start + s);
        if active::<F>(&shared, load, &mut user, retire).await == Control::Stop {
            return;
        }
        user.close_connections();
    }
}

/// Iterations until the user retires (checked between iterations), the
/// load ends, or its iterations are done.
async fn active<F: Flavor>(
    shared: &Shared,
    load: &ClosedLoad,
    user: &mut User,
    retire: Option<Instant>,
) -> Control {
    let _active = ActiveUser::start(shared);
    while load.iterations.is_none_or(|n| user.script.iteration < n) {
        if retire.is_some_and(|r| Instant::now() >= r) {
            return Control::Continue;
        }
        let pick = shared.pick();
        if F::iteration(user, shared, None, pick).await == Control::Stop {
            return Control::Stop;
        }
        if !load.think_time.is_zero() {
            user.before_pause(load.think_time);
            let wake = Instant::now() + load.think_time;
            let wake = [user.deadline, retire]
                .into_iter()
                .flatten()
                .fold(wake, Instant::min);
            if !shared.sleep_until(wake).await {
                return Control::Stop;
            }
        }
    }
    Control::Stop
}
