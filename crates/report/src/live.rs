//! Live progress while a run goes on: one line, redrawn each second, on a
//! terminal only (logs and pipes get the summary alone).

use headroom_engine::Progress;
use headroom_monitor::sample::Sample;
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

    pub fn update(&self, p: &Progress, server: Option<&Sample>) {
        let Some(bar) = &self.bar else { return };
        bar.set_position(p.elapsed.as_secs());
        let s = p.second;
        let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
        let mut message = format!(
            "{} req/s  p50 {} ms  p99 {} ms  errors {}  users {}  in flight {}  total {}",
            s.requests,
            ms(s.p50_ms),
            ms(s.p99_ms),
            p.total.failed,
            s.active_users,
            s.in_flight,
            p.total.requests
        );
        if let Some(tree) = server.and_then(|x| x.server.as_ref()) {
            message.push_str(&format!(
                "  | server CPU {:.0} %  mem {:.0} MiB",
                tree.cpu_pct,
                tree.rss_bytes as f64 / (1024.0 * 1024.0)
            ));
        }
        if let Some(g) = server.and_then(|x| x.generator.as_ref()) {
            message.push_str(&format!("  | generator CPU {:.0} %", g.cpu_pct));
        }
        bar.set_message(message);
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
