//! Live progress while a run goes on: on a terminal, one line redrawn
//! each second; elsewhere (CI logs, pipes) a plain line every 10 s, as k6
//! prints, so a long run shows it is alive.

use headroom_engine::Progress;
use headroom_records::server::sample::Sample;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// `--progress`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProgressMode {
    /// A live line on a terminal, a plain line every 10 s otherwise.
    #[default]
    Auto,
    /// A plain line every 10 s, even on a terminal.
    Always,
    /// Nothing.
    Never,
}

/// How often the plain progress line is printed.
pub const PLAIN_EVERY: Duration = Duration::from_secs(10);

pub struct Live {
    bar: Option<ProgressBar>,
    /// Print plain lines (not a terminal, or `always`).
    plain: bool,
    planned: Option<Duration>,
    next_line: std::cell::Cell<Duration>,
}

impl Live {
    /// `planned`: the load's length, when known, for a progress bar.
    pub fn new(planned: Option<Duration>, mode: ProgressMode) -> Live {
        let terminal = std::io::stderr().is_terminal();
        let quiet = Live {
            bar: None,
            plain: false,
            planned,
            next_line: std::cell::Cell::new(PLAIN_EVERY),
        };
        match mode {
            ProgressMode::Never => return quiet,
            ProgressMode::Always => {
                return Live {
                    plain: true,
                    ..quiet
                }
            }
            ProgressMode::Auto if !terminal => {
                return Live {
                    plain: true,
                    ..quiet
                }
            }
            ProgressMode::Auto => {}
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
        Live {
            bar: Some(bar),
            ..quiet
        }
    }

    pub fn update(&self, p: &Progress, server: Option<&Sample>) {
        if self.plain && p.elapsed >= self.next_line.get() {
            self.next_line.set(self.next_line.get() + PLAIN_EVERY);
            let of = self
                .planned
                .map_or(String::new(), |d| format!("/{} s", d.as_secs()));
            eprintln!(
                "headroom: {} s{of}  {}",
                p.elapsed.as_secs(),
                message(p, server)
            );
        }
        let Some(bar) = &self.bar else { return };
        bar.set_position(p.elapsed.as_secs());
        bar.set_message(message(p, server));
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The figures of the last second, the totals, and the server's.
fn message(p: &Progress, server: Option<&Sample>) -> String {
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
    if let Some(open) = s.sockets_open {
        message.push_str(&format!(
            "  sockets {open}  messages {}/{} per s",
            s.messages_sent.unwrap_or(0),
            s.messages_received.unwrap_or(0)
        ));
    }
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
    message
}
