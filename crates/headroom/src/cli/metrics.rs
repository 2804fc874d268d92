//! `--metrics-listen` and `--metrics-push`: the live metrics of
//! `headroom_measure::prometheus` served at `/metrics` for a scrape, and
//! sent every 5 s (and at the end) with Prometheus remote write.

use super::args::MetricsArgs;
use anyhow::Context;
use headroom_measure::prometheus::{Exposition, LiveMetrics};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often remote write sends while the load runs.
pub const PUSH_EVERY: Duration = Duration::from_secs(5);

pub struct Exporter {
    pub metrics: LiveMetrics,
    server: Option<(Arc<tiny_http::Server>, JoinHandle<()>)>,
    pusher: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
    push_url: Option<String>,
    linger: Duration,
}

impl Exporter {
    /// Starts what the flags ask for; `None` when they ask for nothing.
    pub fn start(args: &MetricsArgs) -> anyhow::Result<Option<Exporter>> {
        if args.metrics_listen.is_none() && args.metrics_push.is_none() {
            return Ok(None);
        }
        let metrics = LiveMetrics::new();
        let server = match args.metrics_listen {
            None => None,
            Some(addr) => {
                let server = Arc::new(
                    tiny_http::Server::http(addr)
                        .map_err(|e| anyhow::anyhow!("--metrics-listen {addr}: {e}"))?,
                );
                let (s, m) = (server.clone(), metrics.clone());
                let handle = std::thread::Builder::new()
                    .name("headroom-metrics".into())
                    .spawn(move || serve(&s, &m))?;
                Some((server, handle))
            }
        };
        let pusher = match &args.metrics_push {
            None => None,
            Some(url) => {
                check_push_url(url)?;
                let stop = Arc::new(AtomicBool::new(false));
                let (s, m, u) = (stop.clone(), metrics.clone(), url.clone());
                let handle = std::thread::Builder::new()
                    .name("headroom-push".into())
                    .spawn(move || {
                        let mut next = Instant::now() + PUSH_EVERY;
                        while !s.load(Ordering::SeqCst) {
                            std::thread::sleep(Duration::from_millis(50));
                            if Instant::now() >= next {
                                next += PUSH_EVERY;
                                if let Err(e) = push(&u, &m) {
                                    eprintln!("headroom: --metrics-push: {e:#}");
                                }
                            }
                        }
                    })?;
                Some((stop, handle))
            }
        };
        Ok(Some(Exporter {
            metrics,
            server,
            pusher,
            push_url: args.metrics_push.clone(),
            linger: args.metrics_linger,
        }))
    }

    /// The load is over: the last push, one more scrape if asked to wait
    /// for it, then the endpoint closes.
    pub fn finish(self) -> anyhow::Result<()> {
        if let Some((stop, handle)) = self.pusher {
            stop.store(true, Ordering::SeqCst);
            let _ = handle.join();
        }
        let pushed = match &self.push_url {
            Some(url) => push(url, &self.metrics).context("--metrics-push: the final push"),
            None => Ok(()),
        };
        if let Some((server, handle)) = self.server {
            let (scraped, _) = self.metrics.counters();
            let deadline = Instant::now() + self.linger;
            while Instant::now() < deadline && self.metrics.counters().0 == scraped {
                std::thread::sleep(Duration::from_millis(20));
            }
            server.unblock();
            let _ = handle.join();
        }
        pushed
    }
}

fn serve(server: &tiny_http::Server, metrics: &LiveMetrics) {
    for request in server.incoming_requests() {
        let response = if request.url() == "/metrics" {
            // Prometheus asks for OpenMetrics first: it carries exemplars.
            let accept = request
                .headers()
                .iter()
                .find(|h| h.field.equiv("Accept"))
                .map(|h| h.value.as_str());
            let exposition = Exposition::accepted(accept);
            let header = tiny_http::Header::from_bytes("Content-Type", exposition.content_type())
                .expect("a valid header");
            tiny_http::Response::from_string(metrics.render_as(exposition)).with_header(header)
        } else {
            tiny_http::Response::from_string("headroom: metrics are at /metrics\n")
                .with_status_code(404)
        };
        let _ = request.respond(response);
    }
}

fn check_push_url(url: &str) -> anyhow::Result<()> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
        anyhow::bail!(
            "--metrics-push `{url}`: give an http:// or https:// URL, e.g. \
             http://127.0.0.1:9090/api/v1/write"
        );
    }
    Ok(())
}

/// One remote-write request of every series, now.
fn push(url: &str, metrics: &LiveMetrics) -> anyhow::Result<()> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let body = metrics.remote_write_body(now_ms);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    agent
        .post(url)
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .header(
            "User-Agent",
            concat!("headroom/", env!("CARGO_PKG_VERSION")),
        )
        .send(&body[..])
        .with_context(|| format!("POST {url}"))?;
    Ok(())
}

/// The exporter's last push and scrape, if there is one; a failure is a
/// warning — the measured results are already written.
pub fn finish(exporter: Option<Exporter>) {
    if let Some(Err(e)) = exporter.map(Exporter::finish) {
        eprintln!("headroom: warning: {e:#}");
    }
}
