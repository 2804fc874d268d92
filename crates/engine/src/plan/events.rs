//! Events during a run: a command or a signal at a planned moment (a time
//! from the start, or the start of a stage), e.g. a server restarted under
//! load. The engine does not act on them — the run's caller does — but it
//! keeps a fine trace of every request completed near them (see
//! [`Plan::trace_windows`]), so what users saw can be measured exactly.

use super::{Load, Plan};
use std::path::PathBuf;
use std::time::Duration;

/// How far before an event requests are traced: the "before" window of
/// the comparison is at most this long.
pub const TRACE_BEFORE: Duration = Duration::from_secs(60);
/// How far after an event's planned time requests are traced: the event's
/// own run time plus the "after" window (capped at 60 s).
pub const TRACE_AFTER: Duration = Duration::from_secs(180);

#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// What the event is called in reports (default: its command or signal).
    pub label: String,
    pub at: EventAt,
    pub action: Action,
    /// How long after the event users are watched; `None`: until the
    /// latency is back within the pre-event p99 for 5 s, capped at 60 s.
    pub window: Option<Duration>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventAt {
    /// This long after the start of the load.
    After(Duration),
    /// At the start of stage N (1-based) of the load's stages.
    Stage(usize),
}

impl EventAt {
    /// "10s", "1m30s", "stage:2".
    pub fn parse(text: &str) -> Result<EventAt, String> {
        let text = text.trim();
        if let Some(n) = text.strip_prefix("stage:") {
            let n: usize = n
                .trim()
                .parse()
                .map_err(|_| format!("`{text}`: stage:N needs a stage number, e.g. stage:2"))?;
            if n == 0 {
                return Err(format!("`{text}`: stages are numbered from 1"));
            }
            return Ok(EventAt::Stage(n));
        }
        humantime::parse_duration(text)
            .map(EventAt::After)
            .map_err(|e| {
                format!("`{text}` is neither a time from the start (e.g. 10s) nor stage:N: {e}")
            })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Run with `sh -c`; its output is captured.
    Command(String),
    /// A signal ("USR2", "HUP", …) to the watched server's main process,
    /// or to the process a pidfile names.
    Signal {
        name: String,
        pidfile: Option<PathBuf>,
    },
}

impl Action {
    pub fn describe(&self) -> String {
        match self {
            Action::Command(c) => c.clone(),
            Action::Signal { name, pidfile } => match pidfile {
                Some(p) => format!("SIG{name} to the pid in {}", p.display()),
                None => format!("SIG{name} to the server"),
            },
        }
    }
}

/// The signals an event may send (Unicorn's and Puma's restart and
/// scaling signals among them), by name without "SIG".
pub const SIGNALS: [&str; 12] = [
    "TERM", "INT", "QUIT", "HUP", "KILL", "USR1", "USR2", "WINCH", "TTIN", "TTOU", "STOP", "CONT",
];

/// "usr2", "SIGUSR2" → "USR2"; `None` for a signal not in [`SIGNALS`].
pub fn signal_name(text: &str) -> Option<String> {
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.contains(&name).then(|| name.to_string())
}

/// `--event 'AT:COMMAND'`, e.g. `4s:kill -USR2 $(cat unicorn.pid)` or
/// `stage:2:systemctl reload app`.
pub fn parse_flag(text: &str) -> Result<Event, String> {
    let split = if text.starts_with("stage:") {
        text.match_indices(':').nth(1).map(|(i, _)| i)
    } else {
        text.find(':')
    };
    let Some(i) = split else {
        return Err(format!(
            "`{text}`: give AT:COMMAND, e.g. '10s:kill -USR2 $(cat app.pid)'"
        ));
    };
    let (at, command) = (&text[..i], text[i + 1..].trim());
    if command.is_empty() {
        return Err(format!("`{text}`: the command after `{at}:` is empty"));
    }
    Ok(Event {
        label: command.to_string(),
        at: EventAt::parse(at)?,
        action: Action::Command(command.to_string()),
        window: None,
    })
}

impl Plan {
    /// When `event` is planned, from the start of the load: `None` for a
    /// stage the load does not have.
    pub fn event_time(&self, at: EventAt) -> Option<Duration> {
        match at {
            EventAt::After(d) => Some(d),
            EventAt::Stage(n) => {
                let Load::Open(open) = &self.load else {
                    return None;
                };
                let stages = open.schedule.stages();
                (n <= stages.len()).then(|| stages[..n - 1].iter().map(|s| s.duration()).sum())
            }
        }
    }

    /// The stretches of the run (from its start) in which every completed
    /// request is traced, one per event; empty without events.
    pub fn trace_windows(&self) -> Vec<(Duration, Duration)> {
        let mut windows: Vec<(Duration, Duration)> = self
            .events
            .iter()
            .filter_map(|e| self.event_time(e.at))
            .map(|at| (at.saturating_sub(TRACE_BEFORE), at + TRACE_AFTER))
            .collect();
        windows.sort();
        windows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_splits_at_the_first_colon_after_the_time() {
        let e = parse_flag("4s:kill -USR2 $(cat u.pid); echo a:b").unwrap();
        assert_eq!(e.at, EventAt::After(Duration::from_secs(4)));
        assert_eq!(
            e.action,
            Action::Command("kill -USR2 $(cat u.pid); echo a:b".into())
        );
        let e = parse_flag("stage:2:touch restart.txt").unwrap();
        assert_eq!(e.at, EventAt::Stage(2));
        assert_eq!(e.action, Action::Command("touch restart.txt".into()));
        assert!(parse_flag("4s").unwrap_err().contains("AT:COMMAND"));
        assert!(parse_flag("4s: ").unwrap_err().contains("empty"));
        assert!(parse_flag("soon:ls").unwrap_err().contains("stage:N"));
        assert!(parse_flag("stage:0:ls").unwrap_err().contains("from 1"));
    }

    #[test]
    fn stage_boundaries_come_from_the_schedule() {
        use crate::plan::schedule::{Schedule, Stage};
        use crate::plan::OpenLoad;
        let mut plan = Plan::get("http://127.0.0.1:1/").unwrap();
        let s = |rate, secs| Stage::Hold {
            rate,
            duration: Duration::from_secs(secs),
        };
        plan.load = Load::Open(OpenLoad {
            users: false,
            schedule: Schedule::new(vec![s(10.0, 5), s(20.0, 7), s(30.0, 3)]).unwrap(),
            max_connections: 10,
        });
        let at = |n| plan.event_time(EventAt::Stage(n));
        assert_eq!(at(1), Some(Duration::ZERO));
        assert_eq!(at(2), Some(Duration::from_secs(5)));
        assert_eq!(at(3), Some(Duration::from_secs(12)));
        assert_eq!(at(4), None);
    }
}
