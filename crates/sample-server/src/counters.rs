//! Request counters shared by all worker processes of one target, in an
//! anonymous shared mapping made before the fork. `/stats` reads them, so
//! a test can compare what the client sent with what the server received.
//! Each worker's open connections are counted there too, so a test can
//! see how connections spread over the workers.

use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 4096 / 8;

pub struct Counters {
    slots: &'static [AtomicU64; SLOTS],
    /// Worker processes (0: the master serves alone).
    workers: usize,
    /// `--request-log`: a line appended per request as it reaches the app,
    /// a count that outlives the process (a test kills and restarts it).
    log: Option<std::fs::File>,
}

const REQUESTS: usize = 0;
const IN_FLIGHT: usize = 1;
const IN_FLIGHT_MAX: usize = 2;
/// Open connections of worker i are in slot `OPEN + i`.
const OPEN: usize = 8;
/// Workers whose connections are counted separately; more share slots.
const COUNTED_WORKERS: usize = (SLOTS - OPEN) / 2;
/// Requests in flight in worker i are in slot `IN_FLIGHT_OF + i`: a killed
/// worker's are taken off the total when its successor starts.
const IN_FLIGHT_OF: usize = OPEN + COUNTED_WORKERS;

/// This process's worker index (0 for the master serving alone).
static WORKER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Counters {
    /// Maps the counters; call before forking so every worker shares them.
    pub fn new_shared(workers: usize) -> std::io::Result<Counters> {
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
            slots: unsafe { &*(ptr as *const [AtomicU64; SLOTS]) },
            workers,
            log: None,
        })
    }

    fn open(&self, worker: usize) -> &AtomicU64 {
        &self.slots[OPEN + worker % COUNTED_WORKERS]
    }

    fn in_flight_of(&self, worker: usize) -> &AtomicU64 {
        &self.slots[IN_FLIGHT_OF + worker % COUNTED_WORKERS]
    }

    /// A worker (re)starts: the connections and requests in flight of the
    /// one it replaces (killed, or dead) are gone.
    pub fn worker_started(&self, worker: usize) {
        WORKER.store(worker, Ordering::Relaxed);
        self.open(worker).store(0, Ordering::Relaxed);
        let lost = self.in_flight_of(worker).swap(0, Ordering::Relaxed);
        self.slots[IN_FLIGHT].fetch_sub(lost, Ordering::Relaxed);
    }

    /// Worker `worker` accepted a connection; the guard marks it closed.
    pub fn connection_opened(&self, worker: usize) -> ConnectionGuard<'_> {
        self.open(worker).fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self, worker)
    }

    /// Appends a line to `path` for every request (see `log`); opened for
    /// appending before the fork, so every worker's line is whole.
    pub fn logging_to(mut self, path: &std::path::Path) -> std::io::Result<Counters> {
        self.log = Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        );
        Ok(self)
    }

    /// A request reached the app; the guard marks it finished.
    pub fn begin(&self) -> InFlightGuard<'_> {
        if let Some(mut log) = self.log.as_ref() {
            use std::io::Write;
            let _ = log.write_all(b"request\n");
        }
        self.slots[REQUESTS].fetch_add(1, Ordering::Relaxed);
        let worker = WORKER.load(Ordering::Relaxed);
        self.in_flight_of(worker).fetch_add(1, Ordering::Relaxed);
        let now = self.slots[IN_FLIGHT].fetch_add(1, Ordering::Relaxed) + 1;
        self.slots[IN_FLIGHT_MAX].fetch_max(now, Ordering::Relaxed);
        InFlightGuard(self, worker)
    }

    pub fn json(&self) -> String {
        let open: Vec<String> = (0..self.workers.min(COUNTED_WORKERS))
            .map(|w| self.open(w).load(Ordering::Relaxed).to_string())
            .collect();
        format!(
            "{{\"requests\":{},\"in_flight\":{},\"in_flight_max\":{},\"connections_per_worker\":[{}]}}\n",
            self.slots[REQUESTS].load(Ordering::Relaxed),
            self.slots[IN_FLIGHT].load(Ordering::Relaxed),
            self.slots[IN_FLIGHT_MAX].load(Ordering::Relaxed),
            open.join(",")
        )
    }
}

pub struct ConnectionGuard<'a>(&'a Counters, usize);

impl Drop for ConnectionGuard<'_> {
    fn drop(&mut self) {
        self.0.open(self.1).fetch_sub(1, Ordering::Relaxed);
    }
}

pub struct InFlightGuard<'a>(&'a Counters, usize);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        self.0.in_flight_of(self.1).fetch_sub(1, Ordering::Relaxed);
        self.0.slots[IN_FLIGHT].fetch_sub(1, Ordering::Relaxed);
    }
}
