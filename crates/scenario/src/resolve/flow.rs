//! What users do each iteration: the weighted mix, or `[[session]]`s of
//! steps (requests, think times, repeats, choices, feeds).

use super::builder::Builder;
use super::sockets::{is_socket_step, SocketNames};
use crate::raw::*;
use headroom_engine::plan::feeder::Feeder;
use headroom_engine::plan::{Flow, RequestSpec, Session, Step};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// What socket steps resolve against: their entries by step, the plan's
/// requests (where those entries are), and how long an `expect` waits
/// without a `within`.
pub(super) struct SocketContext<'a> {
    pub names: &'a SocketNames,
    pub requests: &'a [RequestSpec],
    pub default_within: Duration,
}

impl Builder<'_> {
    pub(super) fn flow(
        &mut self,
        raw: &RawScenario,
        feeders: &[Arc<Feeder>],
        sockets: &SocketContext,
    ) -> Flow {
        if raw.sessions.is_empty() {
            if !raw.requests.is_empty() && raw.requests.iter().all(|r| r.weight == Some(0)) {
                self.problem(
                    None,
                    "weight",
                    "weight",
                    "every request has weight 0: nothing to send".into(),
                );
            }
            self.variables(raw, feeders);
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
            let steps = self.steps((&s.name, ""), &s.steps, raw, (feeders, sockets));
            sessions.push(Session {
                name: s.name.clone(),
                weight: s.weight.unwrap_or(1),
                steps,
            });
        }
        // After the steps: script steps may set variables too.
        self.variables(raw, feeders);
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

    /// Whether a step is one kind of step, with only the settings its kind
    /// takes (each problem located).
    fn step_shape_ok(&mut self, session: &str, n: &str, st: &RawStep) -> bool {
        let a = Some(session);
        let mut kinds = vec![
            st.request.is_some(),
            st.think.is_some(),
            st.repeat.is_some(),
            st.choice.is_some(),
            st.feed.is_some(),
            st.ws.is_some(),
            st.sse.is_some(),
            st.grpc_stream.is_some(),
            st.send.is_some(),
            st.send_binary.is_some(),
            st.hold.is_some(),
            st.close.is_some(),
        ];
        // `expect` alone waits; beside ws, sse, grpc_stream or send it is theirs.
        kinds.push(st.expect.is_some() && !kinds[5..10].contains(&true));
        kinds.extend([st.js.is_some(), st.if_.is_some(), st.while_.is_some()]);
        if kinds.iter().filter(|&&k| k).count() != 1 {
            self.problem(a, "steps", "steps", format!(
                "session `{session}` step {n}: each step has exactly one of request, think, repeat (with steps), choice, feed, js, if (with steps), while (with steps), ws, sse, grpc_stream, send, send_binary, expect, hold, close"
            ));
            return false;
        }
        if st.else_.is_some() && st.if_.is_none() {
            self.problem(
                a,
                "else",
                "else",
                format!("session `{session}` step {n}: `else` goes with `if`"),
            );
        }
        if st.max.is_some() && st.while_.is_none() {
            self.problem(
                a,
                "max",
                "max",
                format!("session `{session}` step {n}: `max` goes with `while`"),
            );
        }
        if st.every.is_some() && st.repeat.is_none() {
            self.problem(
                a,
                "every",
                "every",
                format!("session `{session}` step {n}: `every` goes with `repeat`"),
            );
        }
        if st.name.is_some() && !is_socket_step(st) {
            self.problem(
                a,
                "name",
                "name",
                format!("session `{session}` step {n}: `name` goes with ws, sse, grpc_stream, send, send_binary, expect or hold (a request's name is its own)"),
            );
        }
        // Socket steps are checked by their own builder.
        let holds_steps = st.repeat.is_some() || st.if_.is_some() || st.while_.is_some();
        if st.steps.is_some() && !holds_steps && !is_socket_step(st) {
            self.problem(
                a,
                "steps",
                "steps",
                format!(
                    "session `{session}` step {n}: `steps` goes with `repeat`, `if` or `while`"
                ),
            );
        }
        true
    }

    /// A step that sends a request, by its name (with the nearest name
    /// suggested when there is none such).
    /// A pause, or a random pause within a range (`1s..3s`).
    fn think_step(&mut self, (session, n): (&str, &str), think: &str) -> Option<Step> {
        let a = Some(session);
        let (lo, hi) = match think.split_once("..") {
            Some((lo, hi)) => (lo, hi),
            None => (think, think),
        };
        let (Some(min), Some(max)) = (self.duration(a, "think", lo), self.duration(a, "think", hi))
        else {
            return None;
        };
        if min > max {
            self.problem(
                a,
                "think",
                think,
                format!("session `{session}` step {n}: think range `{think}` runs backwards"),
            );
            return None;
        }
        Some(Step::Think { min, max })
    }

    fn request_step(
        &mut self,
        (session, n): (&str, &str),
        name: &str,
        scenario: &RawScenario,
    ) -> Option<Step> {
        if let Some(idx) = scenario.requests.iter().position(|r| r.name == name) {
            return Some(Step::Request(idx));
        }
        let near = scenario
            .requests
            .iter()
            .map(|r| (strsim::jaro_winkler(name, &r.name), &r.name))
            .filter(|(s, _)| *s > 0.7)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| format!(" — did you mean `{k}`?"))
            .unwrap_or_default();
        self.problem(
            Some(session),
            "request",
            name,
            format!("session `{session}` step {n}: no request named `{name}`{near}"),
        );
        None
    }

    /// An `if` (with `steps` and `else`) or a `while` (with `steps`,
    /// bounded by `max`): its condition is script code.
    fn control_step(
        &mut self,
        (session, n): (&str, &str),
        st: &RawStep,
        scenario: &RawScenario,
        (feeders, sockets): (&[Arc<Feeder>], &SocketContext),
    ) -> Option<Step> {
        let a = Some(session);
        let (key, cond) = match (&st.if_, &st.while_) {
            (Some(c), _) => ("if", c),
            (None, Some(c)) => ("while", c),
            (None, None) => unreachable!("a control step has if or while"),
        };
        let Some(inner) = &st.steps else {
            self.problem(
                a,
                key,
                cond,
                format!("session `{session}` step {n}: `{key}` needs `steps`"),
            );
            return None;
        };
        let origin = format!("session `{session}` step {n} ({key})");
        let cond = self.script_code((a, key), cond, true, origin);
        let inner_at = format!("{n}.");
        let steps = self.steps((session, &inner_at), inner, scenario, (feeders, sockets));
        if key == "while" {
            return Some(Step::While {
                cond,
                steps,
                max: st.max.unwrap_or(super::scripts::DEFAULT_WHILE_MAX),
            });
        }
        let else_at = format!("{n}/else.");
        let otherwise = match &st.else_ {
            Some(e) => self.steps((session, &else_at), e, scenario, (feeders, sockets)),
            None => Vec::new(),
        };
        Some(Step::If {
            cond,
            then: steps,
            otherwise,
        })
    }

    /// `prefix`: where these steps are in the session (`3.` inside step 3).
    fn steps(
        &mut self,
        (session, prefix): (&str, &str),
        raw: &[RawStep],
        scenario: &RawScenario,
        (feeders, sockets): (&[Arc<Feeder>], &SocketContext),
    ) -> Vec<Step> {
        let a = Some(session);
        let mut out = Vec::new();
        for (i, st) in raw.iter().enumerate() {
            let n = format!("{prefix}{}", i + 1);
            if !self.step_shape_ok(session, &n, st) {
                continue;
            }
            if is_socket_step(st) {
                let built = self.socket_step(
                    (session, &n),
                    st,
                    sockets.names,
                    sockets.requests,
                    sockets.default_within,
                );
                if let Some(step) = built {
                    out.push(Step::Socket(step));
                }
                continue;
            }
            if let Some(name) = &st.request {
                out.extend(self.request_step((session, &n), name, scenario));
            } else if let Some(think) = &st.think {
                out.extend(self.think_step((session, &n), think));
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
                let every = match &st.every {
                    Some(e) => match self.duration(a, "every", e) {
                        Some(d) => Some(d),
                        None => continue,
                    },
                    None => None,
                };
                let inner_at = format!("{n}.");
                let steps = self.steps((session, &inner_at), inner, scenario, (feeders, sockets));
                out.push(Step::Repeat {
                    times,
                    steps,
                    every,
                });
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
                    .enumerate()
                    .map(|(b, branch)| {
                        let at = format!("{n}/{}.", b + 1);
                        (
                            branch.weight.unwrap_or(1),
                            self.steps((session, &at), &branch.steps, scenario, (feeders, sockets)),
                        )
                    })
                    .collect();
                out.push(Step::Choice(branches));
            } else if let Some(code) = &st.js {
                let origin = format!("session `{session}` step {n}");
                out.push(Step::Js(self.script_code((a, "js"), code, false, origin)));
            } else if st.if_.is_some() || st.while_.is_some() {
                out.extend(self.control_step((session, &n), st, scenario, (feeders, sockets)));
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
