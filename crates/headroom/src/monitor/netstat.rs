//! `/proc/net/netstat`'s TcpExt counters. procfs 0.17 parses
//! `/proc/net/snmp` but not this file, so this is the one hand parser: two
//! lines per group, names then values.

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
}
