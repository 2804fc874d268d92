//! The built-in target as a server under test: its workers share the load
//! the way a pre-forking server's should.

use crate::common::{http_get, Target};
use std::io::{Read, Write};
use std::net::TcpStream;

#[test]
fn a_burst_of_connections_spreads_over_the_workers() {
    let target = Target::start(2, 1);
    let addr = target.url("").trim_start_matches("http://").to_string();
    // 64 keep-alive connections opened at once, each used once and held.
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        held.push(s);
    }
    for s in &mut held {
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    }
    let stats: serde_json::Value = serde_json::from_str(&http_get(&target.url("/stats"))).unwrap();
    let per_worker: Vec<u64> = stats["connections_per_worker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(per_worker.len(), 2, "{stats}");
    // 64 + the /stats connection. An even spread is 32 each; a quarter is
    // four standard deviations from it. Before each worker had its own
    // socket, one worker's accept loop took the whole burst.
    assert!(per_worker.iter().sum::<u64>() >= 64, "{stats}");
    assert!(per_worker.iter().all(|&n| n >= 16), "{stats}");
    drop(held);
}
