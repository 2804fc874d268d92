//! `[[event]]` → the plan's events: when (a time, or a stage's start) and
//! what (a command, or a signal to the server or to a pidfile's process).

use super::builder::Builder;
use crate::raw::RawEvent;
use headroom_engine::plan::events::{signal_name, Action, Event, EventAt, SIGNALS};
use headroom_engine::plan::Load;

impl Builder<'_> {
    pub(super) fn events(&mut self, raw: &[RawEvent], load: &Load) -> Vec<Event> {
        let a = Some("[[event]]");
        let mut events = Vec::new();
        for (i, e) in raw.iter().enumerate() {
            let field = format!("event[{}]", i + 1);
            let at = match EventAt::parse(&e.at) {
                Ok(at) => at,
                Err(message) => {
                    self.problem(a, "at", &e.at, format!("{field}.at: {message}"));
                    continue;
                }
            };
            if let EventAt::Stage(n) = at {
                let stages = match load {
                    Load::Open(open) => open.schedule.stages().len(),
                    Load::Closed(_) => 0,
                };
                if n > stages {
                    self.problem(
                        a,
                        "at",
                        &e.at,
                        format!("{field}.at: stage {n}, but the load has {stages} stages"),
                    );
                    continue;
                }
            }
            let action = match (&e.command, &e.signal) {
                (Some(command), None) if e.pidfile.is_none() => Action::Command(command.clone()),
                (None, Some(signal)) => match signal_name(signal) {
                    Some(name) => Action::Signal {
                        name,
                        pidfile: e.pidfile.as_deref().map(|p| self.path(p)),
                    },
                    None => {
                        self.problem(
                            a,
                            "signal",
                            signal,
                            format!(
                                "{field}.signal: `{signal}` is not one of {}",
                                SIGNALS.join(", ")
                            ),
                        );
                        continue;
                    }
                },
                (Some(_), None) => {
                    self.problem(
                        a,
                        "pidfile",
                        "pidfile",
                        format!("{field}.pidfile goes with signal, not with command"),
                    );
                    continue;
                }
                _ => {
                    self.problem(
                        a,
                        "at",
                        &e.at,
                        format!("{field}: give one of command or signal"),
                    );
                    continue;
                }
            };
            let window = e
                .window
                .as_deref()
                .and_then(|w| self.duration(a, &format!("{field}.window"), w));
            events.push(Event {
                label: e.label.clone().unwrap_or_else(|| action.describe()),
                at,
                action,
                window,
            });
        }
        events
    }
}
