//! `[load]` → the load model: closed (users, ramp-up, iterations, think
//! time) or open (a rate, stages, users arriving), with its bounds.

use super::builder::Builder;
use crate::raw::*;
use headroom_engine::plan::schedule::{Schedule, Stage};
use headroom_engine::plan::{ClosedLoad, Load, OpenLoad, UserStage, DEFAULT_MAX_CONNECTIONS};
use std::time::Duration;

const DEFAULT_DURATION: Duration = Duration::from_secs(10);

impl Builder<'_> {
    pub(super) fn load(
        &mut self,
        raw: Option<&RawLoad>,
    ) -> (Option<Load>, Option<u64>, Option<Duration>) {
        let l = raw.cloned().unwrap_or_default();
        let a = Some("[load]").filter(|_| raw.is_some());
        let duration = self.optional_duration(a, "duration", &l.duration);
        let graceful_stop = self.optional_duration(a, "graceful_stop", &l.graceful_stop);
        if l.max_requests == Some(0) {
            self.problem(
                a,
                "max_requests",
                "max_requests",
                "load.max_requests: must be at least 1".into(),
            );
        }
        let load = match l.model() {
            Model::Closed => Some(Load::Closed(self.closed_load(&l, duration, a))),
            Model::Open => self.open_load(&l, duration, a),
        };
        (load, l.max_requests, graceful_stop)
    }

    /// The closed model: users (or user stages), ramp-up, a duration or
    /// iterations, think time; open-model settings refused.
    fn closed_load(
        &mut self,
        l: &RawLoad,
        duration: Option<Duration>,
        a: Option<&str>,
    ) -> ClosedLoad {
        for (set, field) in [
            (l.rate.is_some(), "rate"),
            (l.users.is_some(), "users"),
            (l.users_per_second.is_some(), "users_per_second"),
            (l.over.is_some(), "over"),
            (l.max_connections.is_some(), "max_connections"),
        ] {
            if set {
                self.problem(a, field, field, format!(
                    "load.{field} is for the open model, but model is \"closed\" (use vus, ramp_up, duration, iterations, think_time)"
                ));
            }
        }
        let stages = match &l.stages {
            Some(raw) => self.user_stages(raw, l, duration, a),
            None => Vec::new(),
        };
        let vus = if stages.is_empty() {
            l.vus.unwrap_or(ClosedLoad::DEFAULT_USERS)
        } else {
            UserStage::peak(&stages).max(1)
        };
        if vus == 0 {
            self.problem(a, "vus", "vus", "load.vus: must be at least 1".into());
        }
        let bounded = duration.is_some() || l.iterations.is_some() || l.max_requests.is_some();
        let duration = if !stages.is_empty() {
            Some(UserStage::total(&stages))
        } else if bounded {
            duration
        } else {
            Some(DEFAULT_DURATION)
        };
        ClosedLoad {
            vus,
            ramp_up: self
                .optional_duration(a, "ramp_up", &l.ramp_up)
                .unwrap_or_default(),
            duration,
            iterations: l.iterations,
            think_time: self
                .optional_duration(a, "think_time", &l.think_time)
                .unwrap_or_default(),
            stages,
        }
    }

    /// The open model: one of a rate, stages, users over a duration or
    /// users per second, and the pool's cap; closed-model settings
    /// refused.
    fn open_load(
        &mut self,
        l: &RawLoad,
        duration: Option<Duration>,
        a: Option<&str>,
    ) -> Option<Load> {
        for (set, field) in [
            (l.vus.is_some(), "vus"),
            (l.ramp_up.is_some(), "ramp_up"),
            (l.iterations.is_some(), "iterations"),
            (l.think_time.is_some(), "think_time"),
        ] {
            if set {
                self.problem(a, field, field, format!(
                    "load.{field} is for the closed model, but model is \"open\" (use rate, stages, users + over, or users_per_second; cap concurrency with max_connections)"
                ));
            }
        }
        let forms = [
            l.rate.is_some(),
            l.stages.is_some(),
            l.users.is_some() || l.over.is_some(),
            l.users_per_second.is_some(),
        ];
        let stages = match forms.iter().filter(|&&f| f).count() {
            0 => {
                self.problem(a, "model", "open", "the open model needs one of: rate (+ duration), stages, users + over, users_per_second (+ duration)".into());
                None
            }
            1 => self.open_stages(l, duration, a),
            _ => {
                self.problem(
                    a,
                    "rate",
                    "rate",
                    "give only one of: rate, stages, users + over, users_per_second".into(),
                );
                None
            }
        };
        if l.max_connections == Some(0) {
            self.problem(
                a,
                "max_connections",
                "max_connections",
                "load.max_connections: must be at least 1".into(),
            );
        }
        stages.and_then(|stages| match Schedule::new(stages) {
            Ok(schedule) => Some(Load::Open(OpenLoad {
                // Set again once the flow is known: sessions'
                // arrivals are users too.
                users: l.users.is_some() || l.users_per_second.is_some(),
                schedule,
                max_connections: l
                    .max_connections
                    .map_or(DEFAULT_MAX_CONNECTIONS, |c| c as usize),
            })),
            Err(e) => {
                self.problem(a, "stages", "stages", format!("load: {e}"));
                None
            }
        })
    }

    fn optional_duration(
        &mut self,
        a: Option<&str>,
        field: &str,
        v: &Option<String>,
    ) -> Option<Duration> {
        v.as_deref().and_then(|t| self.duration(a, field, t))
    }

    /// Closed-model stages over user counts (k6's ramping-vus).
    fn user_stages(
        &mut self,
        raw: &[RawStage],
        l: &RawLoad,
        duration: Option<Duration>,
        a: Option<&str>,
    ) -> Vec<UserStage> {
        for (set, field) in [
            (duration.is_some(), "duration"),
            (l.vus.is_some(), "vus"),
            (l.ramp_up.is_some(), "ramp_up"),
        ] {
            if set {
                self.problem(
                    a,
                    field,
                    field,
                    format!(
                    "load: `{field}` and user `stages` both say how many users run when: give one"
                ),
                );
            }
        }
        if raw.is_empty() {
            self.problem(
                a,
                "stages",
                "stages",
                "load.stages: give at least one stage".into(),
            );
        }
        let mut level = 0u32;
        let mut out = Vec::new();
        for (i, s) in raw.iter().enumerate() {
            let n = i + 1;
            let Some(d) = self.duration(a, "duration", &s.duration) else {
                continue;
            };
            let count = |b: &mut Self, v: f64| {
                if v >= 0.0 && v.fract() == 0.0 && v <= u32::MAX as f64 {
                    Some(v as u32)
                } else {
                    b.problem(
                        a,
                        "stages",
                        &s.duration,
                        format!("load.stages[{n}]: `{v}` is not a number of users"),
                    );
                    None
                }
            };
            let (from, to) = match (s.target, s.from, s.to, s.rate) {
                (Some(t), None, None, None) => (level, t),
                (None, Some(f), Some(t), None) => match (count(self, f), count(self, t)) {
                    (Some(f), Some(t)) => (f, t),
                    _ => continue,
                },
                _ => {
                    self.problem(a, "stages", &s.duration, format!(
                        "load.stages[{n}]: the closed model's stages are user counts: give `target` (from the previous count) or `from` and `to`"
                    ));
                    continue;
                }
            };
            level = to;
            out.push(UserStage {
                duration: d,
                from,
                to,
            });
        }
        if !out.is_empty() && UserStage::peak(&out) == 0 {
            self.problem(
                a,
                "stages",
                "stages",
                "load.stages: no stage has any users".into(),
            );
        }
        out
    }

    /// `users` arriving evenly `over` a duration: one held rate.
    fn users_over(&mut self, l: &RawLoad, a: Option<&str>) -> Option<Vec<Stage>> {
        let (Some(users), Some(over)) = (l.users, l.over.as_deref()) else {
            self.problem(
                a,
                "users",
                "users",
                "load: `users` and `over` go together (N users arriving evenly over a duration)"
                    .into(),
            );
            return None;
        };
        let over = self.duration(a, "over", over)?;
        if users == 0 || over.is_zero() {
            self.problem(
                a,
                "users",
                "users",
                "load: users and over must be greater than zero".into(),
            );
            return None;
        }
        Some(vec![Stage::Hold {
            rate: users as f64 / over.as_secs_f64(),
            duration: over,
        }])
    }

    fn open_stages(
        &mut self,
        l: &RawLoad,
        duration: Option<Duration>,
        a: Option<&str>,
    ) -> Option<Vec<Stage>> {
        let rate_ok = |b: &mut Self, field: &str, r: f64, zero_ok: bool| {
            let ok = r.is_finite() && (r > 0.0 || (zero_ok && r == 0.0));
            if !ok {
                b.problem(
                    a,
                    field,
                    field,
                    format!("load.{field}: `{r}` must be a positive number"),
                );
            }
            ok
        };
        if let Some(rate) = l.rate.or(l.users_per_second) {
            let field = if l.rate.is_some() {
                "rate"
            } else {
                "users_per_second"
            };
            if !rate_ok(self, field, rate, false) {
                return None;
            }
            return Some(vec![Stage::Hold {
                rate,
                duration: duration.unwrap_or(DEFAULT_DURATION),
            }]);
        }
        if l.users.is_some() || l.over.is_some() {
            return self.users_over(l, a);
        }
        let raw_stages = l.stages.as_ref()?;
        if raw_stages.is_empty() {
            self.problem(
                a,
                "stages",
                "stages",
                "load.stages: give at least one stage".into(),
            );
            return None;
        }
        if duration.is_some() {
            self.problem(
                a,
                "duration",
                "duration",
                "load: `duration` and `stages` both set the length of the run: give one".into(),
            );
        }
        let mut stages = Vec::new();
        for (i, s) in raw_stages.iter().enumerate() {
            let n = i + 1;
            let d = self.duration(a, "duration", &s.duration)?;
            let stage = match (s.rate, s.from, s.to) {
                (Some(rate), None, None) => {
                    rate_ok(self, "stages", rate, true).then_some(Stage::Hold { rate, duration: d })
                }
                (None, Some(from), Some(to)) => (rate_ok(self, "stages", from, true)
                    && rate_ok(self, "stages", to, true))
                .then_some(Stage::Ramp {
                    from,
                    to,
                    duration: d,
                }),
                _ => {
                    self.problem(
                        a,
                        "stages",
                        &s.duration,
                        format!(
                            "load.stages[{n}]: give `rate` (hold) or `from` and `to` (linear ramp)"
                        ),
                    );
                    None
                }
            };
            stages.push(stage?);
        }
        Some(stages)
    }
}
