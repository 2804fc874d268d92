//! `--dashboard`: a live page for a run, served by headroom itself — one
//! self-contained HTML file (uPlot embedded, nothing fetched from the
//! network), fed by server-sent events from [`Feed`], with a stop button.
//! Loopback only unless a token is given; the token is checked on every
//! request and never printed. Without a token, a request must name a
//! loopback host (a page whose name was rebound to 127.0.0.1 is refused),
//! and with or without one, a browser's POST must come from the page
//! itself (another site's form or script is refused: no cross-site stop).

use super::args::DashboardArgs;
use headroom_engine::stop::Phase;
use headroom_engine::StopSignal;
use headroom_measure::dashboard::Feed;
use headroom_study::Skips;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The page, with uPlot (MIT) and the chart code the HTML report draws
/// with put inline, so it opens with no network at all.
fn page() -> String {
    use headroom_report::html::charts::{CHARTS_JS, UPLOT_CSS, UPLOT_JS};
    include_str!("../../assets/dashboard/dashboard.html")
        .replace("/*UPLOT_CSS*/", UPLOT_CSS)
        .replace("/*UPLOT_JS*/", UPLOT_JS)
        .replace("/*CHARTS_JS*/", CHARTS_JS)
}

pub struct Dashboard {
    pub feed: Feed,
    server: Arc<tiny_http::Server>,
    handle: JoinHandle<()>,
    over: Arc<AtomicBool>,
    linger: Duration,
    stop: StopSignal,
}

impl Dashboard {
    /// Starts serving when `--dashboard` asks for it; prints the URL.
    /// `target` is what the page names as the run's target; `skips`, a
    /// study's, lets the page skip a configuration.
    pub fn start(
        args: &DashboardArgs,
        stop: &StopSignal,
        target: &str,
        skips: Option<Skips>,
    ) -> anyhow::Result<Option<Dashboard>> {
        let Some(addr) = args.dashboard else {
            return Ok(None);
        };
        check_address(addr, args.dashboard_token.as_deref())?;
        let server = Arc::new(
            tiny_http::Server::http(addr)
                .map_err(|e| anyhow::anyhow!("--dashboard {addr}: {e}"))?,
        );
        let bound = server
            .server_addr()
            .to_ip()
            .map_or(addr.to_string(), |a| a.to_string());
        let token_hint = if args.dashboard_token.is_some() {
            "?token=…"
        } else {
            ""
        };
        eprintln!("headroom: live dashboard at http://{bound}/{token_hint}");
        let feed = Feed::new();
        let over = Arc::new(AtomicBool::new(false));
        let start = serde_json::json!({"kind": "start", "target": target}).to_string();
        let serving = Serving {
            feed: feed.clone(),
            stop: stop.clone(),
            token: args.dashboard_token.clone(),
            over: over.clone(),
            start,
            page: Arc::new(page()),
            skips,
        };
        let s = server.clone();
        let handle = std::thread::Builder::new()
            .name("headroom-dashboard".into())
            .spawn(move || serving.serve(&s))?;
        Ok(Some(Dashboard {
            feed,
            server,
            handle,
            over,
            linger: args.dashboard_linger,
            stop: stop.clone(),
        }))
    }

    /// The run is over (its final event in the feed): the page stays up
    /// for `--dashboard-linger`, then the server closes. Ctrl-C or SIGTERM
    /// ends the wait (a second one, when the run was stopped by one).
    pub fn finish(self) {
        self.feed.close();
        // The streams' moment to send the last events.
        std::thread::sleep(Duration::from_millis(200));
        let until = Instant::now() + self.linger;
        let interrupted = self.stop.was_interrupted();
        let told_to_go = || {
            if interrupted {
                self.stop.phase() == Phase::Abort
            } else {
                self.stop.was_interrupted()
            }
        };
        while Instant::now() < until && !told_to_go() {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.over.store(true, Ordering::SeqCst);
        self.server.unblock();
        let _ = self.handle.join();
    }
}

/// A capacity search's step, started or finished, for the page.
pub fn capacity_event(feed: &Feed, event: &headroom_capacity::Event, unit: &str) {
    use headroom_capacity::Event;
    match event {
        Event::Starting {
            index,
            load,
            retest,
            confirmation,
        } => feed.event(serde_json::json!({
            "kind": "step_start", "index": index, "load": load, "unit": unit, "retest": retest,
            "confirmation": confirmation.is_some(),
        })),
        Event::Finished(step) => {
            let r = step.results.as_ref();
            let latency = r.map(|r| &r.summary.latency_ms);
            feed.event(serde_json::json!({
                "kind": "step",
                "index": step.index,
                "offered": step.offered,
                "unit": unit,
                "achieved": step.achieved,
                "passed": step.passed,
                "retest": step.retest,
                "confirmation": step.confirmation,
                "discarded": step.discarded,
                "p90_ms": latency.map(|l| l.p90),
                "p99_ms": latency.map(|l| l.p99),
                "error_pct": r.map_or(0.0, |r| r.summary.requests.error_rate * 100.0),
                "failed": step.failed_checks(),
            }));
        }
        // Where latency bends, as the steps so far place it.
        Event::Snapshot(so_far) => feed.event(serde_json::json!({
            "kind": "knee", "knee": so_far.knee, "metric": so_far.knee_metric,
        })),
    }
}

/// A dashboard that can stop the run must not be reachable from the
/// network without a token.
fn check_address(addr: SocketAddr, token: Option<&str>) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() && token.is_none_or(str::is_empty) {
        anyhow::bail!(
            "--dashboard {addr}: not a loopback address; anyone who reaches it could stop the \
             run — give --dashboard-token TOKEN, or serve on 127.0.0.1"
        );
    }
    Ok(())
}

struct Serving {
    feed: Feed,
    stop: StopSignal,
    token: Option<String>,
    over: Arc<AtomicBool>,
    /// The first event of every stream (the run's target).
    start: String,
    page: Arc<String>,
    skips: Option<Skips>,
}

impl Serving {
    fn serve(&self, server: &tiny_http::Server) {
        let mut streams = Vec::new();
        for mut request in server.incoming_requests() {
            if let Err(why) = self.refuse_other_sites(&request) {
                eprintln!(
                    "headroom: dashboard: refused {} {}: {why}",
                    request.method(),
                    request.url().split('?').next().unwrap_or("")
                );
                let _ = request.respond(
                    tiny_http::Response::from_string(format!("{why}\n")).with_status_code(403),
                );
                continue;
            }
            if !self.authorised(&request) {
                let _ = request.respond(
                    tiny_http::Response::from_string("a token is needed\n").with_status_code(401),
                );
                continue;
            }
            let path = request.url().split('?').next().unwrap_or("").to_string();
            match (request.method(), path.as_str()) {
                (tiny_http::Method::Get, "/") => {
                    let html =
                        tiny_http::Header::from_bytes("Content-Type", "text/html; charset=utf-8")
                            .expect("a valid header");
                    let _ = request.respond(
                        tiny_http::Response::from_string(self.page.as_str()).with_header(html),
                    );
                }
                (tiny_http::Method::Get, "/events") => {
                    let (feed, over, start) =
                        (self.feed.clone(), self.over.clone(), self.start.clone());
                    // A thread per browser: each waits on the feed.
                    if let Ok(t) = std::thread::Builder::new()
                        .name("headroom-dashboard-stream".into())
                        .spawn(move || stream(request, &feed, &over, &start))
                    {
                        streams.push(t);
                    }
                }
                (tiny_http::Method::Post, "/stop") => {
                    self.stop.interrupt("stopped from the dashboard".into());
                    let _ = request.respond(tiny_http::Response::from_string("stopping\n"));
                }
                // The body is the configuration's label.
                (tiny_http::Method::Post, "/skip") if self.skips.is_some() => {
                    let mut label = String::new();
                    let read = request.as_reader().take(4096).read_to_string(&mut label);
                    let answer = match (read, &self.skips) {
                        (Ok(_), Some(skips)) if skips.skip(label.trim()) => {
                            tiny_http::Response::from_string("skipping\n")
                        }
                        _ => tiny_http::Response::from_string(format!(
                            "no configuration labelled {:?}\n",
                            label.trim()
                        ))
                        .with_status_code(404),
                    };
                    let _ = request.respond(answer);
                }
                (tiny_http::Method::Get, "/report") => {
                    let answer = match self.feed.report() {
                        Some(html) => tiny_http::Response::from_string(html).with_header(
                            tiny_http::Header::from_bytes(
                                "Content-Type",
                                "text/html; charset=utf-8",
                            )
                            .expect("a valid header"),
                        ),
                        None => tiny_http::Response::from_string("no report yet\n")
                            .with_status_code(404),
                    };
                    let _ = request.respond(answer);
                }
                _ => {
                    let _ = request.respond(
                        tiny_http::Response::from_string("not found\n").with_status_code(404),
                    );
                }
            }
        }
        for t in streams {
            let _ = t.join();
        }
    }

    /// Refuses what a browser sends on another site's behalf: without a
    /// token, a `Host` that is not loopback (DNS rebinding: a name the
    /// attacker controls, answered with 127.0.0.1, reaches this port as
    /// the attacker's origin); and a POST whose `Origin` is not this page's
    /// (cross-site request forgery: another site's form posting to /stop).
    /// A client that is not a browser (curl) sends no `Origin` and is
    /// judged by the token alone.
    fn refuse_other_sites(&self, request: &tiny_http::Request) -> Result<(), String> {
        let header = |name: &'static str| {
            (request.headers().iter())
                .find(|h| h.field.equiv(name))
                .map(|h| h.value.as_str().to_string())
        };
        let host = header("Host").unwrap_or_default();
        if self.token.is_none() && !is_loopback_host(&host) {
            return Err(format!(
                "Host {host:?} is not a loopback name (a rebound DNS name?); this dashboard \
                 answers 127.0.0.1, [::1] and localhost only (or give --dashboard-token)"
            ));
        }
        if *request.method() != tiny_http::Method::Get {
            if let Some(origin) = header("Origin") {
                // https: the page served through a TLS-terminating proxy.
                let own = [format!("http://{host}"), format!("https://{host}")];
                if !own.contains(&origin) {
                    return Err(format!(
                        "a {} from the page of {origin:?}, not this dashboard's",
                        request.method()
                    ));
                }
            }
            if header("Sec-Fetch-Site").is_some_and(|s| s != "same-origin" && s != "none") {
                return Err(format!("a {} from another site", request.method()));
            }
        }
        Ok(())
    }

    /// With a token: `?token=` or `Authorization: Bearer`.
    fn authorised(&self, request: &tiny_http::Request) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let in_query = request
            .url()
            .split_once('?')
            .map(|(_, q)| q.split('&').any(|kv| kv == format!("token={token}")))
            .unwrap_or(false);
        let in_header = request.headers().iter().any(|h| {
            h.field.equiv("Authorization") && h.value.as_str() == format!("Bearer {token}")
        });
        in_query || in_header
    }
}

/// `127.0.0.1:5665`, `localhost`, `[::1]:5665`: a name that can only mean
/// this machine (not a DNS name that resolves to it today).
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// One browser's event stream: the history, then each second as it
/// comes, until the final event (or the dashboard closes).
fn stream(request: tiny_http::Request, feed: &Feed, over: &AtomicBool, start: &str) {
    let mut out = request.into_writer();
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut send = |event: &str| {
        out.write_all(format!("data: {event}\n\n").as_bytes())
            .and_then(|()| out.flush())
            .is_ok()
    };
    if !send(start) {
        return;
    }
    let mut next = 0;
    loop {
        let (events, after, done) = feed.events_from(next, Duration::from_millis(500));
        next = after;
        for e in &events {
            if !send(e) {
                return;
            }
        }
        if done && events.is_empty() || over.load(Ordering::SeqCst) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_this_machine_are_loopback_hosts() {
        for host in [
            "127.0.0.1:5665",
            "127.0.0.2",
            "localhost:80",
            "LOCALHOST",
            "[::1]:5665",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "evil.example:5665",
            "127.0.0.1.nip.io:5665",
            "[::2]:1",
            "10.0.0.1:5665",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn only_loopback_goes_without_a_token() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(check_address(a("127.0.0.1:5665"), None).is_ok());
        assert!(check_address(a("[::1]:5665"), None).is_ok());
        let e = check_address(a("0.0.0.0:5665"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--dashboard-token"), "{e}");
        assert!(check_address(a("0.0.0.0:5665"), Some("")).is_err());
        assert!(check_address(a("0.0.0.0:5665"), Some("s3cret")).is_ok());
    }

    #[test]
    fn the_page_is_whole_and_needs_no_network() {
        let page = page();
        assert!(!page.contains("/*UPLOT_JS*/") && !page.contains("/*UPLOT_CSS*/"));
        assert!(!page.contains("/*CHARTS_JS*/") && page.contains("headroomCharts"));
        assert!(page.contains("uPlot"));
        for outside in ["http://", "https://", "//cdn"] {
            assert!(
                !page.contains(&format!("src=\"{outside}")),
                "the page loads {outside}"
            );
        }
    }
}
