//! The open model's arrivals on the event loop: when each is due (the
//! plan's schedule, this worker's stripe of it), a timer of nanosecond
//! resolution to wake for the next (`timerfd` in the loop's epoll set, with
//! the task path's margins: see `tasks/arrival_clock.rs`), and the
//! arrivals that found every connection busy and the pool as large as it
//! may grow (the cap, or what the arrivals need), in the order they were
//! due.

use crate::pacing::{batch_window, PoolNeed, WAKE_EARLY};
use crate::plan::OpenLoad;
use crate::shared::Shared;
use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

/// An arrival: a request from the mix, or a user starting a session.
#[derive(Clone, Copy, Debug)]
pub(super) struct Arrival {
    pub intended: Instant,
    /// Its number in the schedule (the user's id).
    pub n: u64,
    /// The request (mix) or session drawn for it.
    pub pick: usize,
}

pub(super) struct Arrivals<'a> {
    pub load: &'a OpenLoad,
    /// Due with every connection busy and the pool at the cap or at what
    /// the arrivals need.
    pub waiting: VecDeque<Arrival>,
    /// Slots (connections) free for the next arrival.
    pub idle: Vec<usize>,
    /// Slots with an arrival under way.
    pub busy: usize,
    /// Most connections this worker opens: its share of the plan's cap.
    pub cap: usize,
    /// How many connections the arrivals need (below the cap).
    pub need: PoolNeed,
    /// The next arrival's number; the schedule ends before `limit`.
    n: u64,
    limit: u64,
    /// When the arrival before the next was due (how far apart they are).
    last: Option<Instant>,
    /// No arrival is left in the schedule.
    exhausted: bool,
    timer: Option<timer::Timer>,
}

impl<'a> Arrivals<'a> {
    pub fn new(shared: &Shared, load: &'a OpenLoad) -> Arrivals<'a> {
        // A shard's cap is its share of the plan's, so the shards together
        // hold no more connections than the plan allows.
        let shard_cap = shared.plan.shard.share(load.max_connections as u64) as usize;
        Arrivals {
            load,
            waiting: VecDeque::new(),
            idle: Vec::new(),
            busy: 0,
            cap: shard_cap.div_ceil(shared.workers).max(1),
            need: PoolNeed::default(),
            n: shared.next_arrival.get(),
            limit: shared.plan.max_requests.unwrap_or(u64::MAX),
            last: None,
            exhausted: false,
            timer: timer::Timer::new().ok(),
        }
    }

    /// The timer's descriptor, to be polled with the sockets (none: the
    /// loop's poll times out for arrivals, and spins the last millisecond).
    pub fn timer(&mut self) -> Option<&mut timer::Timer> {
        self.timer.as_mut()
    }

    /// The next arrival's due time, when the schedule has one.
    fn peek(&mut self, shared: &Shared) -> Option<Instant> {
        if self.exhausted || self.n >= self.limit {
            self.exhausted = true;
            return None;
        }
        match self.load.schedule.at(self.n) {
            Some(offset) => Some(shared.start + offset),
            None => {
                self.exhausted = true;
                None
            }
        }
    }

    fn advance(&mut self, shared: &Shared) {
        self.n += shared.stride().step;
        shared.next_arrival.set(self.n);
    }

    /// The next arrival, if it may go out at `now`: due, or due within the
    /// batch window when arrivals are close together. A run that joined
    /// late counts those due before it joined as not sent.
    pub fn next_due(&mut self, shared: &Shared, now: Instant) -> Option<Arrival> {
        loop {
            let intended = self.peek(shared)?;
            if intended < shared.joined {
                let request = shared.plan.first_request(shared.pick());
                shared
                    .recorder
                    .borrow_mut()
                    .record_not_sent(request, intended, shared.joined);
                self.advance(shared);
                continue;
            }
            let gap = self.last.map_or(Duration::MAX, |last| {
                intended.saturating_duration_since(last)
            });
            let wake = intended.checked_sub(WAKE_EARLY).unwrap_or(intended);
            if intended > now + batch_window(gap) && wake > now {
                return None;
            }
            self.need.arrived(gap);
            self.last = Some(intended);
            let arrival = Arrival {
                intended,
                n: self.n,
                pick: shared.pick(),
            };
            self.advance(shared);
            return Some(arrival);
        }
    }

    /// When the loop must be awake for the next arrival.
    pub fn wake_at(&mut self, shared: &Shared) -> Option<Instant> {
        let intended = self.peek(shared)?;
        Some(intended.checked_sub(WAKE_EARLY).unwrap_or(intended))
    }

    /// No arrival is left, and none waits.
    pub fn all_out(&self) -> bool {
        self.exhausted && self.waiting.is_empty()
    }
}

/// A `timerfd`: set to go off once, read when it did.
pub(super) mod timer {
    use super::*;
    use rustix::time::{
        timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags,
        TimerfdTimerFlags, Timespec,
    };
    use std::os::fd::{AsRawFd, OwnedFd};

    pub(in crate::event_loop) struct Timer {
        fd: OwnedFd,
        /// Where it is set for (not set again for the same instant).
        set_for: Option<Instant>,
    }

    impl Timer {
        pub fn new() -> io::Result<Timer> {
            let fd = timerfd_create(
                TimerfdClockId::Monotonic,
                TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
            )?;
            Ok(Timer { fd, set_for: None })
        }

        pub fn raw_fd(&self) -> std::os::fd::RawFd {
            self.fd.as_raw_fd()
        }

        /// Sets it to go off at `at` (soon, when that has passed) — unless
        /// it is set to go off before that and has not yet: then it wakes
        /// the loop a little early, once. Setting it costs a syscall that
        /// reprograms the CPU's timer (a VM exit in a virtual machine), and
        /// the loop, woken by its sockets, would otherwise set it again at
        /// every turn.
        pub fn set(&mut self, at: Instant, now: Instant) -> io::Result<()> {
            if self.set_for.is_some_and(|set| set > now && set <= at) {
                return Ok(());
            }
            let zero = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // A zero value would disarm the timer, not fire it.
            let after = at
                .saturating_duration_since(now)
                .max(Duration::from_nanos(1));
            let value = Timespec::try_from(after)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            let spec = Itimerspec {
                it_interval: zero,
                it_value: value,
            };
            timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec)?;
            self.set_for = Some(at);
            Ok(())
        }

        /// It went off: the firing read, so the next one signals again.
        pub fn fired(&mut self) {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(&self.fd, &mut count);
            self.set_for = None;
        }
    }
}
