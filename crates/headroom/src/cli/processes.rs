//! `headroom run … --processes P`: the plan's P shards as child processes
//! of this one, on one shared start, merged at the end into one results
//! file and one summary. For loads past what one process may hold (its
//! open-files limit) or drive (one event loop per core is not always
//! enough when a run does heavy TLS or templating).
//!
//! ```text
//!  parent: parses and checks the plan, starts/watches the server (the
//!          monitor flags stay here), picks a start 1 s + 0.1 s × P ahead
//!     ├── headroom run <same flags> --shard 1/P --start-at T --out dir/shard-1.json -q
//!     ├── …                                       (own process group each)
//!     └── headroom run <same flags> --shard P/P …
//!  Ctrl-C / SIGTERM → the parent passes it on once to every child; each
//!  writes what it measured; the parent merges what there is.
//! ```

use super::args::RunCmdArgs;
use super::exit::{install_interrupt, interrupting_signal};
use super::fleet::view::FleetView;
use super::fleet::{finish_fleet, Coordinator, FleetEnd};
use super::outputs::Outputs;
use super::run::{self, scenario_from_args, watch_from_args};
use anyhow::{bail, Context};
use headroom_engine::StopSignal;
use headroom_monitor::Monitor;
use headroom_records::merge::{merge, ShardFile};
use headroom_records::server::machine;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

/// Flags the children do not get: the parent writes the outputs, watches
/// the server and checks the thresholds; the children get their own
/// shard, start and output file. (long name, short name, takes a value)
const PARENT_ONLY: &[(&str, Option<char>, bool)] = &[
    ("--processes", None, true),
    ("--shard", None, true),
    ("--report-to", None, true),
    ("--capacity-step", None, true),
    ("--lasting", None, true),
    ("--warmup-first", None, true),
    // The parent judges aborting thresholds on the fleet's seconds.
    ("--abort-on", None, true),
    ("--abort-delay", None, true),
    ("--abort-window", None, true),
    ("--start-at", None, true),
    ("--out", Some('o'), true),
    ("--out-fallback", None, true),
    ("--html", None, true),
    ("--csv", None, true),
    ("--hdr-log", None, true),
    ("--junit", None, true),
    ("--threshold", None, true),
    ("--markdown", None, false),
    ("--quiet", Some('q'), false),
    ("--monitor-pid", None, true),
    ("--monitor-pidfile", None, true),
    ("--monitor-cmd", None, true),
    ("--monitor-url", None, true),
    ("--monitor-token", None, true),
    ("--monitor-interval", None, true),
    ("--monitor-ready-timeout", None, true),
    ("--probe", None, true),
    // One endpoint and one stream for the whole run: the merged figures.
    ("--metrics-listen", None, true),
    ("--metrics-push", None, true),
    ("--otlp", None, true),
    ("--metrics-linger", None, true),
    ("--progress", None, true),
    ("--dashboard", None, false),
    ("--dashboard-token", None, true),
    ("--dashboard-linger", None, true),
];

/// The command line after `run`, without the parent-only flags and
/// `also_parents` (in any of clap's spellings: `--out F`, `--out=F`, `-o
/// F`, `-oF`).
pub fn child_args(args: &[String], also_parents: &[(&str, Option<char>, bool)]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            kept.extend(args[i - 1..].iter().cloned());
            break;
        }
        let flag = PARENT_ONLY
            .iter()
            .chain(also_parents)
            .find(|(long, short, _)| {
                arg == long
                    || arg.starts_with(&format!("{long}="))
                    || short.is_some_and(|c| {
                        arg.starts_with(&format!("-{c}")) && !arg.starts_with("--")
                    })
            });
        match flag {
            Some((long, short, true)) => {
                let joined = arg.contains('=') && arg.starts_with(long)
                    || short.is_some_and(|c| arg.len() > 2 && arg.starts_with(&format!("-{c}")));
                if !joined {
                    i += 1; // the value is the next word
                }
            }
            Some((_, _, false)) => {}
            None => kept.push(arg.clone()),
        }
    }
    kept
}

/// A child process, killed (by its pid) if the parent ends first.
struct ShardChild {
    child: Child,
    out: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl Drop for ShardChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn run(args: &RunCmdArgs, processes: u32) -> anyhow::Result<i32> {
    let run_args = &args.run;
    // The plan is built and checked here first, so a bad flag fails once,
    // before any child starts.
    let scenario = scenario_from_args(run_args)?;
    let outputs = Outputs::from_args(run_args);
    run::check_request_names(&outputs.thresholds, &scenario.plan, "--threshold")?;
    outputs.check_writable()?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let watch = watch_from_args(run_args, &scenario.plan)?;
    let plan = &scenario.plan;
    let title = format!(
        "{}://{} — {processes} processes",
        if plan.endpoint.https { "https" } else { "http" },
        plan.endpoint.host_header
    );
    let mut coordinator = Coordinator::start(
        &scenario,
        (processes as usize, headroom_measure::fleet::GRACE),
        outputs.progress,
        outputs.quiet,
        &run_args.metrics,
        &run_args.dashboard,
        &stop,
        &title,
    )?;

    let start = args
        .scale
        .start_at
        .unwrap_or_else(|| default_start(processes));
    let words: Vec<String> = std::env::args().collect();
    let after_run = words
        .iter()
        .position(|w| w == "run")
        .map_or(&words[1..], |i| &words[i + 1..]);
    let mut common = child_args(after_run, &[]);
    if run_args.threads.is_none() {
        common.extend(threads_each(processes));
    }
    let mut shards = Shards::spawn(&common, processes, start)?;
    if !outputs.quiet {
        eprintln!(
            "headroom: {processes} processes, one shard each, starting at {}",
            humantime::format_rfc3339_millis(start)
        );
    }
    let monitor = Monitor::start(watch.config.clone(), run::instant_of(start), start);

    let view = &mut coordinator.view;
    shards.wait(&stop, |happened| match happened {
        Happened::Line(k, line) => {
            view.line(k, &line);
            false
        }
        Happened::Ended(k, failed) => {
            view.ended(k, failed);
            false
        }
        Happened::Tick => {
            let Some(breach) = view.tick(monitor.latest().as_ref()) else {
                return false;
            };
            if !outputs.quiet {
                let why = FleetView::breach_line(&breach);
                eprintln!("headroom: {why}: stopping every shard");
            }
            true
        }
    })?;
    view.finish(monitor.latest().as_ref());
    drop(watch.server);

    finish_fleet(
        shards.results()?,
        FleetEnd {
            stop: &stop,
            coordinator,
            thresholds: &scenario.thresholds,
            monitor: Some(monitor),
        },
        outputs,
    )
}

/// A start 1 s + 0.1 s per process ahead: time for the children to start.
pub fn default_start(processes: u32) -> SystemTime {
    SystemTime::now() + Duration::from_millis(1000 + 100 * processes as u64)
}

/// `--threads N` for each of P children: the machine's cores shared out,
/// rather than P × all of them.
pub fn threads_each(processes: u32) -> [String; 2] {
    let threads = (machine::available_cores() / processes as usize).max(1);
    ["--threads".into(), threads.to_string()]
}

/// A capacity search's steps as P shards in child processes
/// (`capacity --processes P`): each step (and its warm-up) a sharded run
/// on one shared start, merged exactly, watched by this process's monitor.
pub struct ShardedSteps<'a> {
    /// `headroom run` words for the children (the scenario, its HTTP
    /// settings), without the load.
    pub words: Vec<String>,
    pub processes: u32,
    pub stop: &'a StopSignal,
    pub watch: &'a headroom_monitor::MonitorConfig,
    pub command: Vec<String>,
}

impl ShardedSteps<'_> {
    fn sharded_run(
        &self,
        step: &headroom_capacity::StepRun,
        duration: Duration,
    ) -> anyhow::Result<headroom_records::Results> {
        let mut words = self.words.clone();
        words.extend([
            "--capacity-step".to_string(),
            super::args::CapacityStep {
                axis: step.axis,
                load: step.load,
                duration,
            }
            .to_arg(),
        ]);
        sharded_run(&words, self.processes, self.watch, self.stop, &self.command)
    }
}

impl headroom_capacity::Stepper for ShardedSteps<'_> {
    fn step(&mut self, step: &headroom_capacity::StepRun) -> Option<headroom_records::Results> {
        let measured = (|| {
            if !step.warmup.is_zero() {
                self.sharded_run(step, step.warmup)?;
            }
            self.sharded_run(step, step.duration)
        })();
        match measured {
            Ok(results) => Some(results),
            Err(e) => {
                eprintln!("headroom: error: step {}: {e:#}", step.index);
                None
            }
        }
    }
}

/// A study's runs as P shards in child processes (`study --processes
/// P`): the configuration's scenario written beside the study's (its
/// relative paths hold), each run a sharded run on one start, merged,
/// watched by the study's monitor of the configuration's server.
pub struct StudyShards {
    pub processes: u32,
    pub command: Vec<String>,
}

impl headroom_study::Sharded for StudyShards {
    fn run(
        &self,
        scenario: &str,
        dir: &std::path::Path,
        (load, warmup): (headroom_study::ShardedLoad, Duration),
        watch: &headroom_monitor::MonitorConfig,
        stop: &StopSignal,
    ) -> Option<headroom_records::Results> {
        let measured = (|| {
            let file = scenario_beside(scenario, dir)?;
            let sharded = |load| {
                let mut words = vec![file.path().display().to_string()];
                words.extend(load_flags(load));
                words.extend(threads_each(self.processes));
                sharded_run(&words, self.processes, watch, stop, &self.command)
            };
            if !warmup.is_zero() {
                sharded(load.lasting(warmup))?;
            }
            sharded(load)
        })();
        measured
            .map_err(|e| eprintln!("headroom: error: a sharded run: {e:#}"))
            .ok()
    }
}

/// A study configuration's scenario written beside the study (its
/// relative paths hold), removed when dropped.
pub fn scenario_beside(
    scenario: &str,
    dir: &std::path::Path,
) -> anyhow::Result<tempfile::NamedTempFile> {
    let mut file = tempfile::Builder::new()
        .prefix(".headroom-shards-")
        .suffix(".toml")
        .tempfile_in(dir)
        .with_context(|| format!("cannot write the run's scenario in {}", dir.display()))?;
    std::io::Write::write_all(&mut file, scenario.as_bytes())?;
    Ok(file)
}

/// The hidden `headroom run` flags that set a sharded run's load.
pub fn load_flags(load: headroom_study::ShardedLoad) -> Vec<String> {
    match load {
        headroom_study::ShardedLoad::Scenario(Some(d)) => {
            vec!["--lasting".into(), format!("{}ms", d.as_millis())]
        }
        headroom_study::ShardedLoad::Scenario(None) => Vec::new(),
        headroom_study::ShardedLoad::Step {
            axis,
            load,
            duration,
        } => vec![
            "--capacity-step".into(),
            super::args::CapacityStep {
                axis,
                load,
                duration,
            }
            .to_arg(),
        ],
    }
}

/// `headroom run WORDS` as P shards on one start, merged, with this
/// process's monitor of the server attached.
fn sharded_run(
    words: &[String],
    processes: u32,
    watch: &headroom_monitor::MonitorConfig,
    stop: &StopSignal,
    command: &[String],
) -> anyhow::Result<headroom_records::Results> {
    let start = default_start(processes);
    let mut shards = Shards::spawn(words, processes, start)?;
    let monitor = Monitor::start(watch.clone(), run::instant_of(start), start);
    shards.wait(stop, |_| false)?;
    let mut results = merge(shards.results()?, true, command.to_vec())?;
    let report = monitor.finish(machine::available_cores(), &results.client_facts());
    results.attach_server(report);
    results.interrupted = stop.was_interrupted();
    Ok(results)
}

/// What a fleet of children did since the last look.
pub enum Happened {
    /// A line of shard k's (0-based) stdout: its reports.
    Line(usize, String),
    /// Shard k's process ended; why, when it left no results.
    Ended(usize, Option<String>),
    /// About every 50 ms.
    Tick,
}

/// P shards of one run as child processes on one shared start, each
/// `headroom run WORDS --shard k/P --start-at T --report-to - --out F -q`.
pub struct Shards {
    dir: tempfile::TempDir,
    children: Vec<ShardChild>,
    lines: std::sync::mpsc::Receiver<(usize, String)>,
    exits: Vec<Option<std::process::ExitStatus>>,
}

impl Shards {
    pub fn spawn(words: &[String], processes: u32, start: SystemTime) -> anyhow::Result<Shards> {
        let dir = tempfile::Builder::new()
            .prefix("headroom-processes-")
            .tempdir()
            .context("cannot make a folder for the shards' results")?;
        let exe = std::env::current_exe().context("cannot find headroom's own executable")?;
        let start_text = humantime::format_rfc3339_millis(start).to_string();
        let mut children = Vec::new();
        let (lines_to, lines) = std::sync::mpsc::channel();
        for k in 1..=processes {
            let out = dir.path().join(format!("shard-{k}.json"));
            let log = dir.path().join(format!("shard-{k}.log"));
            let mut command = Command::new(&exe);
            command
                .arg("run")
                .args(words)
                .args(["--shard", &format!("{k}/{processes}")])
                .args(["--start-at", &start_text])
                // Each child reports its seconds on its stdout, a pipe to
                // this process, which shows and judges the fleet.
                .args(["--report-to", "-"])
                .arg("--out")
                .arg(&out)
                .arg("-q")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&log)?);
            // Its own process group: a Ctrl-C at the terminal reaches only
            // the parent, which passes it on exactly once (a second one
            // aborts).
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            let mut child = command
                .spawn()
                .with_context(|| format!("cannot start shard {k}/{processes}"))?;
            let stdout = child.stdout.take().expect("stdout is piped");
            read_lines(k as usize - 1, stdout, lines_to.clone())?;
            children.push(ShardChild { child, out, log });
        }
        Ok(Shards {
            dir,
            exits: vec![None; children.len()],
            children,
            lines,
        })
    }

    /// Until every child has ended: `on` hears what happened, and stops
    /// the fleet (SIGINT to every child: each writes what it measured)
    /// when it answers true. A Ctrl-C of this process is passed on too.
    pub fn wait(
        &mut self,
        stop: &StopSignal,
        mut on: impl FnMut(Happened) -> bool,
    ) -> anyhow::Result<()> {
        let mut passed_on = false;
        let pass_on = |children: &[ShardChild], signal: i32| {
            for c in children {
                // SAFETY: kill(2) on the pid of a child we started and
                // have not reaped.
                unsafe { libc::kill(c.child.id() as i32, signal) };
            }
        };
        while self.exits.iter().any(Option::is_none) {
            let mut stop_fleet = false;
            if stop.was_interrupted() && !passed_on {
                passed_on = true;
                pass_on(
                    &self.children,
                    interrupting_signal().unwrap_or(libc::SIGINT),
                );
            }
            while let Ok((k, line)) = self.lines.try_recv() {
                stop_fleet |= on(Happened::Line(k, line));
            }
            for (k, (c, exit)) in self
                .children
                .iter_mut()
                .zip(self.exits.iter_mut())
                .enumerate()
            {
                if exit.is_none() {
                    *exit = c.child.try_wait()?;
                    if let Some(status) = exit {
                        // 130: stopped by the signal passed on, results
                        // written.
                        let failed = !(status.success() || status.code() == Some(130));
                        stop_fleet |= on(Happened::Ended(k, failed.then(|| status.to_string())));
                    }
                }
            }
            stop_fleet |= on(Happened::Tick);
            if stop_fleet && !passed_on {
                passed_on = true;
                pass_on(&self.children, libc::SIGINT);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The pipes end with the processes: what is left is read to its end.
        while let Ok((k, line)) = self.lines.recv() {
            on(Happened::Line(k, line));
        }
        Ok(())
    }

    /// The results the shards wrote (those that did not are named on
    /// stderr); an error when none did.
    pub fn results(&self) -> anyhow::Result<Vec<ShardFile>> {
        let processes = self.children.len();
        let mut files = Vec::new();
        for (k, (c, exit)) in self.children.iter().zip(&self.exits).enumerate() {
            match std::fs::read_to_string(&c.out)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
            {
                Some(results) => files.push(ShardFile {
                    file: format!("shard {}/{processes}", k + 1),
                    results,
                }),
                None => {
                    let log = std::fs::read_to_string(&c.log).unwrap_or_default();
                    let exit = exit.map_or("still running".to_string(), |e| e.to_string());
                    eprintln!(
                        "headroom: shard {}/{processes} wrote no results ({exit}): {}",
                        k + 1,
                        log.trim()
                    );
                }
            }
        }
        if files.is_empty() {
            bail!(
                "no shard wrote results (their logs: {})",
                self.dir.path().display()
            );
        }
        Ok(files)
    }
}

/// Each line of a child's stdout, sent on as (shard, line) by a thread
/// of its own (a full pipe would stall the child).
fn read_lines(
    shard: usize,
    stdout: std::process::ChildStdout,
    to: std::sync::mpsc::Sender<(usize, String)>,
) -> anyhow::Result<()> {
    use std::io::BufRead;
    std::thread::Builder::new()
        .name(format!("headroom-shard-{}", shard + 1))
        .spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if to.send((shard, line)).is_err() {
                    return;
                }
            }
        })
        .context("cannot start a thread to read a shard's reports")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// Every flag of `run` is sorted here: a new one must be put on the
    /// parent's side (outputs, monitor, scale-out) or the children's (what
    /// the plan and its sending are), or every child would, say, write the
    /// same new output file.
    #[test]
    fn every_run_flag_is_either_the_parents_or_passed_on() {
        use clap::Args;
        const PASSED_ON: &[&str] = &[
            "--url",
            "--grpc",
            "--call",
            "--data",
            "--proto",
            "--import-path",
            "--protoset",
            "--grpc-compression",
            "--grpc-keepalive",
            "--stream-call-count",
            "--stream-interval",
            "--base-url",
            "--vus",
            "--connections",
            "--duration",
            "--requests",
            "--iterations",
            "--ramp-up",
            "--think-time",
            "--rate",
            "--stages",
            "--vu-stages",
            "--connect-to",
            "--resolve",
            "--no-keepalive",
            "--connect-timeout",
            "--timeout",
            "--graceful-stop",
            "--method",
            "--header",
            "--body",
            "--expect-status",
            "--insecure",
            "--ca-file",
            "--secret-header",
            "--stale-connection-retry",
            "--http2",
            "--http3",
            "--0rtt",
            "--http-version",
            "--streams",
            "--max-feeder-size",
            "--local-address",
            "--threads",
            "--engine",
            "--buckets",
            // Only the first shard acts on events.
            "--event",
            // Each shard sends trace context; their exemplars merge.
            "--trace",
            "--trace-per",
            "--trace-unsampled",
            "--trace-state",
            "--trace-url",
        ];
        let command = super::super::args::RunCmdArgs::augment_args(clap::Command::new("run"));
        assert!(
            command.get_arguments().count() > 40,
            "run's flags were read"
        );
        for arg in command.get_arguments() {
            let Some(long) = arg.get_long().map(|l| format!("--{l}")) else {
                continue;
            };
            let parents = PARENT_ONLY.iter().any(|(p, _, _)| *p == long);
            let passed = PASSED_ON.contains(&long.as_str());
            assert!(
                parents != passed,
                "{long}: say in processes.rs whether the children get it"
            );
        }
    }

    #[test]
    fn children_keep_the_plan_and_lose_the_parents_flags() {
        let got = child_args(
            &words(
                "--url http://127.0.0.1:1/ -c 500 --processes 4 -o out.json --html=r.html \
             -q --threshold p99<1s --monitor-cmd x -d 10s --out=o2 -oo3 --rate 100",
            ),
            &[],
        );
        assert_eq!(
            got,
            words("--url http://127.0.0.1:1/ -c 500 -d 10s --rate 100")
        );
        assert_eq!(
            child_args(&words("scenario.toml --markdown --shard 1/2"), &[]),
            words("scenario.toml")
        );
    }
}
