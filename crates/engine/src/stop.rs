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
    /// Signals made by [`StopSignal::child`]: each stop, abort and
    /// interrupt of this one is passed on to them.
    children: Mutex<Vec<std::sync::Weak<Inner>>>,
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
                children: Mutex::new(Vec::new()),
            }),
        }
    }

    /// A signal of its own that follows this one: stopping, aborting or
    /// interrupting this one does the same to it, while stopping it
    /// leaves this one running (a study's configuration skipped).
    pub fn child(&self) -> StopSignal {
        let child = StopSignal::new();
        let mut children = self.inner.children.lock().expect("stop children lock");
        children.retain(|c| c.strong_count() > 0);
        children.push(Arc::downgrade(&child.inner));
        drop(children);
        // Already stopping: so is the child, for the same reason.
        if self.was_interrupted() {
            child.interrupt(self.reason().unwrap_or_default());
        } else if let Some(reason) = self.reason() {
            child.stop_because(reason);
        }
        child.follow(self);
        child
    }

    fn each_child(&self, f: impl Fn(&StopSignal)) {
        let children: Vec<StopSignal> = self
            .inner
            .children
            .lock()
            .expect("stop children lock")
            .iter()
            .filter_map(|c| c.upgrade().map(|inner| StopSignal { inner }))
            .collect();
        for c in &children {
            f(c);
        }
    }

    /// Ctrl-C / SIGTERM: stop sending, finish briefly, keep the results;
    /// `reason` (e.g. "interrupted by SIGTERM") becomes the stop reason.
    /// A second interrupt aborts at once.
    pub fn interrupt(&self, reason: String) {
        if self.inner.interrupted.swap(true, Ordering::SeqCst) {
            self.abort();
        } else {
            self.each_child(|c| c.interrupt(reason.clone()));
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
            .get_or_insert(reason.clone());
        self.each_child(|c| c.stop_because(reason.clone()));
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
        self.each_child(StopSignal::stop);
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
        self.each_child(StopSignal::abort);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_follows_its_parent_but_not_the_other_way() {
        let parent = StopSignal::new();
        let skipped = parent.child();
        skipped.stop_because("skipped".into());
        assert!(skipped.is_stopping() && !parent.is_stopping());

        let child = parent.child();
        parent.interrupt("interrupted by SIGINT".into());
        assert!(child.was_interrupted() && child.is_stopping());
        assert_eq!(child.reason().as_deref(), Some("interrupted by SIGINT"));
        assert_eq!(child.phase(), Phase::Stopping);
        parent.interrupt("again".into());
        assert_eq!(child.phase(), Phase::Abort);

        // Made after the stop: stopped already, for the same reason.
        let late = parent.child();
        assert!(late.was_interrupted());
        assert_eq!(late.phase(), Phase::Abort);
        assert_eq!(late.reason().as_deref(), Some("interrupted by SIGINT"));
    }
}
