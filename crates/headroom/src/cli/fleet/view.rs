//! The coordinator's side of the fleet view: the shards' reports merged
//! ([`Fleet`]) and shown and judged as one run's seconds — the live line,
//! `--metrics-listen`/`--metrics-push`, the dashboard and the aborting
//! thresholds get the fleet's [`Progress`] exactly as a single run's
//! would come to them. Used by `run --processes`, `k8s run` and `fleet`.

use crate::cli::live::Live;
use headroom_engine::plan::Plan;
use headroom_measure::abort::AbortWatch;
use headroom_measure::dashboard::Feed;
use headroom_measure::fleet::{Fleet, Report};
use headroom_measure::prometheus::LiveMetrics;
use headroom_objectives::abort::AbortRule;
use headroom_records::results::AbortRecord;
use headroom_records::server::sample::Sample;
use std::time::Instant;

/// The fleet's seconds, as one run's, for people (live line, dashboard),
/// machines (metrics) and the aborting thresholds.
pub struct FleetView<'plan> {
    fleet: Fleet,
    plan: &'plan Plan,
    live: Live,
    metrics: Option<LiveMetrics>,
    feed: Option<Feed>,
    aborts: AbortWatch,
    aborted: Option<AbortRecord>,
    /// Shards (1-based) already said to be late.
    said_late: Vec<usize>,
    quiet: bool,
}

impl<'plan> FleetView<'plan> {
    pub fn new(
        plan: &'plan Plan,
        fleet: Fleet,
        aborts: &[AbortRule],
        live: Live,
        metrics: Option<LiveMetrics>,
        feed: Option<Feed>,
        quiet: bool,
    ) -> FleetView<'plan> {
        if let Some(f) = &feed {
            f.run_start(plan);
        }
        FleetView {
            fleet,
            plan,
            live,
            metrics,
            feed,
            aborts: AbortWatch::new(aborts, plan),
            aborted: None,
            said_late: Vec::new(),
            quiet,
        }
    }

    /// A line from shard `shard` (0-based): a report, or anything else
    /// (ignored).
    pub fn line(&mut self, shard: usize, line: &str) {
        match Report::from_line(line) {
            Some(Ok(report)) => self.report(shard, report),
            Some(Err(e)) => eprintln!(
                "headroom: warning: shard {}: a report that does not read ({e})",
                shard + 1
            ),
            None => {}
        }
    }

    pub fn report(&mut self, shard: usize, report: Report) {
        if let Err(e) = self.fleet.report(shard, report, Instant::now()) {
            eprintln!("headroom: warning: shard {}: {e}", shard + 1);
        }
    }

    /// Shard `shard`'s process or pod ended; `why` when it left no results.
    pub fn ended(&mut self, shard: usize, why: Option<String>) {
        self.fleet.ended(shard, why);
    }

    /// The seconds every shard has sent (or the grace is over for) shown
    /// and judged. Returns the aborting threshold the fleet breached, the
    /// first time it does: the caller stops every shard.
    pub fn tick(&mut self, sample: Option<&Sample>) -> Option<AbortRecord> {
        self.tick_at(Instant::now(), sample)
    }

    /// As [`tick`](Self::tick); `last`: every shard has ended, nothing
    /// more will come — every second still pending is shown.
    pub fn tick_at(&mut self, now: Instant, sample: Option<&Sample>) -> Option<AbortRecord> {
        let mut breached = None;
        let FleetView {
            fleet,
            plan,
            live,
            metrics,
            feed,
            aborts,
            aborted,
            ..
        } = self;
        let merged = fleet.ready(now, |p| {
            if aborted.is_none() {
                *aborted = aborts.judge(p);
                breached.clone_from(aborted);
            }
            live.update(p, sample);
            if let Some(m) = metrics {
                m.second(&Vec::new(), plan, p, sample);
            }
            if let Some(f) = feed {
                f.second(plan, p, sample);
            }
        });
        if merged > 0 {
            if let Some(f) = &self.feed {
                f.event(self.fleet.rows());
            }
            let late: Vec<usize> = self
                .fleet
                .late()
                .into_iter()
                .filter(|k| !self.said_late.contains(k))
                .collect();
            if !late.is_empty() && !self.quiet {
                let names: Vec<String> = late.iter().map(|k| format!("{k}")).collect();
                eprintln!(
                    "headroom: shard {} of {} late: nothing from it for second {} of the fleet",
                    names.join(", "),
                    self.fleet.shard_count(),
                    self.fleet.merged_up_to()
                );
            }
            self.said_late.extend(late);
        }
        breached
    }

    /// Every shard ended: the seconds still pending shown.
    pub fn finish(&mut self, sample: Option<&Sample>) {
        self.tick_at(Instant::now() + self.fleet.grace(), sample);
        self.live.finish();
        if let Some(f) = &self.feed {
            f.event(self.fleet.rows());
        }
    }

    /// Why the fleet is stopped, for people: the threshold it breached.
    pub fn breach_line(breach: &AbortRecord) -> String {
        format!(
            "the fleet breached {} over the last {:.0} s ({:.2})",
            breach.threshold, breach.window_s, breach.actual
        )
    }

    /// The aborting threshold the fleet breached, if it did.
    pub fn aborted(&self) -> Option<&AbortRecord> {
        self.aborted.as_ref()
    }
}
