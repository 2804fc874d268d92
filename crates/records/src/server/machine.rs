//! The machine a run happens on (`meta.machine` in results).

use serde::{Deserialize, Serialize};
use std::ffi::CStr;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Machine {
    pub hostname: String,
    pub os: String,
    pub kernel: String,
    pub arch: String,
    /// CPUs online on the machine.
    pub cores: usize,
    /// CPUs this process may run on (affinity, cgroup quota).
    pub cores_available: usize,
    pub memory_bytes: u64,
}

impl Machine {
    pub fn current() -> Machine {
        // SAFETY: uname fills a caller-provided struct; zeroed is a valid start.
        let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::uname(&mut uts) } == 0;
        let field = |f: &[libc::c_char]| {
            if ok {
                // SAFETY: uname NUL-terminates every field.
                unsafe { CStr::from_ptr(f.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            } else {
                String::new()
            }
        };
        // SAFETY: sysinfo fills a caller-provided struct.
        let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
        let memory_bytes = if unsafe { libc::sysinfo(&mut info) } == 0 {
            info.totalram as u64 * info.mem_unit as u64
        } else {
            0
        };
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        Machine {
            hostname: field(&uts.nodename),
            os: field(&uts.sysname),
            kernel: field(&uts.release),
            arch: std::env::consts::ARCH.to_string(),
            cores,
            cores_available: available_cores(),
            memory_bytes,
        }
    }
}

/// CPUs this process may use (respects `taskset` and cgroup limits).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
