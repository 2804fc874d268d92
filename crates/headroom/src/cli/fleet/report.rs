//! A shard's side of the fleet view (`run --shard K/N --report-to DEST`):
//! each finished second as one [`Report`] line, written by a thread of its
//! own so a slow reader never holds the load back.
//!
//! - `-`: standard output, one JSON line each (what `run --processes`
//!   reads from its children's pipes and `k8s run` from the pods' logs);
//!   the coordinator stops the shard with a signal (or by deleting its
//!   pod), which makes it write what it measured.
//! - `http://[TOKEN@]HOST:PORT`: POSTed to a `headroom fleet` coordinator
//!   (with `Authorization: Bearer TOKEN`), whose answer may say stop (the
//!   fleet breached an aborting threshold, or was interrupted); the
//!   results are POSTed at the end too. Every POST names this process's
//!   session (`X-Headroom-Session`): the coordinator takes shard K's lines
//!   from one process only.

use anyhow::{bail, Context};
use headroom_engine::plan::shard::Shard;
use headroom_engine::{Progress, StopSignal};
use headroom_measure::fleet::Report;
use std::io::Write;
use std::sync::{mpsc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a POST may take before the line is given up (the run goes on).
const POST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
enum Destination {
    Stdout,
    /// The coordinator's base URL, without a trailing '/', and the token
    /// given in it (`http://TOKEN@HOST:PORT`).
    Http {
        base: String,
        token: Option<String>,
        /// This process's, on every POST.
        session: String,
    },
}

/// The header that names a shard's process to the coordinator.
pub const SESSION_HEADER: &str = "X-Headroom-Session";

pub struct Reporter {
    destination: Destination,
    shard: Shard,
    lines: Mutex<Option<mpsc::Sender<String>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The newest second reported.
    reported: std::sync::atomic::AtomicU32,
    /// The attempts in the seconds reported.
    attempts_reported: std::sync::atomic::AtomicU64,
}

impl Reporter {
    /// `--report-to DEST` for shard `shard`; `stop` is told when the
    /// coordinator says the fleet must stop.
    pub fn start(dest: &str, shard: Shard, stop: &StopSignal) -> anyhow::Result<Reporter> {
        let destination = if dest == "-" {
            Destination::Stdout
        } else if let Some(rest) = dest.strip_prefix("http://") {
            if rest.is_empty() || rest.starts_with('/') {
                bail!("--report-to {dest}: give the coordinator's address, http://HOST:PORT");
            }
            let rest = rest.trim_end_matches('/');
            let (token, host) = match rest.split_once('@') {
                Some((token, host)) => (Some(token.to_string()), host),
                None => (None, rest),
            };
            // Unique among the shards of a fleet (not a secret: the token
            // is); a second process claiming the shard is told apart.
            let started = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            Destination::Http {
                base: format!("http://{host}"),
                token,
                session: format!("{:x}-{started:x}", std::process::id()),
            }
        } else {
            bail!(
                "--report-to {dest}: write `-` (standard output) or http://HOST:PORT (a `headroom \
                 fleet` coordinator)"
            );
        };
        let (lines, receive) = mpsc::channel::<String>();
        let thread = {
            let destination = destination.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("headroom-report".into())
                .spawn(move || send_lines(&destination, shard, &receive, &stop))
                .context("cannot start the reporting thread")?
        };
        let reporter = Reporter {
            destination,
            shard,
            lines: Mutex::new(Some(lines)),
            thread: Mutex::new(Some(thread)),
            reported: std::sync::atomic::AtomicU32::new(0),
            attempts_reported: std::sync::atomic::AtomicU64::new(0),
        };
        reporter.send(&Report::Hello {
            shard: shard.index + 1,
            of: shard.count,
            version: env!("CARGO_PKG_VERSION").to_string(),
        });
        Ok(reporter)
    }

    fn send(&self, report: &Report) {
        if let Some(lines) = &*self.lines.lock().expect("reporter lock") {
            let _ = lines.send(report.to_line());
        }
    }

    /// A second has finished.
    pub fn second(&self, p: &Progress) {
        let report = Report::second(p);
        if let Report::Second(second) = &report {
            self.attempts_reported
                .fetch_add(second.stats.attempts, std::sync::atomic::Ordering::Relaxed);
        }
        self.reported
            .store(p.second.t_s, std::sync::atomic::Ordering::Relaxed);
        self.send(&report);
    }

    /// The run ended with `results`: the seconds it ended before
    /// reporting, then the last line — every line out before this returns.
    pub fn end(&self, results: &headroom_records::Results) {
        let after = self.reported.load(std::sync::atomic::Ordering::Relaxed);
        let attempts = self
            .attempts_reported
            .load(std::sync::atomic::Ordering::Relaxed);
        for tail in Report::tail_seconds(results, after, attempts) {
            self.send(&tail);
        }
        let t = &results.summary.requests;
        self.send(&Report::End {
            requests: t.total,
            ok: t.ok,
            failed: t.failed,
        });
        self.close();
    }

    /// Every line sent: the thread has written them all.
    fn close(&self) {
        self.lines.lock().expect("reporter lock").take();
        if let Some(t) = self.thread.lock().expect("reporter lock").take() {
            let _ = t.join();
        }
    }

    /// The results JSON, for a coordinator over HTTP (on standard output
    /// the pod's log or the parent's `--out` file carries them).
    pub fn results(&self, json: &str) -> anyhow::Result<()> {
        let Destination::Http {
            base,
            token,
            session,
        } = &self.destination
        else {
            return Ok(());
        };
        let url = format!("{base}/shards/{}/results", self.shard.index + 1);
        post(&agent(), &url, (token.as_deref(), session), json)
            .map(|_| ())
            .with_context(|| format!("cannot send the results to {url}"))
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.close();
    }
}

fn send_lines(
    destination: &Destination,
    shard: Shard,
    lines: &mpsc::Receiver<String>,
    stop: &StopSignal,
) {
    let agent = agent();
    let mut warned = false;
    for line in lines {
        match destination {
            Destination::Stdout => {
                let mut out = std::io::stdout().lock();
                // A reader gone (the parent ended) is not this run's
                // failure: the results are written all the same.
                let _ = writeln!(out, "{line}").and_then(|()| out.flush());
            }
            Destination::Http {
                base,
                token,
                session,
            } => {
                let url = format!("{base}/shards/{}/report", shard.index + 1);
                match post(&agent, &url, (token.as_deref(), session), &line) {
                    Ok(answer) => {
                        let stop_why = serde_json::from_str::<serde_json::Value>(&answer)
                            .ok()
                            .and_then(|v| v["stop"].as_str().map(String::from));
                        if let Some(why) = stop_why {
                            if !stop.is_stopping() {
                                eprintln!("headroom: the fleet's coordinator stops the run: {why}");
                                stop.stop_because(why);
                            }
                        }
                    }
                    Err(e) if !warned => {
                        warned = true;
                        eprintln!(
                            "headroom: warning: cannot report to {url} ({e:#}); the run goes on"
                        );
                    }
                    Err(_) => {}
                }
            }
        }
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(POST_TIMEOUT))
        .build()
        .into()
}

/// POSTs `body` (JSON) with the token (if any) and the session; the
/// answer's body.
fn post(
    agent: &ureq::Agent,
    url: &str,
    (token, session): (Option<&str>, &str),
    body: &str,
) -> anyhow::Result<String> {
    let mut request = agent
        .post(url)
        .header("Content-Type", "application/json")
        .header(SESSION_HEADER, session);
    if let Some(t) = token {
        request = request.header("Authorization", format!("Bearer {t}"));
    }
    let mut response = request.send(body)?;
    Ok(response.body_mut().read_to_string()?)
}
