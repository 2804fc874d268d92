//! Waiting for an open-model arrival to within microseconds.
//!
//! tokio's timer ticks in milliseconds: a deadline is rounded up to the next
//! tick, and `epoll_wait`'s timeout rounds the wait up again. An arrival
//! timed on it alone goes out up to 2 ms late — or, woken two ticks early
//! to avoid that, up to 2 ms early, in a burst with every other arrival of
//! that millisecond. So the scheduler waits on a timer of its own with
//! nanosecond resolution (Linux's `timerfd`, in tokio's reactor like a
//! socket).
//!
//! The timer is set [`WAKE_EARLY`] before an arrival, so the tens of
//! microseconds an idle CPU takes to wake (more in a virtual machine) are
//! mostly not late; an arrival that goes out before its time is timed from
//! when it went out (`InFlight::sent_at`).
//!
//! Each wake-up has a price beyond the generator's: a request sent to an
//! idle server wakes the server's CPU too, and in a virtual machine the
//! sender pays ~20 µs of kernel time for that (at 20,000 arrivals a second,
//! one wake-up each: 65 % of a core, against 17 % in millisecond bursts).
//! So above 5,000 arrivals a second, once awake, the scheduler also lets
//! out those due within [`BATCH_WINDOW`]: about a wake-up per 0.5 ms,
//! arrivals up to 0.5 ms early instead of tokio's 2 ms.
//!
//! Without a `timerfd` (another system, or none to be had), tokio's timer
//! wakes the scheduler two ticks early and it yields to the connections
//! until the arrival is within the timer's margin: as exact, at the price of
//! spinning up to 2 ms per arrival.

use crate::pacing::{batch_window, WAKE_EARLY};
use crate::shared::Shared;
use std::time::{Duration, Instant};

/// How early tokio's millisecond timer is set when there is no `timerfd`
/// (a deadline rounded up twice, as above).
const TOKIO_TIMER_EARLY: Duration = Duration::from_millis(2);

pub(crate) struct ArrivalClock {
    #[cfg(target_os = "linux")]
    timer: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl ArrivalClock {
    /// Must be made inside the worker's runtime (the timer registers with
    /// its reactor).
    pub fn new() -> ArrivalClock {
        ArrivalClock {
            #[cfg(target_os = "linux")]
            timer: linux::timerfd(),
        }
    }

    /// Waits until an arrival at `at` may go out, when arrivals are `gap`
    /// apart; `false` if the run began stopping meanwhile.
    pub async fn wait_for(&self, shared: &Shared, at: Instant, gap: Duration) -> bool {
        let now = Instant::now();
        let wake = at.checked_sub(WAKE_EARLY).unwrap_or(at);
        if at <= now + batch_window(gap) || wake <= now {
            return !shared.stop.is_stopping();
        }
        #[cfg(target_os = "linux")]
        if let Some(timer) = &self.timer {
            if linux::set(timer, wake - now).is_ok() {
                let fired = shared.unless_stopping(linux::fired(timer)).await;
                return matches!(fired, Some(Ok(())));
            }
        }
        if let Some(early) = wake.checked_sub(TOKIO_TIMER_EARLY) {
            if early > now && !shared.sleep_until(early).await {
                return false;
            }
        }
        // The last stretch: other tasks and the reactor run between looks
        // at the clock.
        while Instant::now() < wake {
            if shared.stop.is_stopping() {
                return false;
            }
            tokio::task::yield_now().await;
        }
        !shared.stop.is_stopping()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use rustix::time::{
        timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags,
        TimerfdTimerFlags, Timespec,
    };
    use std::io;
    use std::os::fd::OwnedFd;
    use std::time::Duration;
    use tokio::io::unix::AsyncFd;

    pub fn timerfd() -> Option<AsyncFd<OwnedFd>> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .ok()?;
        // SAFETY: an `OwnedFd` is open until dropped, and the `AsyncFd`
        // owns it: the descriptor stays the same file for its whole life.
        unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
    }

    /// Sets the timer to go off once, `after` from now (which also clears a
    /// firing nobody read, from a wait the stop cut short).
    pub fn set(timer: &AsyncFd<OwnedFd>, after: Duration) -> io::Result<()> {
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // A zero value would disarm the timer, not fire it.
        let value = Timespec::try_from(after.max(Duration::from_nanos(1)))
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let spec = Itimerspec {
            it_interval: zero,
            it_value: value,
        };
        timerfd_settime(timer.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
        Ok(())
    }

    /// Waits for the timer to go off, and reads the firing.
    pub async fn fired(timer: &AsyncFd<OwnedFd>) -> io::Result<()> {
        loop {
            let mut ready = timer.readable().await?;
            let mut count = [0u8; 8];
            match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut count)?)) {
                Ok(read) => return read.map(|_| ()),
                // Readiness left from an earlier firing: wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ArrivalClock;
    use crate::pacing::WAKE_EARLY;
    use crate::plan::Plan;
    use crate::shared::Shared;
    use crate::stop::StopSignal;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn shared() -> Shared {
        let now = Instant::now();
        Shared::new(
            0,
            1,
            Arc::new(Plan::get("http://127.0.0.1:9/").unwrap()),
            (now, now),
            StopSignal::new(),
            None,
        )
    }

    /// At a low rate, never more than the timer's margin before the
    /// arrival. (Not asserted: that it is not late, as a paused virtual CPU
    /// may wake the test late.)
    #[tokio::test]
    async fn a_slow_arrival_goes_out_no_sooner_than_the_timer_margin() {
        let shared = shared();
        let clock = ArrivalClock::new();
        #[cfg(target_os = "linux")]
        assert!(clock.timer.is_some(), "no timerfd: the fallback is tested");
        for micros in [0, 30, 300, 1_500, 2_500] {
            let at = Instant::now() + Duration::from_micros(micros);
            assert!(clock.wait_for(&shared, at, Duration::from_millis(5)).await);
            assert!(
                Instant::now() + WAKE_EARLY >= at,
                "woke more than {WAKE_EARLY:?} before an arrival {micros} us away"
            );
        }
    }

    /// A stop cuts a long wait short.
    #[tokio::test]
    async fn a_stop_ends_the_wait() {
        let shared = shared();
        let clock = ArrivalClock::new();
        let stop = shared.stop.clone();
        let at = Instant::now() + Duration::from_secs(3_600);
        let (waited, ()) = tokio::join!(
            clock.wait_for(&shared, at, Duration::from_secs(3_600)),
            async move {
                tokio::time::sleep(Duration::from_millis(10)).await;
                stop.stop_because("test".to_string());
            }
        );
        assert!(!waited);
    }
}
