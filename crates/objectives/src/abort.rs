//! Thresholds that stop a run early (k6's `abortOnFail`): a bound judged
//! every second on a rolling window of the last seconds, once the run is
//! past a delay. A run that breaches one stops, keeps everything measured
//! so far, and fails.

use crate::slo::Bound;
use std::time::Duration;

pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
/// The rolling window is held in memory second by second.
pub const MAX_WINDOW: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, PartialEq)]
pub struct AbortRule {
    pub bound: Bound,
    /// Not judged before this long into the run (warm-up, ramp-up).
    pub delay: Duration,
    /// Judged on the requests completed in the last `window`.
    pub window: Duration,
}

impl AbortRule {
    pub fn new(bound: Bound) -> AbortRule {
        AbortRule {
            bound,
            delay: Duration::ZERO,
            window: DEFAULT_WINDOW,
        }
    }

    /// Whole seconds in the window (1 to 60).
    pub fn window_seconds(&self) -> usize {
        (self.window.min(MAX_WINDOW).as_secs_f64().ceil() as usize).max(1)
    }
}
