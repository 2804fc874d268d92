//! `headroom import` against real servers: the example JMeter plan,
//! imported, sends what the plan describes (counted in nginx's access log);
//! a curl command imported sends what curl itself sends.

use crate::common::{headroom_bin, run, Nginx};
use std::collections::BTreeMap;
use std::process::Command;

/// "METHOD /path" of every request in nginx's access log, counted.
fn requests(nginx: &Nginx) -> BTreeMap<String, usize> {
    let log = std::fs::read_to_string(nginx.dir.path().join("access.log")).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in log.lines() {
        if let Some(req) = line.split('"').nth(1) {
            let mut words = req.split(' ');
            let key = format!(
                "{} {}",
                words.next().unwrap_or(""),
                words.next().unwrap_or("")
            );
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}

/// nginx answering every path with 200 "hello from nginx".
fn ok_nginx() -> Nginx {
    Nginx::start()
}

/// The example JMeter plan, imported and run against nginx, sends what
/// the plan describes: 4 users × 5 loops of its three samplers, the ids of
/// its CSV in turn, the header and the raw body. (Debian 12's JMeter 2.13
/// cannot load any plan — its xstream refuses `ScriptWrapper` — so the
/// side-by-side run with real JMeter waits for a JMeter 5 install.)
#[test]
fn an_imported_jmeter_plan_sends_what_the_plan_describes() {
    let examples =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/jmeter");
    let dir = tempfile::tempdir().unwrap();
    for f in ["plan.jmx", "ids.csv"] {
        std::fs::copy(examples.join(f), dir.path().join(f)).unwrap();
    }
    let scenario = dir.path().join("plan.toml");
    let o = Command::new(headroom_bin())
        .args(["import", "jmx"])
        .arg(dir.path().join("plan.jmx"))
        .arg("--out")
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&scenario).unwrap();
    assert!(text.starts_with("# Imported by headroom from"), "{text}");
    let nginx = ok_nginx();
    let base = nginx.url("").trim_end_matches('/').to_string();
    let r = run(&[scenario.to_str().unwrap(), "--base-url", &base]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.total(), 60);
    assert_eq!(
        r.results()["requests"]["failed"],
        0,
        "{}",
        r.results()["errors"]
    );
    let mut expected = BTreeMap::new();
    expected.insert("GET /hello".to_string(), 20);
    expected.insert("POST /login".to_string(), 20);
    for id in 101..=105 {
        expected.insert(format!("GET /item?id={id}"), 4);
    }
    assert_eq!(requests(&nginx), expected);
}

#[test]
fn an_imported_curl_command_sends_what_curl_sends() {
    let nginx = ok_nginx();
    let url = nginx.url("/api/items?page=2");
    let command = format!("curl -s -X PUT '{url}' -H 'X-Trace: 7' -d name=lamp -o /dev/null");
    assert!(Command::new("sh")
        .args(["-c", &command])
        .status()
        .unwrap()
        .success());
    let by_curl = requests(&nginx);
    let o = Command::new(headroom_bin())
        .args(["import", "curl", &command])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("curl.toml");
    std::fs::write(&scenario, &o.stdout).unwrap();
    let again = ok_nginx();
    let base = again.url("").trim_end_matches('/').to_string();
    let r = run(&[
        scenario.to_str().unwrap(),
        "--base-url",
        &base,
        "-n",
        "1",
        "-c",
        "1",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(requests(&again), by_curl);
}
