//! Scale-out: shards (`run --shard K/N`) that together are exactly the
//! plan, `headroom merge` that is exact and refuses what does not belong
//! together, and `run --processes P` — real processes against the built-in
//! target and nginx, counted on the server.

use crate::common::{headroom_bin, invoke, run, scenario_dir, Nginx, Run, Target};
use headroom_metrics::histogram;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A start time `secs` ahead, as RFC 3339 (what shards on several machines
/// would be given).
fn start_in(secs: f64) -> String {
    let now = std::time::SystemTime::now();
    let by = std::time::Duration::from_secs_f64(secs.abs());
    let at = if secs >= 0.0 { now + by } else { now - by };
    humantime::format_rfc3339_millis(at).to_string()
}

/// Runs the N shards of `args` in parallel with one shared start; returns
/// their results files (in `dir`) once all have finished.
fn run_shards(dir: &Path, count: u32, args: &[&str]) -> Vec<PathBuf> {
    let start = start_in(1.5);
    let children: Vec<_> = (1..=count)
        .map(|k| {
            let out = dir.join(format!("shard-{k}.json"));
            let child = Command::new(headroom_bin())
                .arg("run")
                .args(args)
                .args(["--shard", &format!("{k}/{count}"), "--start-at", &start])
                .arg("--out")
                .arg(&out)
                .arg("-q")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    children
        .into_iter()
        .map(|(child, out)| {
            let o = child.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "shard failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            out
        })
        .collect()
}

fn merge(files: &[PathBuf], extra: &[&str]) -> Run {
    let mut args: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    args.extend_from_slice(extra);
    invoke("merge", &args, |_| {})
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn total(v: &Value) -> u64 {
    v["requests"]["total"].as_u64().unwrap()
}

#[test]
fn open_model_shards_add_up_to_the_whole_schedule_on_the_target() {
    let target = Target::start(1, 8);
    let dir = tempfile::tempdir().unwrap();
    let before = target.requests();
    let url = target.url("/hello");
    let files = run_shards(dir.path(), 3, &["--url", &url, "--rate", "300", "-d", "2s"]);
    let shards: Vec<Value> = files.iter().map(|f| read(f)).collect();
    // 600 arrivals: n mod 3 gives each shard exactly 200.
    for (k, s) in shards.iter().enumerate() {
        assert_eq!(total(s), 200, "shard {}", k + 1);
        assert_eq!(s["shard"]["index"], k as u64 + 1);
        assert_eq!(s["shard"]["count"], 3);
        assert_eq!(s["shard"]["plan_hash"], shards[0]["shard"]["plan_hash"]);
        assert!(s["target_rate_rps"].as_f64().unwrap() - 100.0 < 1e-9);
    }
    let merged = merge(&files, &[]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let m = merged.results();
    assert_eq!(total(m), 600);
    assert_eq!(m["requests"]["ok"], 600);
    assert_eq!(target.requests() - before, 600, "the server's count");
    assert_eq!(m["target_rate_rps"].as_f64().unwrap().round(), 300.0);
    let timeline_sum: u64 = m["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(timeline_sum, 600, "the merged timeline adds up");
    assert_eq!(m["meta"]["shards"].as_array().unwrap().len(), 3);
    assert!(m.get("shard").is_none(), "a merged file is the whole plan");

    // Percentiles are the merged histograms', not an average of the shards'.
    let mut by_hand = histogram::new();
    for s in &shards {
        let h = histogram::from_base64(s["histograms"]["latency"].as_str().unwrap()).unwrap();
        histogram::add(&mut by_hand, &h);
    }
    for (field, q) in [("p50", 0.5), ("p99", 0.99), ("p999", 0.999)] {
        assert_eq!(
            m["latency_ms"][field].as_f64().unwrap(),
            histogram::ms(by_hand.value_at_quantile(q)),
            "{field}"
        );
    }
    assert_eq!(
        m["latency_ms"]["max"].as_f64().unwrap(),
        histogram::ms(by_hand.max())
    );

    // A merged file reads like any other.
    let html = dir.path().join("merged.html");
    let report = Command::new(headroom_bin())
        .arg("report")
        .arg(merged.results_path())
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(std::fs::read_to_string(&html).unwrap().contains("600"));
}

#[test]
fn closed_model_budgets_and_users_split_exactly_on_nginx() {
    let nginx = Nginx::start();
    let dir = tempfile::tempdir().unwrap();
    let url = nginx.url("/");
    // --requests 100 over 3 shards: 34 + 33 + 33.
    let files = run_shards(
        dir.path(),
        3,
        &["--url", &url, "--vus", "4", "--requests", "100"],
    );
    let totals: Vec<u64> = files.iter().map(|f| total(&read(f))).collect();
    assert_eq!(totals, [34, 33, 33]);
    let merged = merge(&files, &[]);
    assert_eq!(total(merged.results()), 100);
    assert_eq!(nginx.requests(), 100);

    // 5 users × 7 iterations over 2 shards: users 0, 2, 4 and 1, 3.
    let dir = tempfile::tempdir().unwrap();
    let files = run_shards(
        dir.path(),
        2,
        &["--url", &url, "--vus", "5", "--iterations", "7"],
    );
    let totals: Vec<u64> = files.iter().map(|f| total(&read(f))).collect();
    assert_eq!(totals, [21, 14]);
    assert_eq!(total(merge(&files, &[]).results()), 35);
    assert_eq!(nginx.requests(), 135);
}

#[test]
fn no_row_of_a_unique_or_sequential_feeder_is_used_by_two_shards() {
    for order in ["unique", "sequential"] {
        let nginx = Nginx::start();
        let rows: String = std::iter::once("id".to_string())
            .chain((1..=30).map(|i| format!("r{i}")))
            .collect::<Vec<_>>()
            .join("\n");
        let dir = scenario_dir(&[("ids.csv", &rows)]);
        let scenario = dir.path().join("s.toml");
        std::fs::write(
            &scenario,
            format!(
                r#"
base_url = "{}"
[load]
vus = 3
max_requests = 1000
[[feeder]]
name = "ids"
file = "ids.csv"
order = "{order}"
[[request]]
name = "get"
path = "/f?id={{{{id}}}}"
"#,
                nginx.url("")
            ),
        )
        .unwrap();
        let out = tempfile::tempdir().unwrap();
        let files = run_shards(out.path(), 3, &[scenario.to_str().unwrap()]);
        // Each shard runs until its share of the rows is used up.
        let totals: Vec<u64> = files.iter().map(|f| total(&read(f))).collect();
        assert_eq!(totals, [10, 10, 10], "{order}");
        let mut ids: Vec<String> = nginx
            .paths()
            .iter()
            .map(|p| p.trim_start_matches("/f?id=").to_string())
            .collect();
        ids.sort_by_key(|id| id[1..].parse::<u32>().unwrap());
        let want: Vec<String> = (1..=30).map(|i| format!("r{i}")).collect();
        assert_eq!(ids, want, "{order}: every row once");
    }
}

#[test]
fn merge_refuses_what_does_not_belong_together() {
    let target = Target::start(1, 4);
    let url = target.url("/hello");
    let a = tempfile::tempdir().unwrap();
    let files = run_shards(a.path(), 2, &["--url", &url, "--requests", "20"]);
    let b = tempfile::tempdir().unwrap();
    let other = run_shards(b.path(), 2, &["--url", &url, "--requests", "30"]);

    let refused = |files: &[PathBuf], extra: &[&str], says: &[&str]| {
        let r = merge(files, extra);
        assert_eq!(r.code, 2, "{:?} should be refused", files);
        for s in says {
            assert!(r.stderr.contains(s), "`{s}` not in: {}", r.stderr);
        }
        assert!(r.results.is_none(), "nothing is written");
    };
    let (one, two) = (files[0].clone(), files[1].clone());
    let file = |p: &PathBuf| p.display().to_string();
    refused(
        &[one.clone(), other[1].clone()],
        &[],
        &["different plans", &file(&one), &file(&other[1])],
    );
    let copy = a.path().join("copy.json");
    std::fs::copy(&one, &copy).unwrap();
    refused(&[one.clone(), copy.clone()], &[], &["both shard 1/2"]);
    refused(
        std::slice::from_ref(&one),
        &[],
        &["shard 2/2 missing", "--allow-partial"],
    );
    let whole = run(&["--url", &url, "--requests", "5"]);
    refused(
        &[whole.results_path().to_path_buf(), two.clone()],
        &[],
        &["is not a shard's results"],
    );
    let junk = a.path().join("junk.json");
    std::fs::write(&junk, r#"{"configurations": []}"#).unwrap();
    refused(
        &[junk, two.clone()],
        &[],
        &["is not a headroom results file"],
    );

    // With --allow-partial what there is is merged, and the gap said.
    let partial = merge(std::slice::from_ref(&one), &["--allow-partial"]);
    assert_eq!(partial.code, 0, "{}", partial.stderr);
    assert_eq!(total(partial.results()), 10);
    let warnings = partial.results()["warnings"].to_string();
    assert!(
        warnings.contains("partial merge: shard 2/2 missing"),
        "{warnings}"
    );
    let complete = merge(&[two, one], &[]);
    assert_eq!(total(complete.results()), 20);
}

#[test]
fn a_late_shard_counts_the_arrivals_it_missed_as_not_sent() {
    let target = Target::start(1, 4);
    let before = target.requests();
    let started_ago = start_in(-1.0);
    let r = run(&[
        "--url",
        &target.url("/hello"),
        "--rate",
        "100",
        "-d",
        "3s",
        "--start-at",
        &started_ago,
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let res = r.results();
    let late = res["start_at"]["late_ms"].as_f64().unwrap();
    assert!(late >= 1000.0, "late by {late} ms");
    // The whole schedule is accounted for: sent, or missed and said so.
    assert_eq!(r.total(), 300);
    let not_sent = r.error("not_sent");
    assert!(not_sent >= 100, "{not_sent} of the first second's arrivals");
    assert_eq!(target.requests() - before, 300 - not_sent);
    assert!(res["warnings"].to_string().contains("after --start-at"));
}

fn processes_run(args: &[&str]) -> (Output, Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = Command::new(headroom_bin())
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let v = std::fs::read_to_string(&out)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    (o, v, dir)
}

#[test]
fn processes_run_the_shards_and_print_one_summary() {
    let target = Target::start(1, 8);
    let before = target.requests();
    let (o, v, _dir) = processes_run(&[
        "--url",
        &target.url("/hello"),
        "--rate",
        "200",
        "-d",
        "2s",
        "--processes",
        "3",
        "--threshold",
        "errors<1%",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(total(&v), 400);
    assert_eq!(target.requests() - before, 400);
    assert_eq!(v["meta"]["shards"].as_array().unwrap().len(), 3);
    assert_eq!(stdout.matches("headroom run —").count(), 1, "{stdout}");
    assert!(
        stdout.contains("pass errors 0 % (bound errors<1%)"),
        "{stdout}"
    );
    // The generator figures are the parent's and its shards' together:
    // each shard process alone runs at least a worker, the signal and the
    // monitor threads.
    let most_threads = v["server"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["generator"]["threads"].as_u64())
        .max()
        .unwrap();
    assert!(
        most_threads >= 3 * 3 + 2,
        "{most_threads} generator threads"
    );
}

/// An aborting threshold is judged on the fleet's merged seconds, and
/// stops every shard: each writes what it measured, the merge says why
/// the run ended early, and the server saw exactly what the results count.
#[test]
fn a_fleet_abort_stops_every_shard_and_nothing_is_lost() {
    let target = Target::start(1, 8);
    let before = target.requests();
    let started = std::time::Instant::now();
    let (o, v, _dir) = processes_run(&[
        "--url",
        &target.url("/sleep?ms=5"),
        "--rate",
        "100",
        "-d",
        "60s",
        "--processes",
        "2",
        "--abort-on",
        "p99<1ms",
        "--abort-delay",
        "2s",
        "--abort-window",
        "1s",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the fleet breached p99<1ms"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "not stopped");
    let abort = &v["abort"];
    assert_eq!(abort["threshold"], "p99<1ms", "{v}");
    let at = abort["at_s"].as_f64().unwrap();
    // Both shards stopped within 2 s of the fleet's verdict: neither's
    // timeline goes on past it.
    let seconds = v["timeline"].as_array().unwrap().len() as f64;
    assert!(
        seconds <= at + 2.0,
        "{seconds} s of timeline, abort at {at} s"
    );
    assert_eq!(v["interrupted"], false);
    assert_eq!(v["meta"]["shards"].as_array().unwrap().len(), 2);
    // Every request head written reached the server (one cut off by the
    // stop is counted apart, as not delivered).
    assert_eq!(target.requests() - before, attempts(&v));
}

fn attempts(v: &Value) -> u64 {
    v["requests"]["attempts"].as_u64().unwrap()
}

/// `--processes 1` is the run itself (it once failed: the one child's
/// results, shard 1/1, carry no shard to merge).
#[test]
fn one_process_is_the_run_itself() {
    let target = Target::start(1, 2);
    let before = target.requests();
    let (o, v, _dir) = processes_run(&[
        "--url",
        &target.url("/hello"),
        "-n",
        "50",
        "-c",
        "2",
        "--processes",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(total(&v), 50);
    assert_eq!(target.requests() - before, 50);
}

#[test]
fn local_addresses_spread_connections_over_source_addresses() {
    let nginx = Nginx::start();
    let r = run(&[
        "--url",
        &nginx.url("/"),
        "--vus",
        "6",
        "--requests",
        "60",
        "--no-keepalive",
        "--local-address",
        "127.0.0.2-127.0.0.4",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.total(), 60);
    let log = std::fs::read_to_string(nginx.dir.path().join("access.log")).unwrap();
    let mut sources: Vec<&str> = log.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(sources.len(), 60);
    sources.sort();
    sources.dedup();
    assert_eq!(sources, ["127.0.0.2", "127.0.0.3", "127.0.0.4"]);
}

/// Network namespaces made for one test, deleted (with their links) when
/// it ends, pass or fail.
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A server host and three generator hosts, as network namespaces joined
/// by a bridge in the server's: 10.213.0.1 (server), .11 .12 .13. The
/// addresses exist only inside the namespaces.
fn four_hosts(tag: &str) -> Result<Namespaces, String> {
    let server = format!("hr-{tag}-srv");
    let mut made = Namespaces(Vec::new());
    ip(&["netns", "add", &server])?;
    made.0.push(server.clone());
    let in_server = |args: &[&str]| {
        let mut all = vec!["-n", server.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    };
    in_server(&["link", "add", "br0", "type", "bridge"])?;
    in_server(&["addr", "add", "10.213.0.1/24", "dev", "br0"])?;
    in_server(&["link", "set", "br0", "up"])?;
    in_server(&["link", "set", "lo", "up"])?;
    for i in 1..=3 {
        let host = format!("hr-{tag}-g{i}");
        ip(&["netns", "add", &host])?;
        made.0.push(host.clone());
        let (outer, inner) = (format!("hr{tag}g{i}a"), format!("hr{tag}g{i}b"));
        ip(&[
            "-n", &host, "link", "add", &inner, "type", "veth", "peer", "name", &outer, "netns",
            &server,
        ])?;
        ip(&[
            "-n",
            &host,
            "addr",
            "add",
            &format!("10.213.0.{}/24", 10 + i),
            "dev",
            &inner,
        ])?;
        ip(&["-n", &host, "link", "set", &inner, "up"])?;
        ip(&["-n", &host, "link", "set", "lo", "up"])?;
        in_server(&["link", "set", &outer, "master", "br0"])?;
        in_server(&["link", "set", &outer, "up"])?;
    }
    Ok(made)
}

#[test]
fn shards_on_three_hosts_share_one_start_and_add_up() {
    let tag = format!("{}", std::process::id() % 100_000);
    // It needs root to make network namespaces (CI runs as root, with
    // iproute2): a machine that cannot make them fails this test rather
    // than passing it unrun.
    let hosts = four_hosts(&tag).unwrap_or_else(|why| {
        panic!("cannot make network namespaces here ({why}): this test needs root (CAP_SYS_ADMIN) and iproute2")
    });
    let server_ns = hosts.0[0].clone();
    let port = crate::common::free_port();
    let listen = format!("10.213.0.1:{port}");
    let target = crate::common::ProcessGuard {
        child: Command::new("ip")
            .args(["netns", "exec", &server_ns, headroom_bin(), "target"])
            .args(["--listen", &listen, "--public", "--threads", "8"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    };
    let stats_url = format!("http://{listen}/stats");
    let served = || -> Option<u64> {
        let out = Command::new("ip")
            .args(["netns", "exec", &server_ns, "python3", "-c"])
            .arg(format!(
                "import urllib.request; print(urllib.request.urlopen('{stats_url}').read().decode())"
            ))
            .output()
            .ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        v["requests"].as_u64()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let before = loop {
        if let Some(n) = served() {
            break n;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the target did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };

    let dir = tempfile::tempdir().unwrap();
    let start = start_in(2.0);
    let url = format!("http://{listen}/hello");
    let shards: Vec<_> = (1..=3)
        .map(|k| {
            let out = dir.path().join(format!("shard-{k}.json"));
            let child = Command::new("ip")
                .args(["netns", "exec", &hosts.0[k], headroom_bin(), "run"])
                .args(["--url", &url, "--rate", "300", "-d", "2s", "-q"])
                .args(["--shard", &format!("{k}/3"), "--start-at", &start])
                .arg("--out")
                .arg(&out)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let files: Vec<PathBuf> = shards
        .into_iter()
        .map(|(child, out)| {
            let o = child.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            out
        })
        .collect();
    let merged = merge(&files, &[]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let m = merged.results();
    assert_eq!(total(m), 600);
    assert_eq!(m["requests"]["ok"], 600);
    assert_eq!(served().unwrap() - before, 600, "the server's count");
    for (k, s) in m["meta"]["shards"].as_array().unwrap().iter().enumerate() {
        assert_eq!(s["shard"], format!("{}/3", k + 1));
        assert_eq!(s["requests"], 200);
    }
    drop(target);
}

/// Shards started by hand report to `headroom fleet` over HTTP: its live
/// seconds are the merged timeline's, its merge is the server's count, and
/// an aborting threshold breached by the fleet stops every shard.
#[test]
fn hand_started_shards_report_to_a_coordinator_that_judges_the_fleet() {
    let target = Target::start(1, 8);
    for abort in [false, true] {
        let before = target.requests();
        let dir = tempfile::tempdir().unwrap();
        let url = target.url("/sleep?ms=3");
        let port = crate::common::free_port();
        let dash = crate::common::free_port();
        let merged = dir.path().join("merged.json");
        let mut flags = vec!["--rate", "100", "-d", if abort { "60s" } else { "4s" }];
        if abort {
            flags.extend(crate::common::ABORT_AT_ONCE);
        }
        let listen = format!("127.0.0.1:{port}");
        let mut coordinator = crate::common::ProcessGuard {
            child: Command::new(headroom_bin())
                .args(["fleet", &url, "--shards", "2", "--listen", &listen])
                .args(["--out", merged.to_str().unwrap(), "--progress", "never"])
                .args([
                    &format!("--dashboard=127.0.0.1:{dash}"),
                    "--dashboard-linger",
                    "5s",
                ])
                .arg("--")
                .args(&flags)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        };
        crate::common::wait_for_port(port);
        let start =
            humantime::format_rfc3339_millis(std::time::SystemTime::now() + Duration::from_secs(2))
                .to_string();
        let report_to = format!("http://{listen}");
        let shards: Vec<_> = (1..=2)
            .map(|k| {
                let out = dir.path().join(format!("s{k}.json"));
                let child = Command::new(headroom_bin())
                    .args(["run", &url])
                    .args(&flags)
                    .args(["--shard", &format!("{k}/2"), "--start-at", &start])
                    .args(["--report-to", &report_to, "-q", "--out"])
                    .arg(&out)
                    .spawn()
                    .unwrap();
                (crate::common::ProcessGuard { child }, out)
            })
            .collect();
        let events = crate::dashboard::events_until_end(dash, Duration::from_secs(60), "no end");
        let code = loop {
            if let Some(s) = coordinator.child.try_wait().unwrap() {
                break s.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(coordinator.child.stderr.as_mut().unwrap(), &mut stderr)
            .unwrap();
        for (mut s, _) in shards {
            // The shards' own exit code never carries the fleet's verdict.
            assert_eq!(s.child.wait().unwrap().code(), Some(0), "{stderr}");
        }
        let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
        assert_eq!(m["meta"]["shards"].as_array().unwrap().len(), 2, "{stderr}");
        assert_eq!(target.requests() - before, attempts(&m), "nothing lost");
        let timeline = m["timeline"].as_array().unwrap();
        let seconds = events.iter().filter(|e| e["kind"] == "second").count();
        assert_eq!(seconds, timeline.len(), "every second, the last ones too");
        for s in events.iter().filter(|e| e["kind"] == "second") {
            let t = s["t_s"].as_u64().unwrap() as usize;
            assert_eq!(s["requests"], timeline[t - 1]["requests"], "second {t}");
        }
        if abort {
            assert_eq!(code, Some(1), "{stderr}");
            assert!(stderr.contains("the fleet breached p99<1ms"), "{stderr}");
            let at = m["abort"]["at_s"].as_f64().unwrap();
            assert!(
                timeline.len() as f64 <= at + 2.0,
                "{} s, abort at {at}",
                timeline.len()
            );
        } else {
            assert_eq!(code, Some(0), "{stderr}");
            assert_eq!(total(&m), 400);
        }
    }
}

/// POST `body` to the coordinator at `listen` as a forged client: the status.
fn forged_post(listen: &str, path: &str, session: Option<&str>, body: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(listen).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let session = session.map_or(String::new(), |v| format!("X-Headroom-Session: {v}\r\n"));
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {listen}\r\n{session}Content-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 12];
    std::io::Read::read_exact(&mut s, &mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// A coordinator takes shard K from one process: once the real shard has
/// reported, a forged stream claiming the same shard — a second process,
/// with or without a session of its own — is refused (409), its lines and
/// its results alike, and the merge is the real shard's, equal to the
/// server's count.
#[test]
fn a_coordinator_refuses_a_second_process_claiming_a_shard() {
    let target = Target::start(1, 4);
    let dir = tempfile::tempdir().unwrap();
    let url = target.url("/hello");
    let listen = format!("127.0.0.1:{}", crate::common::free_port());
    let merged = dir.path().join("merged.json");
    let flags = ["--rate", "50", "-d", "4s"];
    let mut coordinator = crate::common::ProcessGuard {
        child: Command::new(headroom_bin())
            .args(["fleet", &url, "--shards", "2", "--listen", &listen])
            .args([
                "--out",
                merged.to_str().unwrap(),
                "--progress",
                "never",
                "--",
            ])
            .args(flags)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    };
    crate::common::wait_for_port(listen.rsplit(':').next().unwrap().parse().unwrap());
    // The shard's first POST (its hello) leaves as it starts, 3 s before
    // its load: once the server has seen requests, the shard is known.
    let start =
        humantime::format_rfc3339_millis(std::time::SystemTime::now() + Duration::from_secs(3))
            .to_string();
    let shards: Vec<_> = (1..=2)
        .map(|k| crate::common::ProcessGuard {
            child: Command::new(headroom_bin())
                .args(["run", &url])
                .args(flags)
                .args(["--shard", &format!("{k}/2"), "--start-at", &start, "-q"])
                .args(["--report-to", &format!("http://{listen}"), "--out"])
                .arg(dir.path().join(format!("s{k}.json")))
                .spawn()
                .unwrap(),
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while target.requests() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the shard never loaded the server"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let line = r#"{"headroom_fleet":"hello","shard":1,"of":2,"version":"0.1.0"}"#;
    assert_eq!(
        forged_post(&listen, "/shards/1/report", Some("forged"), line),
        409
    );
    assert_eq!(forged_post(&listen, "/shards/1/report", None, line), 409);
    assert_eq!(
        forged_post(&listen, "/shards/1/results", Some("forged"), "{}"),
        409
    );

    for mut shard in shards {
        assert_eq!(shard.child.wait().unwrap().code(), Some(0));
    }
    let code = coordinator.child.wait().unwrap().code();
    let mut stderr = String::new();
    std::io::Read::read_to_string(coordinator.child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("refused a POST for shard 1/2 from another process"),
        "{stderr}"
    );
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert_eq!(total(&m), 200, "{stderr}");
    assert_eq!(target.requests(), attempts(&m));
}
