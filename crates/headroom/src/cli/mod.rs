//! Command line: clap → a `Plan` (or target config) → the library.
//! The only place that knows about flags, exit codes and anyhow.
//!
//! Exit codes: 0 ok; 1 a threshold was breached (`run --threshold`,
//! `[thresholds]`) or `compare --fail-on-regression` found a regression; 2 usage or run error; 130 interrupted by Ctrl-C/SIGTERM
//! (results are still written).

mod args;
mod capacity;
mod demo;
mod report;
mod run;
mod study;

use clap::{Parser, Subcommand};

pub const EXIT_OK: i32 = 0;
pub const EXIT_THRESHOLDS: i32 = 1;
pub const EXIT_ERROR: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;

#[derive(Parser, Debug)]
#[command(
    name = "headroom",
    version,
    about = "How much load can your server take, which configuration takes the most, and what runs out first.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Load one HTTP server and report exact counts and latencies.
    Run(Box<args::RunArgs>),
    /// Find the highest load that still meets an objective (SLO), the
    /// knee, and what ran out first.
    Capacity(Box<args::CapacityArgs>),
    /// The built-in sample server (workers × threads, like Puma -w/-t).
    Target(args::TargetArgs),
    /// Start each server configuration, load it, stop it, compare.
    Study(args::StudyArgs),
    /// A small study of the built-in target (workers × threads): the first
    /// thing to run.
    Demo(args::DemoArgs),
    /// Write the HTML report (or Markdown, CSV) of a results file, study.json
    /// or capacity report after the fact.
    Report(args::ReportCmdArgs),
    /// Compare runs (or studies' configurations) side by side: deltas, and
    /// which differences are within noise.
    Compare(args::CompareArgs),
    /// Print the JSON Schema of scenario files (for editors).
    Schema,
    /// Watch a server process on its host and serve the samples to
    /// `headroom run --monitor-url`.
    Monitor(args::MonitorArgs),
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        Command::Run(a) => run::run(*a),
        Command::Capacity(a) => capacity::capacity(*a),
        Command::Target(a) => target(a),
        Command::Study(a) => study::study(a),
        Command::Demo(a) => demo::demo(a),
        Command::Report(a) => report::report(a),
        Command::Compare(a) => report::compare(a),
        Command::Schema => schema(),
        Command::Monitor(a) => monitor(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return EXIT_OK;
            }
            eprintln!("headroom: error: {e:#}");
            EXIT_ERROR
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn monitor(a: args::MonitorArgs) -> anyhow::Result<i32> {
    let pid = match (a.pid, &a.pidfile) {
        (Some(pid), _) => pid,
        (None, Some(file)) => run::read_pidfile(file)?,
        (None, None) => unreachable!("clap requires --pid or --pidfile"),
    };
    headroom::monitor::remote::serve(&headroom::monitor::remote::MonitorServer {
        listen: a.listen,
        pid,
        token: a.token.unwrap_or_else(headroom::monitor::remote::new_token),
        interval: a.interval,
        public: a.public,
    })?;
    Ok(EXIT_OK)
}

fn schema() -> anyhow::Result<i32> {
    let schema = headroom::scenario::raw::json_schema();
    println!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(EXIT_OK)
}

fn target(a: args::TargetArgs) -> anyhow::Result<i32> {
    headroom::target::run(&headroom::target::TargetConfig {
        listen: a.listen,
        workers: a.workers,
        threads: a.threads,
        public: a.public,
        backlog: a.backlog,
        queue: a.queue,
    })?;
    Ok(EXIT_OK)
}
