//! Capacity search against servers of known capacity: the built-in target
//! with k app threads each holding a request for s = 100 ms serves at most
//! k/s requests per second; with `--queue Q` it answers 503 once Q wait.
//!
//! These searches load the machine lightly (tens of requests per second
//! against a server that sleeps), so they may run beside one another
//! (`light()`); the one that drives the generator to its limit runs alone.
//!
//! The service time is long and the latency bounds are generous (3 × s)
//! because the test machines are virtual and noisy: with 8–32 % of the CPU
//! stolen by the hypervisor, a 50 ms sleep was measured at p50 60 ms and
//! p90 92 ms, and up to 300 ms at worst. A search whose answer lies outside
//! the tolerance is run again, up to three times in all, each try printed:
//! noise comes and goes, a wrong search is wrong every time.

use crate::common::{
    capacity, ensure, headroom_bin, in_three_tries, light, serial, ProcessGuard, Target,
};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A confirmation no longer than a step, for the tests of something else
/// (those of the confirmation keep its default, 3 × the step): CI's time.
const CONFIRM_AS_A_STEP: [&str; 2] = ["--confirm-duration", "2s"];

/// Short steps keep the suite quick; the searches still bracket to 5 %.
const FAST: [&str; 6] = [
    "--step-duration",
    "2s",
    "--warmup",
    "1s",
    "--pause",
    "500ms",
];

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= tolerance * expected
}

/// The service time of every /sleep in this file.
const SERVICE_S: f64 = 0.100;
const SLEEP: &str = "/sleep?ms=100";

fn sleep_capacity(threads: u32, min: &str) -> (Value, String) {
    let target = Target::start(1, threads);
    let pid = target.guard.pid().to_string();
    let url = target.url(SLEEP);
    let mut args = vec![
        "--url",
        &url,
        "--slo",
        "p90<300ms,errors<5%",
        "--min",
        min,
        "--monitor-pid",
        &pid,
    ];
    args.extend(FAST);
    let run = capacity(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    (run.results().clone(), run.stdout.clone())
}

/// A rate search on `threads` app threads finds `threads / s` req/s:
/// the confirmed answer within −5 %…+2 % of it (issue 57's tolerance).
fn rate_capacity_of(threads: u32, min: &str) {
    in_three_tries(&format!("{threads} threads"), || {
        let (cap, stdout) = sleep_capacity(threads, min);
        let expected = threads as f64 / SERVICE_S;
        ensure!(cap["capacity"].is_number(), "no capacity\n{stdout}");
        let found = f(&cap["capacity"]);
        ensure!(
            found >= 0.95 * expected && found <= 1.02 * expected,
            "capacity {found} req/s, expected {expected} −5 %…+2 %\n{stdout}"
        );
        ensure!(cap["outcome"] == "found", "{}\n{stdout}", cap["outcome"]);
        assert_eq!(cap["axis"], "rate");
        assert_eq!(f(&cap["confirmed"]), found, "{stdout}");
        let [low, high] = [f(&cap["interval"][0]), f(&cap["interval"][1])];
        assert_eq!(low, found);
        assert!((high - low) / low <= 0.05 + 1e-9, "{low}..{high}");
        let steps = cap["steps"].as_array().unwrap();
        let counted: Vec<&Value> = steps
            .iter()
            .filter(|s| s.get("discarded").is_none())
            .collect();
        // The answer was confirmed by a longer run, which the last step is.
        let last = counted.last().unwrap();
        assert_eq!(
            (last["confirmation"] == true, f(&last["offered"])),
            (true, found),
            "{stdout}"
        );
        // Loads at or under the capacity passed by a majority of their
        // tries; loads above it failed so, or failed their confirmation
        // (at or above `high`); the answer was tried again.
        for s in &counted {
            // Every step carries its results in the shape of results.json.
            assert!(s["results"]["requests"]["total"].as_u64().unwrap() > 0);
            let load = f(&s["offered"]);
            let tries: Vec<bool> = counted
                .iter()
                .filter(|t| f(&t["offered"]) == load)
                .map(|t| t["passed"] == true)
                .collect();
            let passes = tries.iter().filter(|&&p| p).count();
            let majority_passed = 2 * passes > tries.len();
            if load <= low || load < high {
                assert_eq!(majority_passed, load <= low, "{load}: {tries:?}\n{stdout}");
            }
            if load == low {
                assert!(tries.len() >= 2, "{load} tried once\n{stdout}");
            }
        }
        // The server was watched; no resource ran out — its threads did.
        // (A machine kept busy by something else is noise: try again.)
        ensure!(cap["limited_by"] == "none_observed", "{stdout}");
        assert!(cap["knee"].is_number(), "{stdout}");
        assert!(stdout.contains("Answer: capacity"), "{stdout}");
        assert!(stdout.contains("Offered req/s"), "{stdout}");
        Ok(())
    });
}

#[test]
fn rate_capacity_of_2_threads_is_2_over_service_time() {
    let _light = light();
    rate_capacity_of(2, "7.5");
}

#[test]
fn rate_capacity_of_4_threads_is_4_over_service_time() {
    let _light = light();
    rate_capacity_of(4, "15");
}

/// Issue 57's case: 2 threads × 50 ms (40 req/s) under a generous
/// objective with 2 s steps, which once answered 57.5 req/s (a queue that
/// grows by 35 requests in a step is only 0.9 s of waiting). Loads the
/// server cannot sustain fail as `not sustained`, the answer is confirmed
/// over 6 s, and it lies within −5 %…+2 % of the truth.
#[test]
fn a_load_the_server_cannot_sustain_fails_however_good_its_p99() {
    let _light = light();
    in_three_tries("2 × 50 ms, p99<1s", || {
        let target = Target::start(1, 2);
        let url = target.url("/sleep?ms=50");
        let mut args = vec!["--url", &url, "--slo", "p99<1s,errors<1%"];
        args.extend(FAST);
        let run = capacity(&args);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let (cap, stdout) = (run.results(), &run.stdout);
        let found = f(&cap["capacity"]);
        ensure!(
            (38.0..=40.8).contains(&found),
            "capacity {found} req/s, the server holds 40\n{stdout}"
        );
        assert_eq!(f(&cap["confirmed"]), found, "{stdout}");
        assert_eq!(f(&cap["settings"]["confirm_duration_s"]), 6.0);
        // Some load failed on its backlog alone, its p99 under the bound.
        let steps = cap["steps"].as_array().unwrap();
        let backlog_only = steps.iter().find(|s| {
            s["backlog"]["sustained"] == false
                && s["checks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|c| c["passed"] == true)
        });
        ensure!(
            backlog_only.is_some(),
            "no step failed on its backlog alone\n{stdout}"
        );
        assert!(stdout.contains("not sustained"), "{stdout}");
        assert!(stdout.contains("(confirmation, 6s)"), "{stdout}");
        Ok(())
    });
}

/// The rule's false alarms: a server at 80 % of its capacity, its service
/// times spread (20–180 ms on 4 threads, 40 req/s), judged over 20
/// windows of 2 s of one run, as 20 steps would be: none is called
/// `not sustained`.
#[test]
fn a_steady_server_at_80_percent_passes_every_window() {
    let _light = light();
    let target = Target::start(1, 4);
    let url = target.url("/sleep?ms={{ random_int(20, 180) }}");
    let text = format!("[[request]]\nname = \"spread\"\nurl = \"{url}\"\n");
    let dir = crate::common::scenario_dir(&[("spread.toml", &text)]);
    let scenario = dir.path().join("spread.toml");
    let r = crate::common::run(&[scenario.to_str().unwrap(), "--rate", "32", "-d", "40s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results: headroom_records::Results = serde_json::from_value(r.results().clone()).unwrap();
    let judged: Vec<_> = (0..20)
        .map(|k| headroom_records::capacity::backlog::judge_window(&results.timeline, 2 * k, 2.0))
        .collect();
    let verdicts: Vec<bool> = judged
        .iter()
        .map(|b| b.as_ref().unwrap().sustained)
        .collect();
    assert_eq!(verdicts, vec![true; 20], "{judged:?}");
}

#[test]
fn queue_full_503s_are_found_by_an_error_objective() {
    let _light = light();
    // Like Passenger's request queue: 2 threads, 2 may wait, the rest get 503.
    let target = Target::start_with(&["--workers", "1", "--threads", "2", "--queue", "2"]);
    let url = target.url(SLEEP);
    let mut args = vec!["--url", &url, "--slo", "errors<5%", "--min", "7.5"];
    args.extend(FAST);
    args.extend(CONFIRM_AS_A_STEP);
    let mut run = None;
    in_three_tries("queue of 2", || {
        let r = capacity(&args);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let cap = r.results();
        // Errors stay under 5 % while the offer is under (2 / s) / 0.95.
        let expected = 2.0 / SERVICE_S / 0.95;
        ensure!(cap["capacity"].is_number(), "no capacity\n{}", r.stdout);
        let found = f(&cap["capacity"]);
        ensure!(
            within(found, expected, 0.10),
            "capacity {found}, expected {expected:.1} ±10 %\n{}",
            r.stdout
        );
        run = Some(r);
        Ok(())
    });
    let run = run.unwrap();
    let cap = run.results();
    let found = f(&cap["capacity"]);
    let failing: Vec<&Value> = cap["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["passed"] == false && f(&s["offered"]) > found)
        .collect();
    assert!(!failing.is_empty());
    for s in failing {
        assert!(s["results"]["status_codes"]["503"].as_u64().unwrap_or(0) > 0);
        let failed: Vec<&str> = s["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["passed"] == false)
            .map(|c| c["metric"].as_str().unwrap())
            .collect();
        assert!(failed.contains(&"errors"), "{failed:?}");
    }
}

#[test]
fn users_axis_finds_the_user_count_where_latency_passes_the_bound() {
    let _light = light();
    // 4 threads × 100 ms: with u users latency ≈ 100 ms × u / 4 past 4
    // users, so p90 < 320 ms holds up to 12 users.
    let target = Target::start(1, 4);
    let url = target.url(SLEEP);
    let mut args = vec![
        "--url",
        &url,
        "--axis",
        "users",
        "--slo",
        "p90<320ms",
        "--min",
        "2",
    ];
    args.extend(FAST);
    args.extend(CONFIRM_AS_A_STEP);
    in_three_tries("users axis", || {
        let run = capacity(&args);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let cap = run.results();
        assert_eq!(cap["axis"], "users");
        assert_eq!(cap["unit"], "users");
        ensure!(cap["capacity"].is_number(), "no capacity\n{}", run.stdout);
        let found = f(&cap["capacity"]);
        ensure!(
            within(found, 12.0, 0.10),
            "capacity {found} users\n{}",
            run.stdout
        );
        assert_eq!(found.fract(), 0.0);
        for s in cap["steps"].as_array().unwrap() {
            assert_eq!(s["results"]["config"]["model"], "closed");
            assert_eq!(f(&s["results"]["config"]["vus"]), f(&s["offered"]));
        }
        // No achieved-rate bound is added on the users axis.
        assert!(!cap["slo"].as_str().unwrap().contains("achieved"));
        Ok(())
    });
}

/// A p90<300ms search from 10 req/s on 4 threads × 100 ms (capacity 40
/// req/s), with short steps and `extra` flags; exit code 0 asserted.
fn search_4_threads(extra: &[&str]) -> crate::common::Run {
    let target = Target::start(1, 4);
    let url = target.url(SLEEP);
    let mut args = vec!["--url", &url, "--slo", "p90<300ms", "--min", "10"];
    args.extend(extra);
    args.extend(FAST);
    args.extend(CONFIRM_AS_A_STEP);
    let run = capacity(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    run
}

#[test]
fn stops_at_max_without_inventing_a_capacity() {
    let _light = light();
    in_three_tries("--max 30", || {
        let run = search_4_threads(&["--max", "30"]);
        let cap = run.results();
        let tries: Vec<(f64, bool)> = cap["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s.get("discarded").is_none())
            .map(|s| (f(&s["offered"]), s["passed"] == true))
            .collect();
        // Growth 10, 20, 30 (capacity 40); 30 passed, once more to be sure,
        // then the search stops. (A noisy machine may add a try; every load
        // still passes by a majority and nothing above 30 is tried.)
        ensure!(
            cap["outcome"] == "met_up_to_max",
            "{}: {tries:?}\n{}",
            cap["outcome"],
            run.stdout
        );
        let loads: std::collections::BTreeSet<u64> = tries.iter().map(|t| t.0 as u64).collect();
        assert!(
            [10, 20, 30].iter().all(|l| loads.contains(l)) && loads.last() == Some(&30),
            "{tries:?}"
        );
        for &load in &loads {
            let of_load: Vec<bool> = tries
                .iter()
                .filter(|t| t.0 as u64 == load)
                .map(|t| t.1)
                .collect();
            let passes = of_load.iter().filter(|&&p| p).count();
            assert!(2 * passes > of_load.len(), "{load}: {of_load:?}");
        }
        assert!(
            tries.iter().filter(|t| t.0 == 30.0).count() >= 2,
            "{tries:?}"
        );
        assert_eq!(tries.last(), Some(&(30.0, true)), "{tries:?}");
        assert_eq!(f(&cap["interval"][0]), 30.0);
        assert!(cap["interval"][1].is_null());
        assert!(
            run.stdout
                .contains("objective met up to the maximum tried (30 req/s)"),
            "{}",
            run.stdout
        );
        Ok(())
    });
}

#[test]
fn stops_at_max_time() {
    let _light = light();
    let run = search_4_threads(&["--max-time", "5s"]);
    let cap = run.results();
    assert_eq!(cap["outcome"], "time_limit", "{}", run.stdout);
    // One step of 1 s warm-up + 2 s fits in 5 s; a second does not.
    assert_eq!(cap["steps"].as_array().unwrap().len(), 1);
    assert!(f(&cap["elapsed_s"]) < 5.0, "{}", cap["elapsed_s"]);
    assert!(
        run.stdout.contains("time limit (5s) reached"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_generator_that_cannot_keep_up_is_reported_not_taken_for_the_server() {
    let _serial = serial();
    // One generator thread and 32 connections cannot offer 400 000 req/s:
    // the sends fall behind, which is the generator's limit.
    let target = Target::start(1, 4);
    let url = target.url("/hello");
    let mut args = vec![
        "--url",
        &url,
        "--slo",
        "p99<50ms",
        "--min",
        "400000",
        "--max",
        "400000",
        "--threads",
        "1",
        "--connections",
        "32",
        "--graceful-stop",
        "1s",
    ];
    args.extend(FAST);
    let run = capacity(&args);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let cap = run.results();
    assert_eq!(cap["outcome"], "generator_bound", "{}", run.stdout);
    assert_eq!(cap["generator_bound"], true);
    assert_eq!(cap["limited_by"], "generator");
    assert!(cap["capacity"].is_null());
    // A generator-bound step may be a passing hiccup: it is tried once
    // more; the second one in a row ends the search.
    let steps = cap["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{}", run.stdout);
    assert_eq!(steps[0]["discarded"], true);
    assert!(steps[1].get("discarded").is_none());
    assert_eq!(steps[0]["offered"], steps[1]["offered"]);
    assert!(
        run.stdout.contains("trying this load again"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("not a server capacity"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("GENERATOR-BOUND"), "{}", run.stdout);
}

#[test]
fn capacity_settings_come_from_the_scenario_and_bad_ones_are_located() {
    let _light = light();
    let target = Target::start(1, 4);
    let dir = crate::common::scenario_dir(&[(
        "cap.toml",
        &format!(
            "base_url = \"{}\"\n\n[[request]]\nname = \"sleep\"\npath = \"/sleep?ms=50\"\n\n\
             [capacity]\nslo = \"p90<300ms\"\nmin = 10\nmax = 20\nstep_duration = \"1s\"\n\
             warmup = \"0s\"\npause = \"0s\"\n",
            target.base
        ),
    )]);
    let file = dir.path().join("cap.toml");
    let run = capacity(&[file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let cap = run.results();
    assert_eq!(cap["outcome"], "met_up_to_max");
    assert_eq!(f(&cap["settings"]["step_duration_s"]), 1.0);
    assert!(cap["slo"].as_str().unwrap().starts_with("p90<300ms"));

    let bad = crate::common::scenario_dir(&[(
        "bad.toml",
        "base_url = \"http://127.0.0.1:9\"\n\n[[request]]\nname = \"a\"\npath = \"/\"\n\n\
         [capacity]\nslo = \"p90<500\"\naxis = \"sideways\"\n",
    )]);
    let file = bad.path().join("bad.toml");
    let run = capacity(&[file.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("bad.toml:8:"), "{}", run.stderr);
    assert!(run.stderr.contains("give a unit"), "{}", run.stderr);
    assert!(run.stderr.contains("bad.toml:9:"), "{}", run.stderr);
    assert!(run.stderr.contains("use rate or users"), "{}", run.stderr);

    // No objective anywhere: a clear error, no load sent.
    let run = capacity(&["--url", &target.url("/hello")]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("no objective: give --slo"),
        "{}",
        run.stderr
    );
    let run = capacity(&[
        "--url",
        &target.url("/hello"),
        "--slo",
        "p90<1s",
        "--rate",
        "5",
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--rate does not apply"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_search_killed_mid_way_leaves_every_finished_step_in_cap_json() {
    let _light = light();
    let target = Target::start(1, 4);
    let url = target.url("/sleep?ms=10");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.json");
    let child = Command::new(headroom_bin())
        .args([
            "capacity",
            "--url",
            &url,
            "--slo",
            "p90<500ms",
            "--min",
            "10",
        ])
        .args([
            "--step-duration",
            "1s",
            "--warmup",
            "0s",
            "--pause",
            "0s",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut headroom = ProcessGuard { child };
    // Wait for the snapshot after the second step, then kill -9: no chance
    // to write anything on the way out.
    let deadline = Instant::now() + Duration::from_secs(60);
    let steps_in = |v: &Value| v["steps"].as_array().map_or(0, Vec::len);
    let snapshot = loop {
        assert!(Instant::now() < deadline, "no snapshot with two steps");
        let read = std::fs::read_to_string(&out).ok();
        // The file is replaced by a rename, so it always parses.
        let v: Option<Value> = read.map(|t| serde_json::from_str(&t).expect("whole JSON"));
        if let Some(v) = v.filter(|v| steps_in(v) >= 2) {
            break v;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    unsafe { libc::kill(headroom.pid(), libc::SIGKILL) };
    let _ = headroom.child.wait();
    let cap: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(cap["outcome"], "in_progress");
    assert!(steps_in(&cap) >= steps_in(&snapshot));
    for step in cap["steps"].as_array().unwrap() {
        assert_eq!(step["passed"], true, "{step}");
        assert!(step["results"]["requests"]["total"].as_u64().unwrap() > 0);
    }
    assert_eq!(f(&cap["capacity"]), f(&cap["steps"][1]["offered"]));
    assert!(cap["verdict"]
        .as_str()
        .unwrap()
        .starts_with("search in progress after"));
}

/// `--processes 3`: every step a sharded run of three child processes on
/// one start, merged before the search decides: the known capacity of 4
/// threads × 100 ms (40 req/s) found within 5 %, as in one process.
#[test]
fn a_search_across_three_processes_finds_the_known_capacity() {
    let _light = light();
    in_three_tries("3 processes", || {
        let target = Target::start(1, 4);
        let before = target.requests();
        let pid = target.guard.pid().to_string();
        let url = target.url(SLEEP);
        let args = vec![
            "--url",
            &url,
            "--slo",
            "p90<300ms,errors<5%",
            // From 30 req/s: the step at 15 would only pass (a sharded
            // step costs ~9 s here: three processes start, and a load past
            // the capacity drains its queue).
            "--min",
            "30",
            "--monitor-pid",
            &pid,
            "--processes",
            "3",
            // The confirmation as long as a step: sharding is what is
            // tested here.
            "--confirm-duration",
            "4s",
            // Steps long enough that a load past the capacity builds a
            // queue the objective sees (2 s let 43 req/s pass).
            "--step-duration",
            "4s",
            "--warmup",
            "1s",
            "--pause",
            "500ms",
        ];
        let run = capacity(&args);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        let cap = run.results();
        let stdout = &run.stdout;
        ensure!(cap["capacity"].is_number(), "no capacity\n{stdout}");
        let found = f(&cap["capacity"]);
        let expected = 4.0 / SERVICE_S;
        ensure!(
            within(found, expected, 0.05),
            "capacity {found} req/s, expected {expected} ±5 %\n{stdout}"
        );
        // Every step is the merge of three shards, counted as the server
        // counted it (warm-ups included there).
        let steps = cap["steps"].as_array().unwrap();
        let mut measured = 0;
        for s in steps {
            let shards = s["results"]["meta"]["shards"].as_array().unwrap();
            assert_eq!(shards.len(), 3, "{s}");
            measured += s["results"]["requests"]["total"].as_u64().unwrap();
        }
        assert!(target.requests() - before > measured);
        Ok(())
    });
}

/// `headroom compare` of two searches: twice the threads is `better` (the
/// intervals apart), the other way round a regression (exit 1 with
/// `--fail-on-regression`), and a search is `noise` against itself.
#[test]
fn compare_tells_two_capacity_searches_apart_by_their_intervals() {
    let _light = light();
    let search = |threads: u32| {
        let target = Target::start(1, threads);
        let url = target.url("/sleep?ms=20");
        let args = [
            "--url",
            &url,
            "--slo",
            "p90<200ms",
            "--min",
            "20",
            "--precision",
            "20%",
            "--step-duration",
            "2s",
            "--warmup",
            "500ms",
            "--pause",
            "200ms",
            "--confirm-duration",
            "2s",
        ];
        let run = capacity(&args);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        run
    };
    // Both at once: two light searches on their own servers.
    let (one, two) = std::thread::scope(|s| {
        let one = s.spawn(|| search(1));
        let two = s.spawn(|| search(2));
        (one.join().unwrap(), two.join().unwrap())
    });
    let files = [one.results_path(), two.results_path()];
    let compare = |files: [&std::path::Path; 2], extra: &[&str]| {
        let out = Command::new(crate::common::headroom_bin())
            .arg("compare")
            .args(files)
            .args(extra)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        (
            out.status.code(),
            stdout + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, text) = compare(files, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("Capacity compared with"), "{text}");
    assert!(
        text.contains("better"),
        "{}\n{}\n{text}",
        one.stdout,
        two.stdout
    );
    let (code, text) = compare([files[1], files[0]], &["--fail-on-regression"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("WORSE") && text.contains("regressed"),
        "{text}"
    );
    let (code, text) = compare([files[0], files[0]], &["--fail-on-regression"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("noise"), "{text}");
}
