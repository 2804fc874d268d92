//! Opening HTML reports in headless Chromium, offline: what the page
//! logged or fetched, the charts it drew, screenshots for people to see.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where screenshots are kept for people to look at after the tests.
pub fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub struct Opened {
    pub dom: String,
    /// Console messages the page logged.
    pub console: Vec<String>,
    /// Requests the page itself started (not Chromium's own background ones).
    pub page_requests: Vec<String>,
}

pub fn chromium_args(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-pings",
        // Chromium's own background requests must not leave the machine
        // either; loopback stays reachable (the live dashboard).
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// A screenshot of `page` with the reader's system in dark mode.
pub fn dark_screenshot(page: &Path, shot: &str) {
    dark_screenshot_of_url(
        &format!("file://{}", page.canonicalize().unwrap().display()),
        shot,
    );
}

/// A screenshot of the page at `url` (given 3 s of its own time to draw)
/// with the reader's system in dark mode.
pub fn dark_screenshot_of_url(url: &str, shot: &str) {
    let work = tempfile::tempdir().unwrap();
    let png = shots().join(shot);
    let out = Command::new("chromium")
        .args(chromium_args(&work.path().join("profile")))
        .args([
            "--window-size=1200,2400",
            "--hide-scrollbars",
            "--force-dark-mode",
            "--blink-settings=preferredColorScheme=0",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
}

/// Opens `page` in headless Chromium; saves a screenshot as `shot`.
pub fn open_in_chromium(page: &Path, shot: &str) -> Opened {
    let work = tempfile::tempdir().unwrap();
    let netlog = work.path().join("net.json");
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let output = Command::new("chromium")
        .args(chromium_args(&work.path().join("profile")))
        .args(["--enable-logging=stderr", "--v=0"])
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium is installed (apt-get install chromium; .ci/run does)");
    assert!(output.status.success(), "chromium failed: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let console = stderr
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .map(str::to_string)
        .collect();
    let log: Value = serde_json::from_str(&std::fs::read_to_string(&netlog).unwrap()).unwrap();
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].clone();
    let page_requests = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == start_job)
        .filter(|e| e["params"]["initiator"] != "not an origin")
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_string))
        .collect();

    let png = shots().join(shot);
    let status = Command::new("chromium")
        .args(chromium_args(&work.path().join("profile2")))
        .args(["--window-size=1200,2400", "--hide-scrollbars"])
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    assert!(
        std::fs::metadata(&png).unwrap().len() > 10_000,
        "screenshot {png:?}"
    );
    Opened {
        dom: String::from_utf8_lossy(&output.stdout).into(),
        console,
        page_requests,
    }
}

/// Each `<svg class="chart">` in the DOM Chromium built, with its data marks.
pub fn charts(dom: &str) -> Vec<(String, usize)> {
    let label = |chunk: &str| {
        chunk
            .split("aria-label=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("?")
            .to_string()
    };
    let svg = dom.split("<svg class=\"chart\"").skip(1).map(|chunk| {
        let svg = chunk.split("</svg>").next().unwrap_or("");
        (label(svg), svg.matches("class=\"pt ").count())
    });
    // Line charts drawn on a canvas say how many points they drew.
    let canvas = dom
        .split("<div class=\"chart uchart\"")
        .skip(1)
        .map(|chunk| {
            // (The attribute follows the chart's JSON, which may hold a '>'.)
            let points = chunk
                .split("data-points=\"")
                .nth(1)
                .and_then(|s| s.split('"').next()?.parse().ok())
                .unwrap_or(0);
            (label(chunk), points)
        });
    svg.chain(canvas).collect()
}

pub fn assert_clean(opened: &Opened, min_charts: usize) {
    assert!(opened.console.is_empty(), "console: {:?}", opened.console);
    assert!(
        opened.page_requests.is_empty(),
        "the page made requests: {:?}",
        opened.page_requests
    );
    let charts = charts(&opened.dom);
    assert!(charts.len() >= min_charts, "charts: {charts:?}");
    for (title, points) in &charts {
        assert!(*points > 0, "chart `{title}` drew no data points");
    }
}
