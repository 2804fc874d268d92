//! Command line: clap → a `Plan` (or target config) → the library.
//! The only place that knows about flags, exit codes and anyhow.
//!
//! Each subcommand has a file of its own; what they share is in `exit`
//! (exit codes, the interrupt) and `common` (how runs are recorded).

mod args;
mod capacity;
mod common;
mod dashboard;
mod demo;
mod docs;
mod exit;
mod fleet;
mod import;
mod k8s;
mod k8s_job;
mod k8s_run;
mod k8s_steps;
mod live;
mod merge;
mod metrics;
mod outputs;
mod processes;
mod report;
mod run;
mod study;

use args::{
    CapacityArgs, CompareArgs, DemoArgs, K8sArgs, MergeArgs, MonitorArgs, ReportCmdArgs,
    RunCmdArgs, StudyArgs, TargetArgs,
};
use clap::{Parser, Subcommand};
use exit::{EXIT_ERROR, EXIT_OK};
use headroom_monitor::remote;
use std::io::Write;

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
    Run(Box<RunCmdArgs>),
    /// Find the highest load that still meets an objective (SLO), the
    /// knee, and what ran out first.
    Capacity(Box<CapacityArgs>),
    /// The built-in sample server (workers × threads, like Puma -w/-t).
    Target(TargetArgs),
    /// Start each server configuration, load it, stop it, compare.
    Study(Box<StudyArgs>),
    /// A small study of the built-in target (workers × threads): the first
    /// thing to run.
    Demo(DemoArgs),
    /// Write the HTML report (or Markdown, CSV) of a results file, study.json
    /// or capacity report after the fact.
    Report(ReportCmdArgs),
    /// Compare runs (or studies' configurations) side by side: deltas, and
    /// which differences are within noise.
    Compare(CompareArgs),
    /// Merge the results of a plan's shards (`run --shard K/N`) into one,
    /// exactly: counts summed, percentiles from the merged histograms.
    Merge(MergeArgs),
    /// Run a plan's shards on Kubernetes: write an Indexed Job's manifests,
    /// or (`collect JOB`) gather and merge its pods' results.
    K8s(Box<K8sArgs>),
    /// Coordinate shards started by hand (`run --shard K/N --report-to
    /// http://…`): the fleet shown and judged live, their results merged.
    Fleet(Box<args::FleetArgs>),
    /// Turn a curl command, a HAR file or a JMeter plan into a scenario
    /// file, listing what could not be carried over.
    Import(args::ImportArgs),
    /// Print the JSON Schema of scenario files (default), study files or
    /// results files, for editors and validators.
    Schema(args::SchemaArgs),
    /// Watch a server process on its host and serve the samples to
    /// `headroom run --monitor-url`.
    Monitor(MonitorArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// PowerShell, e.g. `source <(headroom completions bash)`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the references generated from headroom's own definitions
    /// (command line, man pages, scenario and study files) under DIR.
    #[command(hide = true)]
    Docs {
        #[arg(long, value_name = "DIR")]
        out: std::path::PathBuf,
    },
}

/// The completion script for `shell`, written whole (generated into memory
/// first: a closed pipe is then an error the caller handles, not a panic).
fn completions(shell: clap_complete::Shell) -> anyhow::Result<i32> {
    use std::io::Write;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "headroom", &mut script);
    std::io::stdout().write_all(&script)?;
    Ok(EXIT_OK)
}

/// The command line's grammar, with `capacity --help` showing only the
/// flags that apply to a search.
fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command().mut_subcommand("capacity", |c| {
        capacity::NOT_FOR_CAPACITY
            .iter()
            .fold(c, |c, id| c.mut_arg(*id, |a| a.hide(true)))
    })
}

pub fn main() -> i32 {
    use clap::FromArgMatches;
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
            let _ = e.print();
            return code;
        }
    };
    let result = match cli.command {
        // One process is the run itself: no child, no merge.
        Command::Run(args) => match args.scale.processes {
            Some(processes) if processes > 1 => processes::run(&args, processes),
            _ => run::run(*args),
        },
        Command::Capacity(args) => capacity::capacity(*args),
        Command::Target(args) => target(args),
        Command::Study(args) => study::study(*args),
        Command::Demo(args) => demo::demo(args),
        Command::Report(args) => report::report(args),
        Command::Compare(args) => report::compare(args),
        Command::Merge(args) => merge::merge(args),
        Command::K8s(args) => k8s::k8s(*args),
        Command::Fleet(args) => fleet::serve::fleet(*args),
        Command::Schema(args) => schema(args),
        Command::Import(args) => import::import(args),
        Command::Monitor(args) => monitor(args),
        Command::Completions { shell } => completions(shell),
        Command::Docs { out } => docs::docs(command(), &out),
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

fn monitor(args: MonitorArgs) -> anyhow::Result<i32> {
    let pid = match (args.pid, &args.pidfile) {
        (Some(pid), _) => pid,
        (None, Some(file)) => run::read_pidfile(file)?,
        (None, None) => unreachable!("clap requires --pid or --pidfile"),
    };
    let config = remote::MonitorServer {
        listen: args.listen,
        pid,
        token: args.token.unwrap_or_else(remote::new_token),
        interval: args.interval,
        public: args.public,
        probes: args.probe,
    };
    let listening = remote::bind(&config)?;
    println!(
        "headroom monitor listening on http://{} (pid {pid}, every {:?}, token {})",
        listening.local, config.interval, config.token
    );
    std::io::stdout().flush()?;
    listening.serve();
    Ok(EXIT_OK)
}

fn schema(args: args::SchemaArgs) -> anyhow::Result<i32> {
    use args::SchemaKind;
    let schema = match args.which {
        SchemaKind::Scenario => headroom_scenario::raw::json_schema(),
        SchemaKind::Study => {
            serde_json::to_value(schemars::schema_for!(headroom_study::file::RawStudy))?
        }
        SchemaKind::Results => {
            serde_json::to_value(schemars::schema_for!(headroom_records::Results))?
        }
    };
    println!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(EXIT_OK)
}

fn target(args: TargetArgs) -> anyhow::Result<i32> {
    let config = headroom_sample_server::TargetConfig {
        listen: args.listen,
        workers: args.workers,
        threads: args.threads,
        public: args.public,
        backlog: args.backlog,
        queue: args.queue,
        request_log: args.request_log,
    };
    let bound = headroom_sample_server::bind(&config)?;
    for warning in &bound.warnings {
        eprintln!("headroom target: {warning}");
    }
    // Tests and scripts read the port from this first line.
    println!(
        "headroom target listening on http://{} (workers {}, threads {}, pid {})",
        bound.local,
        config.workers,
        config.threads,
        std::process::id()
    );
    std::io::stdout().flush()?;
    bound.serve()?;
    Ok(EXIT_OK)
}
