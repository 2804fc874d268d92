//! What the engine's integration tests share.

use headroom_sample_server::TargetConfig;

/// The in-process sample server (`threads` app threads) on a free loopback
/// port: its base URL. It serves until the test process ends.
pub fn sample_server(threads: u32) -> String {
    let server = headroom_sample_server::bind(&TargetConfig {
        listen: "127.0.0.1:0".into(),
        workers: 0,
        threads,
        public: false,
        backlog: 128,
        queue: None,
        request_log: None,
    })
    .expect("the sample server binds a free loopback port");
    let base = format!("http://{}", server.local);
    std::thread::spawn(move || server.serve());
    base
}
