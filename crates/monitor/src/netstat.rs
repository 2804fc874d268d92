//! Small kernel counters procfs 0.17 does not parse, read by hand:
//! `/proc/net/netstat`'s TcpExt group (ListenOverflows, ListenDrops) and
//! `/proc/net/sockstat`'s TCP time-wait count (cheaper than walking every
//! socket in /proc/net/tcp, which cost ~18 ms a sample), and the two
//! context-switch lines of `/proc/PID/status` (procfs's full Status parse
//! costs ~40 µs a process: 0.8 % of a core for a 200-process tree at 1 Hz)
//! and the timeslices of `/proc/PID/schedstat` (whether to read them).

/// (ListenOverflows, ListenDrops), counted since boot.
pub fn listen_counters(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let pairs: Vec<(&str, &str)> = names
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
            .collect();
        let get = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.parse().ok())
        };
        return Some((get("ListenOverflows")?, get("ListenDrops")?));
    }
    None
}

pub fn read_listen_counters() -> Option<(u64, u64)> {
    listen_counters(&std::fs::read_to_string("/proc/net/netstat").ok()?)
}

/// TCP sockets in TIME-WAIT, from `TCP: inuse N orphan N tw N ...`.
pub fn time_wait(sockstat: &str) -> Option<u64> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "tw" {
            return words.next()?.parse().ok();
        }
    }
    None
}

pub fn read_time_wait() -> Option<u64> {
    time_wait(&std::fs::read_to_string("/proc/net/sockstat").ok()?)
}

/// (voluntary, involuntary) context switches from /proc/PID/status text.
pub fn context_switches(status: &str) -> (u64, u64) {
    let value = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        value("voluntary_ctxt_switches:"),
        value("nonvoluntary_ctxt_switches:"),
    )
}

/// How many times the process was scheduled in: the third number of
/// `/proc/PID/schedstat` (a tiny file where `status` is fifty lines the
/// kernel formats), `None` without schedstats.
pub fn read_timeslices(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    text.split_whitespace().nth(2)?.parse().ok()
}

pub fn read_context_switches(pid: i32) -> (u64, u64) {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| context_switches(&s))
        .unwrap_or((0, 0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_tcpext() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 312 315\nIpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(super::listen_counters(text), Some((312, 315)));
        assert_eq!(super::listen_counters("IpExt: A\nIpExt: 1\n"), None);
        assert!(
            super::read_listen_counters().is_some(),
            "this machine has /proc/net/netstat"
        );
    }

    #[test]
    fn parses_sockstat_and_status() {
        let sockstat = "sockets: used 15\nTCP: inuse 2 orphan 0 tw 131 alloc 2 mem 0\n";
        assert_eq!(super::time_wait(sockstat), Some(131));
        assert!(super::read_time_wait().is_some());
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(super::context_switches(status), (12, 3));
        let me = super::read_context_switches(std::process::id() as i32);
        assert!(me.0 + me.1 > 0);
        // Where the kernel keeps schedstats (Debian's do).
        if let Some(n) = super::read_timeslices(std::process::id() as i32) {
            assert!(n > 0);
        }
    }
}
