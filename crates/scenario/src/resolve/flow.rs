//! What users do each iteration: the weighted mix, or `[[session]]`s of
//! steps (requests, think times, repeats, choices, feeds).

use super::builder::Builder;
use crate::raw::*;
use headroom_engine::plan::feeder::Feeder;
use headroom_engine::plan::{Flow, Session, Step};
use std::collections::BTreeSet;
use std::sync::Arc;

impl Builder<'_> {
    pub(super) fn flow(&mut self, raw: &RawScenario, feeders: &[Arc<Feeder>]) -> Flow {
        if raw.sessions.is_empty() {
            if !raw.requests.is_empty() && raw.requests.iter().all(|r| r.weight == Some(0)) {
                self.problem(
                    None,
                    "weight",
                    "weight",
                    "every request has weight 0: nothing to send".into(),
                );
            }
            return Flow::Mix;
        }
        let mut names = BTreeSet::new();
        let mut sessions = Vec::new();
        for s in &raw.sessions {
            if !names.insert(s.name.clone()) {
                self.problem(
                    Some(&s.name),
                    "name",
                    &s.name,
                    format!("session `{}` is defined twice", s.name),
                );
            }
            if s.steps.is_empty() {
                self.problem(
                    Some(&s.name),
                    "steps",
                    &s.name,
                    format!("session `{}` has no steps", s.name),
                );
            }
            let steps = self.steps(&s.name, &s.steps, raw, feeders);
            sessions.push(Session {
                name: s.name.clone(),
                weight: s.weight.unwrap_or(1),
                steps,
            });
        }
        if sessions.iter().all(|s| s.weight == 0) {
            self.problem(
                None,
                "weight",
                "weight",
                "every session has weight 0: nothing to run".into(),
            );
        }
        Flow::Sessions(sessions)
    }

    fn steps(
        &mut self,
        session: &str,
        raw: &[RawStep],
        scenario: &RawScenario,
        feeders: &[Arc<Feeder>],
    ) -> Vec<Step> {
        let a = Some(session);
        let mut out = Vec::new();
        for (i, st) in raw.iter().enumerate() {
            let n = i + 1;
            let kinds = [
                st.request.is_some(),
                st.think.is_some(),
                st.repeat.is_some(),
                st.choice.is_some(),
                st.feed.is_some(),
            ];
            if kinds.iter().filter(|&&k| k).count() != 1 {
                self.problem(a, "steps", "steps", format!(
                    "session `{session}` step {n}: each step has exactly one of request, think, repeat (with steps), choice, feed"
                ));
                continue;
            }
            if st.steps.is_some() && st.repeat.is_none() {
                self.problem(
                    a,
                    "steps",
                    "steps",
                    format!("session `{session}` step {n}: `steps` goes with `repeat`"),
                );
            }
            if let Some(name) = &st.request {
                match scenario.requests.iter().position(|r| &r.name == name) {
                    Some(idx) => out.push(Step::Request(idx)),
                    None => {
                        let near = scenario
                            .requests
                            .iter()
                            .map(|r| (strsim::jaro_winkler(name, &r.name), &r.name))
                            .filter(|(s, _)| *s > 0.7)
                            .max_by(|a, b| a.0.total_cmp(&b.0))
                            .map(|(_, k)| format!(" — did you mean `{k}`?"))
                            .unwrap_or_default();
                        self.problem(
                            a,
                            "request",
                            name,
                            format!(
                                "session `{session}` step {n}: no request named `{name}`{near}"
                            ),
                        );
                    }
                }
            } else if let Some(think) = &st.think {
                let (lo, hi) = match think.split_once("..") {
                    Some((lo, hi)) => (lo, hi),
                    None => (think.as_str(), think.as_str()),
                };
                let (Some(min), Some(max)) =
                    (self.duration(a, "think", lo), self.duration(a, "think", hi))
                else {
                    continue;
                };
                if min > max {
                    self.problem(
                        a,
                        "think",
                        think,
                        format!(
                            "session `{session}` step {n}: think range `{think}` runs backwards"
                        ),
                    );
                    continue;
                }
                out.push(Step::Think { min, max });
            } else if let Some(times) = st.repeat {
                let Some(inner) = &st.steps else {
                    self.problem(
                        a,
                        "repeat",
                        "repeat",
                        format!("session `{session}` step {n}: `repeat` needs `steps`"),
                    );
                    continue;
                };
                let steps = self.steps(session, inner, scenario, feeders);
                out.push(Step::Repeat { times, steps });
            } else if let Some(branches) = &st.choice {
                if branches.is_empty() || branches.iter().all(|b| b.weight == Some(0)) {
                    self.problem(
                        a,
                        "choice",
                        "choice",
                        format!(
                            "session `{session}` step {n}: a choice needs a branch with weight > 0"
                        ),
                    );
                    continue;
                }
                let branches = branches
                    .iter()
                    .map(|b| {
                        (
                            b.weight.unwrap_or(1),
                            self.steps(session, &b.steps, scenario, feeders),
                        )
                    })
                    .collect();
                out.push(Step::Choice(branches));
            } else if let Some(feed) = &st.feed {
                match feeders.iter().position(|f| &f.name == feed) {
                    Some(idx) => out.push(Step::Feed(idx)),
                    None => self.problem(
                        a,
                        "feed",
                        feed,
                        format!("session `{session}` step {n}: no feeder named `{feed}`"),
                    ),
                }
            }
        }
        out
    }
}
