//! The fine trace: every request completed inside a traced window (around
//! a planned event), with its completion time, latency and outcome, so the
//! longest time without an OK response, and percentiles over any stretch,
//! are exact — not rounded to the one-second timeline. Only plans with
//! events trace; a run without any pays one `Option` check per request.

use super::ErrorClass;
use std::time::{Duration, Instant};

/// At most this many completions per worker (16 bytes each): 4 M is
/// ~64 MiB, three minutes at 22k req/s per worker. Beyond it the trace
/// stops and says so (`Trace::truncated`).
pub const MAX_TRACED_PER_WORKER: usize = 4_000_000;

/// One completed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// When it completed, in µs from the run's start.
    pub done_us: u64,
    /// From its intended send time, in µs.
    pub latency_us: u32,
    /// `None`: OK.
    pub error: Option<ErrorClass>,
}

#[derive(Debug, Default)]
pub struct Trace {
    /// Traced stretches, in µs from the start, sorted.
    windows: Vec<(u64, u64)>,
    pub completions: Vec<Completion>,
    /// Completions left out after [`MAX_TRACED_PER_WORKER`].
    pub truncated: u64,
}

impl Trace {
    pub fn new(windows: &[(Duration, Duration)]) -> Trace {
        Trace {
            windows: windows
                .iter()
                .map(|(a, b)| (a.as_micros() as u64, b.as_micros() as u64))
                .collect(),
            ..Trace::default()
        }
    }

    pub fn record(
        &mut self,
        start: Instant,
        done: Instant,
        latency_us: u64,
        error: Option<ErrorClass>,
    ) {
        let done_us = done.saturating_duration_since(start).as_micros() as u64;
        if !self
            .windows
            .iter()
            .any(|&(a, b)| a <= done_us && done_us < b)
        {
            return;
        }
        if self.completions.len() >= MAX_TRACED_PER_WORKER {
            self.truncated += 1;
            return;
        }
        self.completions.push(Completion {
            done_us,
            latency_us: latency_us.min(u32::MAX as u64) as u32,
            error,
        });
    }

    /// The workers' traces as one, ordered by completion time.
    pub fn merge(traces: impl IntoIterator<Item = Trace>) -> Trace {
        let mut all = Trace::default();
        for t in traces {
            all.truncated += t.truncated;
            all.completions.extend(t.completions);
        }
        all.completions.sort_unstable_by_key(|c| c.done_us);
        all
    }
}
