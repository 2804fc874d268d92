//! The process's file-descriptor limit, which caps how many connections
//! it may open; the machine's facts themselves are a record
//! (`headroom_records::server::machine`).

/// The open-files limit (soft, hard).
pub fn fd_limit() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return (1024, 1024);
    }
    (lim.rlim_cur, lim.rlim_max)
}

/// Raises the soft open-files limit to the hard limit, as load tools do:
/// every connection is a file descriptor. Returns the new (soft, hard).
pub fn raise_fd_limit() -> (u64, u64) {
    let (soft, hard) = fd_limit();
    if soft < hard {
        let lim = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: setrlimit reads the struct we pass.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
    fd_limit()
}
