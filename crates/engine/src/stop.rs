//! Stopping a run: a graceful stop (no new requests; in-flight ones may
//! finish) and an abort (cut off what is still in flight, counted as
//! `aborted`). Workers check a flag before each request and wait on a
//! watch channel where they sleep, so stopping never waits for a sleep.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Running,
    Stopping,
    Abort,
}

/// Shared by the controller, the signal handler and every worker.
#[derive(Clone)]
pub struct StopSignal {
    inner: Arc<Inner>,
}

struct Inner {
    stopping: AtomicBool,
    /// When stopping began (the first stop, abort or interrupt).
    stopped_at: Mutex<Option<std::time::Instant>>,
    interrupted: AtomicBool,
    reason: Mutex<Option<String>>,
    phase: watch::Sender<Phase>,
}

impl Default for StopSignal {
    fn default() -> Self {
        Self::new()
    }
}

impl StopSignal {
    pub fn new() -> Self {
        StopSignal {
            inner: Arc::new(Inner {
                stopping: AtomicBool::new(false),
                stopped_at: Mutex::new(None),
                interrupted: AtomicBool::new(false),
                reason: Mutex::new(None),
                phase: watch::channel(Phase::Running).0,
            }),
        }
    }

    /// Ctrl-C / SIGTERM: stop sending, finish briefly, keep the results;
    /// `reason` (e.g. "interrupted by SIGTERM") becomes the stop reason.
    /// A second interrupt aborts at once.
    pub fn interrupt(&self, reason: String) {
        if self.inner.interrupted.swap(true, Ordering::SeqCst) {
            self.abort();
        } else {
            self.stop_because(reason);
        }
    }

    pub fn was_interrupted(&self) -> bool {
        self.inner.interrupted.load(Ordering::SeqCst)
    }

    /// Ends the run early for a reason the summary states (e.g. a unique
    /// feeder ran dry). In-flight requests get the graceful stop.
    pub fn stop_because(&self, reason: String) {
        self.inner
            .reason
            .lock()
            .expect("stop reason lock")
            .get_or_insert(reason);
        self.stop();
    }

    pub fn reason(&self) -> Option<String> {
        self.inner.reason.lock().expect("stop reason lock").clone()
    }

    /// When stopping began, if it has.
    pub fn stopped_at(&self) -> Option<std::time::Instant> {
        *self.inner.stopped_at.lock().expect("stop time lock")
    }

    fn mark_stopped_at(&self) {
        self.inner
            .stopped_at
            .lock()
            .expect("stop time lock")
            .get_or_insert_with(std::time::Instant::now);
    }

    /// No new requests from now on.
    pub fn stop(&self) {
        self.mark_stopped_at();
        self.inner.stopping.store(true, Ordering::SeqCst);
        self.inner.phase.send_if_modified(|p| {
            let changed = *p < Phase::Stopping;
            *p = (*p).max(Phase::Stopping);
            changed
        });
    }

    /// Cut off everything in flight.
    pub fn abort(&self) {
        self.mark_stopped_at();
        self.inner.stopping.store(true, Ordering::SeqCst);
        self.inner.phase.send_replace(Phase::Abort);
    }

    /// Sleeps for `d` or until a stop is asked for, whichever comes first
    /// (pauses between runs must not hold up Ctrl-C).
    pub fn sleep(&self, d: std::time::Duration) {
        let end = std::time::Instant::now() + d;
        while !self.is_stopping() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
        }
    }

    pub fn phase(&self) -> Phase {
        *self.inner.phase.borrow()
    }

    /// Passes `caller`'s stop or abort on to this (a run's own) signal.
    pub fn follow(&self, caller: &StopSignal) {
        match caller.phase() {
            Phase::Running => {}
            Phase::Stopping => self.stop(),
            Phase::Abort => self.abort(),
        }
    }

    /// Cheap check for the hot path.
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::Relaxed)
    }

    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.inner.phase.subscribe()
    }
}
