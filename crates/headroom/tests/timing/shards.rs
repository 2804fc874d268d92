//! Scale-out measured: three shards at 900 req/s in all, merged, equal one
//! unsharded run (exact count on the server, rate within 1 %); Ctrl-C to
//! `run --processes` stops every child and still merges what they measured.

use crate::common::{ensure, headroom_bin, in_three_tries, invoke, light, serial, Target};
use std::process::Command;
use std::time::Duration;

#[test]
fn three_shards_at_900_per_second_merge_into_one_run() {
    let _serial = serial();
    let target = Target::start(1, 8);
    in_three_tries("3 shards × 300 req/s", || {
        let before = target.requests();
        let dir = tempfile::tempdir().unwrap();
        let start = humantime::format_rfc3339_millis(
            std::time::SystemTime::now() + Duration::from_millis(1500),
        )
        .to_string();
        let url = target.url("/hello");
        let shards: Vec<_> = (1..=3)
            .map(|k| {
                let out = dir.path().join(format!("s{k}.json"));
                let child = Command::new(headroom_bin())
                    .args(["run", "--url", &url, "--rate", "900", "-d", "10s"])
                    .args(["--shard", &format!("{k}/3"), "--start-at", &start, "-q"])
                    .arg("--out")
                    .arg(&out)
                    .spawn()
                    .unwrap();
                (child, out)
            })
            .collect();
        let files: Vec<String> = shards
            .into_iter()
            .map(|(child, out)| {
                assert!(child.wait_with_output().unwrap().status.success());
                out.display().to_string()
            })
            .collect();
        let args: Vec<&str> = files.iter().map(String::as_str).collect();
        let merged = invoke("merge", &args, |_| {});
        assert_eq!(merged.code, 0, "{}", merged.stderr);
        let m = merged.results();
        assert_eq!(merged.total(), 9000);
        assert_eq!(target.requests() - before, 9000, "the server's count");
        let achieved = m["achieved_rate_rps"].as_f64().unwrap();
        let throughput = m["throughput_rps"].as_f64().unwrap();
        println!(
            "3 shards × 300 req/s for 10 s, merged: achieved {achieved:.2} req/s, \
             throughput {throughput:.2} req/s, p99 {} ms",
            m["latency_ms"]["p99"]
        );
        ensure!(
            (achieved - 900.0).abs() / 900.0 < 0.01,
            "achieved {achieved}"
        );
        ensure!(
            (throughput - 900.0).abs() / 900.0 < 0.01,
            "throughput {throughput}"
        );
        Ok(())
    });
}

#[test]
fn ctrl_c_stops_every_process_and_merges_what_they_measured() {
    let _light = light();
    let target = Target::start(1, 8);
    let before = target.requests();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let child = Command::new(headroom_bin())
        .args(["run", "--url", &target.url("/hello"), "--rate", "60"])
        .args(["-d", "60s", "--processes", "3", "-q", "--out"])
        .arg(&out)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130));
    let res: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(res["interrupted"], true);
    assert_eq!(
        res["meta"]["shards"].as_array().unwrap().len(),
        3,
        "every child's part"
    );
    let total = res["requests"]["total"].as_u64().unwrap();
    let not_sent = res["errors"]["not_sent"].as_u64().unwrap_or(0);
    assert!(
        total > 30 && total < 600,
        "{total} requests in ~3 s at 60/s"
    );
    assert_eq!(target.requests() - before, total - not_sent);
    // No child is left running.
    let url = target.url("/hello");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&url) && c.contains("--shard"))
        .collect();
    assert!(left.is_empty(), "children left running: {left:?}");
}
