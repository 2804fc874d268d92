//! When an open-model arrival goes out: the margins both paths keep (the
//! task path's `tasks/arrival_clock.rs`, the event loop's
//! `event_loop/arrivals.rs`; why these: see `arrival_clock.rs`), and when
//! its pool of connections grows ([`PoolNeed`]).

use std::time::{Duration, Instant};

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

/// Connections the pool may hold beyond what Little's law says it needs
/// and the bursts of a random schedule (four standard deviations of a
/// Poisson count in flight): room for a rate that rises, and for a small
/// pool's chance.
const POOL_SLACK: f64 = 32.0;

/// An arrival held back this long past its pool's usual turnover may open
/// a connection after all: the connections are stuck (a server that
/// stalls tells nothing until it answers), not merely busy.
const HELD_BACK_MAX: Duration = Duration::from_millis(1);

/// How long arrivals held their connections is averaged over windows this
/// long. Per arrival, a mean would jump at a stall of the server: the few
/// arrivals in flight hold their connections for its whole length, while
/// the many around them hold theirs as briefly as ever (Little's law wants
/// the mean over arrivals in a time, not over the last few).
const HELD_WINDOW: Duration = Duration::from_millis(100);

/// Open model: whether the pool of connections may grow for an arrival
/// that found every connection busy (both paths ask).
///
/// Little's law says how many connections the arrivals need: their rate ×
/// how long each holds its connection. The pool grows freely up to that,
/// 4 × its square root and [`POOL_SLACK`] more; past it, the arrival waits
/// for one of the busy connections, which free within about one holding
/// time.
///
/// Why: a pause of the generator (a busy core, a paused virtual CPU)
/// leaves many arrivals due at once with every connection busy for a
/// moment. Opening a connection for each — a loopback connect costs more
/// than a request — made the loop later, and put thousands of connections
/// in flight on a server that serves many at once more slowly than a few:
/// one nginx worker serves ~129,000 GETs a second over 50 connections,
/// ~77,000 over 1,000. A run asking 70,000 a second reached the 10,000 cap
/// after one such pause and fell 26 % short for good (`bench/open_rates.py`).
///
/// A server that slows down holds connections longer, which raises the
/// need, so the pool still grows to meet a slow server. A server that
/// serves X a second holds each of the pool's L connections L / X, so the
/// need is L × rate / X: below X the pool settles (at about 32 / (1 − rate
/// / X) and the bursts' room), above it — the server cannot keep up — it
/// grows without end (up to the cap) and fills the server's queues, as
/// real clients do.
#[derive(Debug, Default)]
pub(crate) struct PoolNeed {
    /// Seconds between this worker's arrivals, on average lately.
    gap: Option<f64>,
    /// Seconds an arrival held its connection, on average over the last
    /// whole window.
    held: Option<f64>,
    /// The window under way: since when, its arrivals' seconds held, and
    /// how many.
    window: Option<(Instant, f64, u32)>,
    /// Since when arrivals have waited, held back by the need, with no
    /// connection coming free or opening meanwhile.
    held_back_since: Option<Instant>,
}

impl PoolNeed {
    /// The next arrival came `gap` after the one before (`Duration::MAX`
    /// for the first, which has none: not counted).
    pub fn arrived(&mut self, gap: Duration) {
        if gap == Duration::MAX {
            return;
        }
        self.gap = Some(ewma(self.gap, gap.as_secs_f64(), 64.0));
    }

    /// An arrival taken at `took` is over at `now`: its connection is
    /// free for the next.
    pub fn released(&mut self, took: Instant, now: Instant) {
        self.held_back_since = None;
        let held = now.saturating_duration_since(took).as_secs_f64();
        let (since, sum, count) = self.window.get_or_insert((now, 0.0, 0));
        *sum += held;
        *count += 1;
        if now.saturating_duration_since(*since) >= HELD_WINDOW {
            self.held = Some(*sum / *count as f64);
            self.window = None;
        }
    }

    /// How long an arrival holds its connection: the last window's mean,
    /// or before the first window ends the mean so far.
    fn held(&self) -> Option<f64> {
        self.held.or_else(|| {
            let (_, sum, count) = self.window?;
            Some(sum / count as f64)
        })
    }

    /// A connection opened: arrivals are no longer held back.
    pub fn opened(&mut self) {
        self.held_back_since = None;
    }

    /// An arrival found every connection busy and waits (`may_grow` said
    /// no): the hold starts now, unless one is under way.
    pub fn hold_back(&mut self, now: Instant) {
        self.held_back_since.get_or_insert(now);
    }

    /// Whether a pool of `pool` busy connections may open another at `now`.
    pub fn may_grow(&self, pool: usize, now: Instant) -> bool {
        let (Some(gap), Some(held)) = (self.gap, self.held()) else {
            // Nothing measured yet: the start of a run grows as it needs.
            return true;
        };
        let need = held / gap.max(1e-9);
        if (pool as f64) < need + 4.0 * need.sqrt() + POOL_SLACK {
            return true;
        }
        self.give_up_at().is_some_and(|at| now >= at)
    }

    /// When arrivals held back stop waiting and a connection opens anyway
    /// (none came free for twice the usual holding time and
    /// [`HELD_BACK_MAX`]); `None` when none is held back.
    pub fn give_up_at(&self) -> Option<Instant> {
        let held = self.held().unwrap_or(0.0);
        let limit = HELD_BACK_MAX + Duration::from_secs_f64(2.0 * held);
        Some(self.held_back_since? + limit)
    }
}

/// An exponentially weighted mean over about the last `n` values.
fn ewma(mean: Option<f64>, value: f64, n: f64) -> f64 {
    match mean {
        Some(mean) => mean + (value - mean) / n,
        None => value,
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

    fn need(gap: Duration, held: Duration) -> PoolNeed {
        let mut need = PoolNeed::default();
        need.arrived(gap);
        let t0 = Instant::now();
        need.released(t0, t0 + held);
        need
    }

    /// Before the first arrival is over nothing says how many are needed.
    #[test]
    fn a_pool_grows_freely_until_an_arrival_is_over() {
        let mut need = PoolNeed::default();
        assert!(need.may_grow(10_000, Instant::now()));
        need.arrived(Duration::from_micros(10));
        assert!(need.may_grow(10_000, Instant::now()));
    }

    /// The first arrival has no gap before it (`Duration::MAX`): it does
    /// not make the rate look like nothing.
    #[test]
    fn the_first_arrival_has_no_gap() {
        let mut need = PoolNeed::default();
        need.arrived(Duration::MAX);
        need.arrived(Duration::from_micros(10));
        let t0 = Instant::now();
        need.released(t0, t0 + Duration::from_micros(50));
        assert!(need.may_grow(40, t0));
    }

    /// 100,000 a second held 50 µs each need 5 connections: the pool
    /// grows to 5 + 4 × √5 + 32 ≈ 46 and then waits for its own.
    #[test]
    fn a_fast_server_keeps_the_pool_small() {
        let mut need = need(Duration::from_micros(10), Duration::from_micros(50));
        assert!(need.may_grow(45, Instant::now()));
        assert!(!need.may_grow(46, Instant::now()));
        let t0 = Instant::now();
        need.hold_back(t0);
        assert!(!need.may_grow(46, t0 + Duration::from_micros(900)));
    }

    /// A slow server holds connections long: 1,000 a second held 2 s each
    /// need 2,000 connections, and the pool grows past them (to 2,000 +
    /// 4 × √2,000 + 32 ≈ 2,211).
    #[test]
    fn a_slow_server_grows_the_pool_to_what_it_holds() {
        let need = need(Duration::from_millis(1), Duration::from_secs(2));
        assert!(need.may_grow(2_210, Instant::now()));
        assert!(!need.may_grow(2_211, Instant::now()));
    }

    /// In flight at a server that serves X a second, L connections are held
    /// L / X each: below X the need settles, above X it keeps growing.
    #[test]
    fn the_pool_settles_below_the_servers_rate_and_grows_above_it() {
        // The pool the need stops at, if under 1,000.
        let settle = |rate: f64, served: f64| {
            (1..1_000usize).find(|&pool| {
                let need = need(
                    Duration::from_secs_f64(1.0 / rate),
                    Duration::from_secs_f64(pool as f64 / served),
                );
                !need.may_grow(pool, Instant::now())
            })
        };
        // 100,000 a second to a server of 129,000: about 490 connections.
        let pool = settle(100_000.0, 129_000.0).expect("settles");
        assert!((400..600).contains(&pool), "{pool}");
        assert_eq!(settle(130_000.0, 129_000.0), None);
    }

    /// Connections that do not come free within their usual turnover
    /// (and a millisecond) are stuck: a new one may open. One that comes
    /// free, or one opened, ends the hold.
    #[test]
    fn an_arrival_held_back_past_the_turnover_may_open_one() {
        let mut need = need(Duration::from_micros(10), Duration::from_micros(50));
        let t0 = Instant::now();
        assert_eq!(need.give_up_at(), None);
        need.hold_back(t0);
        // A later arrival held back does not restart the hold.
        need.hold_back(t0 + Duration::from_micros(500));
        assert!(!need.may_grow(1_000, t0 + Duration::from_micros(1_099)));
        assert!(need.may_grow(1_000, t0 + Duration::from_micros(1_101)));
        need.opened();
        assert!(!need.may_grow(1_000, t0 + Duration::from_micros(1_101)));
        need.hold_back(t0);
        need.released(t0, t0 + Duration::from_micros(50));
        assert_eq!(need.give_up_at(), None);
        assert!(!need.may_grow(1_000, t0 + Duration::from_micros(5_000)));
    }

    /// A server that slows for a whole window raises the need at its end.
    #[test]
    fn the_need_follows_a_server_that_slows() {
        let mut need = need(Duration::from_micros(100), Duration::from_micros(100));
        assert!(!need.may_grow(100, Instant::now()));
        let t0 = Instant::now();
        for ms in 0..=100 {
            let now = t0 + Duration::from_millis(ms);
            need.released(now - Duration::from_millis(10), now);
        }
        // Held 10 ms at 10,000 a second: 100 needed.
        assert!(need.may_grow(100, Instant::now()));
    }

    /// A server that stalls 20 ms holds the ~50 requests in flight that
    /// long; around them 10,000 took 50 µs each in the window. The need
    /// moves from 5 to 15, not to the 2,000 a mean of the stalled would
    /// give.
    #[test]
    fn a_stall_of_the_few_in_flight_barely_moves_the_need() {
        let mut need = PoolNeed::default();
        need.arrived(Duration::from_micros(10));
        let t0 = Instant::now();
        for n in 0..10_050u64 {
            let now = t0 + Duration::from_nanos(n * 10_000);
            let held = if n % 200 == 0 { 20_000 } else { 50 };
            need.released(now - Duration::from_micros(held), now);
        }
        assert!(need.may_grow(60, Instant::now()));
        assert!(!need.may_grow(70, Instant::now()));
    }
}
