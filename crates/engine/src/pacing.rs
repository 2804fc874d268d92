//! When an open-model arrival goes out: the margins both paths keep (the
//! task path's `tasks/arrival_clock.rs`, the event loop's
//! `event_loop/arrivals.rs`). Why these: see `arrival_clock.rs`.

use std::time::Duration;

/// How long before an arrival the timer is set.
pub(crate) const WAKE_EARLY: Duration = Duration::from_micros(50);

/// Above 5,000 arrivals a second: how far ahead the scheduler lets
/// arrivals out once awake.
pub(crate) const BATCH_WINDOW: Duration = Duration::from_micros(500);

/// Arrivals closer together than this share wake-ups (5,000 a second).
const FAST_GAP: Duration = Duration::from_micros(200);

/// How far ahead arrivals go out together when they are `gap` apart (to
/// this worker): each on its own wake-up up to 5,000 a second.
pub(crate) fn batch_window(gap: Duration) -> Duration {
    if gap < FAST_GAP {
        BATCH_WINDOW
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to 5,000 arrivals a second each has its own wake-up; above, those
    /// due within the window go out together.
    #[test]
    fn arrivals_share_wake_ups_above_5000_a_second() {
        assert_eq!(batch_window(Duration::from_millis(5)), Duration::ZERO);
        assert_eq!(batch_window(Duration::from_micros(200)), Duration::ZERO);
        assert_eq!(batch_window(Duration::from_micros(199)), BATCH_WINDOW);
        assert_eq!(batch_window(Duration::ZERO), BATCH_WINDOW);
    }
}
