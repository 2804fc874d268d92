//! Live progress while a run goes on: one line, redrawn each second, on a
//! terminal only (logs and pipes get the summary alone).

use crate::engine::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

pub struct Live {
    bar: Option<ProgressBar>,
}

impl Live {
    /// `planned`: the load's length, when known, for a progress bar.
    pub fn new(planned: Option<Duration>) -> Live {
        if !std::io::stderr().is_terminal() {
            return Live { bar: None };
        }
        let bar = match planned {
            Some(d) => {
                let bar = ProgressBar::new(d.as_secs().max(1));
                bar.set_style(
                    ProgressStyle::with_template("{bar:20.cyan/blue} {pos:>4}/{len} s  {msg}")
                        .expect("valid template"),
                );
                bar
            }
            None => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {elapsed:>4}  {msg}")
                        .expect("valid template"),
                );
                bar
            }
        };
        bar.set_draw_target(ProgressDrawTarget::stderr());
        bar.set_message("starting…");
        Live { bar: Some(bar) }
    }

    pub fn update(&self, p: &Progress) {
        let Some(bar) = &self.bar else { return };
        bar.set_position(p.elapsed.as_secs());
        let s = p.second;
        bar.set_message(format!(
            "{} req/s  p50 {:.1} ms  p99 {:.1} ms  errors {}  users {}  in flight {}  total {}",
            s.requests,
            s.p50_ms,
            s.p99_ms,
            p.total.failed,
            s.active_users,
            s.in_flight,
            p.total.requests
        ));
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
