//! A plan built in code, run against the built-in sample server, in both
//! load models — the engine without scenario files, reports or the CLI:
//!
//! ```sh
//! cargo run --release -p headroom-engine --example plan_in_code
//! ```

use headroom_engine::plan::schedule::Schedule;
use headroom_engine::plan::{ClosedLoad, Load, OpenLoad, Plan, DEFAULT_MAX_CONNECTIONS};
use headroom_engine::{run, RunOutcome, StopSignal};
use headroom_sample_server::TargetConfig;
use std::error::Error;
use std::time::Duration;

fn main() -> Result<(), Box<dyn Error>> {
    // The sample server in this process (one worker, four app threads) on a
    // free loopback port; it serves until the process ends.
    let server = headroom_sample_server::bind(&TargetConfig {
        listen: "127.0.0.1:0".into(),
        workers: 0,
        threads: 4,
        public: false,
        backlog: 1024,
        queue: None,
        request_log: None,
    })?;
    let url = format!("http://{}/sleep?ms=10", server.local);
    std::thread::spawn(move || server.serve());

    // Closed model: 8 users, each looping request → response for 3 s. Four
    // app threads holding each request 10 ms serve at most 400 req/s.
    let mut plan = Plan::get(&url)?;
    plan.load = Load::Closed(ClosedLoad::users(8, Duration::from_secs(3)));
    let closed = run(&plan, &StopSignal::new(), |p| {
        println!(
            "  second {:>2}: {} requests",
            p.second.t_s + 1,
            p.second.requests
        )
    });
    report("closed, 8 users", &closed);

    // Open model: 200 arrivals per second for 3 s, whatever the server does;
    // latency counts from each arrival's intended send time.
    plan.load = Load::Open(OpenLoad {
        users: false,
        schedule: Schedule::constant(200.0, Duration::from_secs(3))?,
        max_connections: DEFAULT_MAX_CONNECTIONS,
    });
    let open = run(&plan, &StopSignal::new(), |_| {});
    report("open, 200 req/s", &open);
    Ok(())
}

fn report(what: &str, outcome: &RunOutcome) {
    let t = &outcome.total;
    let ms = |q: f64| t.latency.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{what}: {} requests ({} ok, {} failed) in {:.2} s; p50 {:.2} ms, p99 {:.2} ms",
        t.requests,
        t.ok,
        t.failed,
        outcome.duration.as_secs_f64(),
        ms(0.5),
        ms(0.99),
    );
}
