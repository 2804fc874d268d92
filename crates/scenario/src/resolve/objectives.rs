//! `[capacity]` and `[thresholds]`: the objectives a scenario's runs are
//! held to, in the same language as `--slo` and `--threshold`.

use super::builder::Builder;
use crate::errors::Problem;
use crate::raw::*;
use headroom_engine::plan::RequestSpec;
use headroom_objectives::abort::{AbortRule, DEFAULT_WINDOW, MAX_WINDOW};
use headroom_objectives::capacity::{Axis, Settings};
use headroom_objectives::slo::Slo;
use std::collections::BTreeMap;

impl Builder<'_> {
    /// Only a `[capacity]` table (a study's), every problem at once.
    pub(crate) fn capacity_only(mut self, raw: &RawCapacity) -> Result<Settings, Vec<Problem>> {
        let settings = self.capacity(Some(raw));
        self.problems.into_result(settings)
    }

    /// `[capacity]` → settings for `headroom capacity` (flags override).
    pub(super) fn capacity(&mut self, raw: Option<&RawCapacity>) -> Settings {
        let Some(c) = raw else {
            return Settings::default();
        };
        let a = Some("[capacity]");
        let slo = c.slo.as_deref().and_then(|t| match Slo::parse(t) {
            Ok(slo) => Some(slo),
            Err(e) => {
                self.problem(a, "slo", t, format!("capacity.slo: {e}"));
                None
            }
        });
        let axis = c.axis.as_deref().and_then(|t| {
            let axis = Axis::parse(t);
            if axis.is_none() {
                self.problem(
                    a,
                    "axis",
                    t,
                    format!("capacity.axis: `{t}`: use rate or users"),
                );
            }
            axis
        });
        let precision = c.precision.as_deref().and_then(|t| {
            let value = t
                .trim()
                .strip_suffix('%')
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| *v > 0.0 && *v < 100.0);
            if value.is_none() {
                self.problem(
                    a,
                    "precision",
                    t,
                    format!(
                        "capacity.precision: `{t}` is not a percentage between 0 and 100, e.g. 5%"
                    ),
                );
            }
            value.map(|v| v / 100.0)
        });
        let mut duration =
            |field: &str, v: &Option<String>| v.as_deref().and_then(|t| self.duration(a, field, t));
        Settings {
            slo,
            axis,
            min: c.min,
            max: c.max,
            growth: c.growth,
            precision,
            step_duration: duration("step_duration", &c.step_duration),
            warmup: duration("warmup", &c.warmup),
            pause: duration("pause", &c.pause),
            max_time: duration("max_time", &c.max_time),
            confirm_duration: duration("confirm_duration", &c.confirm_duration),
        }
    }

    /// `[thresholds]` → bounds; the comparison may be left out (`<` for
    /// latency and errors, `>=` for achieved and throughput).
    /// A key may name a request: `"p95{login}" = "500ms"`. A table form
    /// (`p99 = { bound = "<2s", abort = true, delay = "10s" }`) may also
    /// stop the run early: those come back as abort rules too.
    pub(super) fn thresholds(
        &mut self,
        raw: Option<&BTreeMap<String, RawThreshold>>,
        requests: &[RequestSpec],
    ) -> (Slo, Vec<AbortRule>) {
        let mut slo = Slo::default();
        let mut aborts = Vec::new();
        let a = Some("[thresholds]");
        for (metric, threshold) in raw.into_iter().flatten() {
            let bound = threshold.bound().trim();
            let name = metric.split('{').next().unwrap_or(metric).trim();
            let text = if bound.starts_with(['<', '>']) {
                format!("{metric}{bound}")
            } else if matches!(name, "achieved" | "throughput" | "rps") {
                format!("{metric}>={bound}")
            } else {
                format!("{metric}<{bound}")
            };
            let parsed = Slo::parse(&text).and_then(|s| {
                s.check_requests(requests.iter().map(|r| r.name.as_str()))?;
                Ok(s)
            });
            let bounds = match parsed {
                Ok(s) => s.bounds,
                Err(e) => {
                    self.problem(
                        a,
                        metric,
                        bound,
                        format!("thresholds.{metric}: {}", e.message),
                    );
                    continue;
                }
            };
            if let RawThreshold::Table(t) = threshold {
                let field = format!("thresholds.{metric}");
                let delay = t
                    .delay
                    .as_deref()
                    .and_then(|d| self.duration(a, &format!("{field}.delay"), d));
                let window = t
                    .window
                    .as_deref()
                    .and_then(|d| self.duration(a, &format!("{field}.window"), d));
                if window.is_some_and(|w| w > MAX_WINDOW) {
                    self.problem(
                        a,
                        "window",
                        t.window.as_deref().unwrap_or_default(),
                        format!("{field}.window: at most 60s"),
                    );
                }
                if t.abort != Some(true) && (t.delay.is_some() || t.window.is_some()) {
                    self.problem(
                        a,
                        metric,
                        "delay",
                        format!("{field}: delay and window only apply with abort = true"),
                    );
                }
                if t.abort == Some(true) && bounds.iter().any(|b| b.request.is_some()) {
                    self.problem(
                        a,
                        metric,
                        metric,
                        format!("{field}: an abort judges the whole run, not one request"),
                    );
                }
                if t.abort == Some(true) {
                    for bound in &bounds {
                        let mut rule = AbortRule::new(bound.clone());
                        rule.delay = delay.unwrap_or_default();
                        rule.window = window.unwrap_or(DEFAULT_WINDOW);
                        aborts.push(rule);
                    }
                }
            }
            slo.bounds.extend(bounds);
        }
        (slo, aborts)
    }
}
