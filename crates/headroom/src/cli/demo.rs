//! `headroom demo`: the first thing a new user runs — a small study of the
//! built-in target (2 worker counts × 2 thread counts) on a mix of
//! CPU-bound and IO-bound requests, ending with the comparison table and
//! the winner. Under a minute on defaults.

use super::args::DemoArgs;
use super::study::run_study;
use anyhow::Context;
use headroom_records::results::DEFAULT_BUCKETS_MS;
use std::io::Write;

/// The demo's study; `EXE` and `DURATION` are filled in.
const DEMO_STUDY: &str = r#"
[scenario.load]
model = "closed"
vus = 16
duration = "DURATION"

[[scenario.request]]
name = "fibonacci"
path = "/fibonacci?n=5000"
weight = 2

[[scenario.request]]
name = "sleep"
path = "/sleep?ms=20"
weight = 2

[[scenario.request]]
name = "hello"
path = "/hello"
weight = 1

[[server]]
name = "target"
command = "'EXE' target --listen 127.0.0.1:{port} --workers {workers} --threads {threads}"
ready = "/health"

[server.grid]
workers = [1, 2]
threads = [1, 4]

[measure]
warmup = "1s"
pause = "200ms"
"#;

pub fn demo(args: DemoArgs) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().context("cannot find the headroom binary")?;
    let dir = tempfile::tempdir()?;
    let text = DEMO_STUDY
        .replace("EXE", &exe.display().to_string())
        .replace(
            "DURATION",
            &humantime::format_duration(args.duration).to_string(),
        );
    let path = dir.path().join("demo-study.toml");
    std::fs::File::create(&path)?.write_all(text.as_bytes())?;
    println!("headroom demo: the built-in target (a stand-in for a pre-forking, threaded app server like Puma)");
    println!("with workers {{1, 2}} × threads {{1, 4}}, 16 users for {} each on a CPU-bound + IO-bound mix:", humantime::format_duration(args.duration));
    let study = headroom_study::file::load(&path)?;
    let keep = args.out.is_some();
    let out = args.out.unwrap_or_else(|| dir.path().join("results"));
    let code = run_study(
        &study,
        out,
        super::study::Measuring {
            fresh: true,
            sharded: None,
        },
        &DEFAULT_BUCKETS_MS,
        &args.reports,
        &Default::default(),
        &args.dashboard,
    )?;
    if !keep {
        println!("(the demo's results were in a temporary folder: pass --out DIR to keep them)");
    }
    Ok(code)
}
