//! What a plan may ask for. Each limit keeps an absurd value from turning
//! into a panic, a silent short run or gigabytes of memory; the scenario
//! builder and the command line refuse a value beyond one, before any load
//! is sent. The README's "Limits" table lists them.

use std::time::Duration;

/// The longest duration accepted anywhere (load, ramp-up, think time,
/// timeouts, stages): a year, far beyond any load test and far from the
/// clock arithmetic's overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// The highest arrival rate of the open model, per second: a hundred times
/// what a generator core sends (~150k/s), so no real plan meets it.
pub const MAX_RATE: f64 = 10_000_000.0;

/// Cookies one user's jar keeps. A server that sets more (a new name on
/// every response) would otherwise grow the jar, and the time spent
/// matching it, without end — a slowdown that would be blamed on the
/// server. Past the cap new cookies are dropped and counted
/// (`cookies_dropped`). Browsers keep at least 50 per domain (RFC 6265
/// §6.1); this is above that.
pub const MAX_COOKIES_PER_USER: usize = 64;

/// Checks that a duration given for `field` is within bounds: at most
/// [`MAX_DURATION`], and above zero when `positive` (a run, a timeout).
pub fn check_duration(field: &str, d: Duration, positive: bool) -> Result<Duration, String> {
    if d > MAX_DURATION {
        return Err(format!(
            "{field}: {} is longer than headroom accepts (at most {})",
            humanize(d),
            humanize(MAX_DURATION)
        ));
    }
    if positive && d.is_zero() {
        return Err(format!("{field}: must be greater than zero"));
    }
    Ok(d)
}

/// Fields whose duration must be greater than zero (a zero ramp-up, think
/// time, graceful stop, warm-up or pause means "none" and is fine; a zero
/// ready timeout would never let a study's server come up).
pub fn must_be_positive(field: &str) -> bool {
    matches!(
        field,
        "duration"
            | "timeout"
            | "connect_timeout"
            | "over"
            | "step_duration"
            | "max_time"
            | "ready_timeout"
    )
}

fn humanize(d: Duration) -> String {
    let days = d.as_secs() / 86_400;
    if days > 0 {
        format!("{days} days")
    } else {
        format!("{} s", d.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_beyond_a_year_or_zero_where_it_means_nothing_are_refused() {
        let huge = Duration::from_secs(u64::MAX);
        assert!(check_duration("--duration", huge, true)
            .unwrap_err()
            .contains("--duration: 213503982334601 days is longer than headroom accepts"));
        assert_eq!(
            check_duration("--duration", Duration::ZERO, true).unwrap_err(),
            "--duration: must be greater than zero"
        );
        assert_eq!(
            check_duration("--ramp-up", Duration::ZERO, false),
            Ok(Duration::ZERO)
        );
        assert_eq!(check_duration("x", MAX_DURATION, true), Ok(MAX_DURATION));
    }
}
