//! Request counters shared by all worker processes of one target, in an
//! anonymous shared mapping made before the fork. `/stats` reads them, so
//! a test can compare what the client sent with what the server received.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct Counters {
    slots: &'static [AtomicU64; 3],
}

const REQUESTS: usize = 0;
const IN_FLIGHT: usize = 1;
const IN_FLIGHT_MAX: usize = 2;

impl Counters {
    /// Maps the counters; call before forking so every worker shares them.
    pub fn new_shared() -> std::io::Result<Counters> {
        // SAFETY: a fresh anonymous shared mapping of one page, zero-filled,
        // never unmapped (lives as long as the process); AtomicU64 is valid
        // for all-zero bytes and page-aligned.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Counters {
            slots: unsafe { &*(ptr as *const [AtomicU64; 3]) },
        })
    }

    /// A request reached the app; the guard marks it finished.
    pub fn begin(&self) -> InFlightGuard<'_> {
        self.slots[REQUESTS].fetch_add(1, Ordering::Relaxed);
        let now = self.slots[IN_FLIGHT].fetch_add(1, Ordering::Relaxed) + 1;
        self.slots[IN_FLIGHT_MAX].fetch_max(now, Ordering::Relaxed);
        InFlightGuard(self)
    }

    pub fn json(&self) -> String {
        format!(
            "{{\"requests\":{},\"in_flight\":{},\"in_flight_max\":{}}}\n",
            self.slots[REQUESTS].load(Ordering::Relaxed),
            self.slots[IN_FLIGHT].load(Ordering::Relaxed),
            self.slots[IN_FLIGHT_MAX].load(Ordering::Relaxed)
        )
    }
}

pub struct InFlightGuard<'a>(&'a Counters);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.slots[IN_FLIGHT].fetch_sub(1, Ordering::Relaxed);
    }
}
