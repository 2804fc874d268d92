//! The request timeout: one timer per user, touched as little as the
//! request rate allows.
//!
//! A request does not insert and remove a timer as `tokio::time::timeout`
//! would, nor even move it: the timer only has to go off no later than the
//! request's deadline, so one set for an earlier request's deadline stays;
//! when it goes off early, it is set to the deadline and the wait goes on.
//! With answers much faster than the timeout, the timer is moved about once
//! per timeout, not once per request (moving it was 1.5 % of the CPU at
//! 1,000 connections). Nor is it polled while it is known to wake the task
//! (polling it was ~120 instructions per request).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use tokio::time::Sleep;

pub(crate) struct RequestTimer {
    sleep: Pin<Box<Sleep>>,
    /// The sleep's deadline, kept here: compared on every request, it is
    /// read from the user's own memory, not from the boxed sleep (a cache
    /// miss per request at 1,000 connections: 1.6 % of the CPU).
    deadline: Instant,
    /// The task the timer wakes when it goes off: set when a poll left
    /// that task's waker with it, cleared when the timer is moved.
    wakes: Option<Waker>,
}

impl RequestTimer {
    fn new(due: Instant) -> Self {
        RequestTimer {
            sleep: Box::pin(tokio::time::sleep_until(due.into())),
            deadline: due,
            wakes: None,
        }
    }

    fn move_to(&mut self, due: Instant) {
        self.sleep.as_mut().reset(due.into());
        self.deadline = due;
        self.wakes = None;
    }

    /// Ready once `due` has passed. Pending otherwise, with the timer set
    /// to wake this task at the latest when `due` passes.
    fn poll_due(&mut self, due: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let wakes_this_task = self.wakes.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        // Before its deadline the timer cannot have gone off: asked of the
        // clock, not of the boxed sleep, whose memory is a cache miss per
        // request at 1,000 connections (~1.5 % of the CPU); a clock read
        // is not. tokio's clock: the same as std's, but for paused tests.
        if wakes_this_task && tokio::time::Instant::now().into_std() < self.deadline {
            return Poll::Pending;
        }
        // A task out of its cooperative budget gets `Pending` from the
        // timer without the timer taking its waker: not to be trusted.
        let budget_left = tokio::task::coop::has_budget_remaining();
        while self.sleep.as_mut().poll(cx).is_ready() {
            // tokio's clock: the same as std's, but for paused tests.
            if tokio::time::Instant::now().into_std() >= due {
                self.wakes = None;
                return Poll::Ready(());
            }
            // Went off for an earlier request's deadline.
            self.move_to(due);
        }
        self.wakes = budget_left.then(|| cx.waker().clone());
        Poll::Pending
    }
}

/// Runs `exchange` until it finishes or `due` passes (`Err`), on the
/// user's one timer (made on its first request). Not an async fn: the
/// timer is set when it is called, and the future it returns has no state
/// of its own to step through (one cache line less per request at 1,000
/// connections).
pub(crate) fn timed<'a, T>(
    timer: &'a mut Option<RequestTimer>,
    due: Instant,
    mut exchange: Pin<&'a mut impl Future<Output = T>>,
) -> impl Future<Output = Result<T, ()>> + 'a {
    let timer = match timer {
        Some(timer) => {
            if due < timer.deadline {
                timer.move_to(due);
            }
            timer
        }
        None => timer.insert(RequestTimer::new(due)),
    };
    std::future::poll_fn(move |cx| {
        if let Poll::Ready(result) = exchange.as_mut().poll(cx) {
            return Poll::Ready(Ok(result));
        }
        timer.poll_due(due, cx).map(Err)
    })
}

#[cfg(test)]
mod tests {
    use super::timed;
    use std::future::{pending, poll_fn, Future};
    use std::task::Poll;
    use std::time::Duration;
    use tokio::time::{sleep, Instant};

    /// Runs `test` in a task of its own, as a user runs (a task's waker is
    /// the same from poll to poll; the test's own future's is not).
    async fn in_a_task(test: impl Future<Output = ()> + Send + 'static) {
        tokio::spawn(test).await.unwrap();
    }

    /// On paused time: the timer goes off at each request's own deadline,
    /// whether the timer was left earlier or later by the one before.
    #[tokio::test(start_paused = true)]
    async fn each_request_times_out_at_its_own_deadline() {
        in_a_task(each_request_times_out_at_its_own_deadline_task()).await;
    }

    async fn each_request_times_out_at_its_own_deadline_task() {
        let start = Instant::now();
        let mut timer = None;
        let at = |ms| (start + Duration::from_millis(ms)).into_std();
        // The first request makes the timer and answers in time.
        let answer = std::pin::pin!(async {
            sleep(Duration::from_millis(50)).await;
            7
        });
        assert_eq!(timed(&mut timer, at(100), answer).await, Ok(7));
        // The next deadline is later; the timer, left at 100 ms, goes off
        // early and waits on to 300 ms.
        let never = std::pin::pin!(pending::<()>());
        assert_eq!(timed(&mut timer, at(300), never).await, Err(()));
        assert_eq!(start.elapsed(), Duration::from_millis(300));
        // A long timeout leaves the timer at 1.3 s; the next request's
        // shorter one is due before that: the timer is moved.
        let quick = std::pin::pin!(sleep(Duration::from_millis(10)));
        assert_eq!(timed(&mut timer, at(1_300), quick).await, Ok(()));
        let slow = std::pin::pin!(sleep(Duration::from_millis(800)));
        assert_eq!(timed(&mut timer, at(400), slow).await, Err(()));
        assert_eq!(start.elapsed(), Duration::from_millis(400));
        // An answer just before the deadline is an answer.
        let just = std::pin::pin!(async {
            sleep(Duration::from_millis(99)).await;
            1
        });
        assert_eq!(timed(&mut timer, at(500), just).await, Ok(1));
        // Many quick answers (polled but not woken by the timer), then
        // one that never comes: still timed out at its deadline.
        for i in 0..5u64 {
            let quick = std::pin::pin!(sleep(Duration::from_millis(1)));
            assert_eq!(timed(&mut timer, at(600 + i * 10), quick).await, Ok(()));
        }
        let since = Instant::now();
        let never = std::pin::pin!(pending::<()>());
        let due = (since + Duration::from_millis(250)).into_std();
        assert_eq!(timed(&mut timer, due, never).await, Err(()));
        assert_eq!(since.elapsed(), Duration::from_millis(250));
    }

    /// A task that spent its cooperative budget before the timer was
    /// polled (the timer then takes no waker) still times out.
    #[tokio::test(start_paused = true)]
    async fn a_timeout_polled_without_budget_still_goes_off() {
        in_a_task(a_timeout_polled_without_budget_still_goes_off_task()).await;
    }

    async fn a_timeout_polled_without_budget_still_goes_off_task() {
        let start = Instant::now();
        let mut timer = None;
        let mut spent = false;
        let budget_spender = std::pin::pin!(poll_fn(|cx| {
            if !spent {
                spent = true;
                // Polls a budgeted tokio future until the budget is gone.
                while tokio::task::coop::has_budget_remaining() {
                    let mut ready = std::pin::pin!(tokio::task::consume_budget());
                    let _ = ready.as_mut().poll(cx);
                }
            }
            Poll::<()>::Pending
        }));
        let due = (start + Duration::from_millis(100)).into_std();
        let outcome = tokio::time::timeout(
            Duration::from_secs(60),
            timed(&mut timer, due, budget_spender),
        )
        .await;
        assert_eq!(outcome, Ok(Err(())), "the request timer never went off");
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }
}
