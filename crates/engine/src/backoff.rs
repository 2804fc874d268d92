//! How a closed-model user paces itself after a failed connect. Without a
//! pause, a user whose connect fails at once (refused port, no file
//! descriptors left) loops without ever yielding: one core spins at ~57k
//! attempts/s and the users that do have connections are starved.
//!
//! The pause starts at [`FIRST`], doubles with each failure in a row, is
//! capped at [`MOST`], and starts over after a connect succeeds. The
//! failures are still counted, each as a request of its error class.

use std::time::Duration;

pub const FIRST: Duration = Duration::from_millis(10);
pub const MOST: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, Default)]
pub struct ConnectBackoff {
    failures_in_a_row: u32,
}

impl ConnectBackoff {
    /// The pause after one more failure in a row.
    pub fn next_pause(&mut self) -> Duration {
        let pause = FIRST
            .saturating_mul(1u32 << self.failures_in_a_row.min(16))
            .min(MOST);
        self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
        pause
    }

    pub fn reset(&mut self) {
        self.failures_in_a_row = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_ten_ms_to_a_second_and_starts_over_after_success() {
        let mut b = ConnectBackoff::default();
        let pauses: Vec<u64> = (0..9).map(|_| b.next_pause().as_millis() as u64).collect();
        assert_eq!(pauses, vec![10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        for _ in 0..100 {
            assert_eq!(b.next_pause(), MOST);
        }
        b.reset();
        assert_eq!(b.next_pause(), FIRST);
    }
}
