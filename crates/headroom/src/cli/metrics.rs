//! `--metrics-listen`, `--metrics-push` and `--otlp`: the live metrics of
//! `headroom_measure::prometheus` served at `/metrics` for a scrape, and
//! sent every 5 s (and at the end) with Prometheus remote write and as
//! OTLP to an OpenTelemetry collector (with a traced run's exemplars as
//! spans).

use super::args::MetricsArgs;
use anyhow::Context;
use headroom_measure::otlp;
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
    pushes: Arc<Pushes>,
    linger: Duration,
}

/// Where the figures are sent: remote write, an OTLP collector.
struct Pushes {
    remote_write: Option<String>,
    /// The collector's base URL, and when the exporter started (the
    /// cumulative figures' start time).
    otlp: Option<(String, u64)>,
}

impl Pushes {
    fn any(&self) -> bool {
        self.remote_write.is_some() || self.otlp.is_some()
    }

    /// One push to each; one failing does not keep the other from its.
    fn send(&self, metrics: &LiveMetrics) -> anyhow::Result<()> {
        let written = match &self.remote_write {
            Some(url) => push(url, metrics).context("--metrics-push"),
            None => Ok(()),
        };
        let exported = match &self.otlp {
            Some((base, start_ns)) => export(base, *start_ns, metrics).context("--otlp"),
            None => Ok(()),
        };
        written.and(exported)
    }
}

impl Exporter {
    /// Starts what the flags ask for; `None` when they ask for nothing.
    pub fn start(args: &MetricsArgs) -> anyhow::Result<Option<Exporter>> {
        if let Some(url) = &args.metrics_push {
            check_push_url("--metrics-push", url, "http://127.0.0.1:9090/api/v1/write")?;
        }
        if let Some(url) = &args.otlp {
            check_push_url("--otlp", url, "http://127.0.0.1:4318")?;
        }
        let pushes = Arc::new(Pushes {
            remote_write: args.metrics_push.clone(),
            otlp: (args.otlp.clone()).map(|url| (url, otlp::now_unix_ns())),
        });
        if args.metrics_listen.is_none() && !pushes.any() {
            return Ok(None);
        }
        let metrics = match pushes.otlp {
            Some(_) => LiveMetrics::keeping_spans(),
            None => LiveMetrics::new(),
        };
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
        let pusher = if pushes.any() {
            let stop = Arc::new(AtomicBool::new(false));
            let (s, m, p) = (stop.clone(), metrics.clone(), pushes.clone());
            let handle = std::thread::Builder::new()
                .name("headroom-push".into())
                .spawn(move || {
                    let mut next = Instant::now() + PUSH_EVERY;
                    while !s.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50));
                        if Instant::now() >= next {
                            next += PUSH_EVERY;
                            if let Err(e) = p.send(&m) {
                                eprintln!("headroom: {e:#}");
                            }
                        }
                    }
                })?;
            Some((stop, handle))
        } else {
            None
        };
        Ok(Some(Exporter {
            metrics,
            server,
            pusher,
            pushes,
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
        let pushed = match self.pushes.any() {
            true => (self.pushes.send(&self.metrics)).context("the final push"),
            false => Ok(()),
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

fn check_push_url(flag: &str, url: &str, example: &str) -> anyhow::Result<()> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
        anyhow::bail!("{flag} `{url}`: give an http:// or https:// URL, e.g. {example}");
    }
    Ok(())
}

/// One remote-write request of every series, now.
fn push(url: &str, metrics: &LiveMetrics) -> anyhow::Result<()> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let body = metrics.remote_write_body(now_ms);
    let headers = [
        ("Content-Encoding", "snappy"),
        ("X-Prometheus-Remote-Write-Version", "0.1.0"),
    ];
    post_protobuf(url, &headers, &body)
}

/// POSTs a protobuf `body` (within 5 s) with `headers` besides its type.
fn post_protobuf(url: &str, headers: &[(&str, &str)], body: &[u8]) -> anyhow::Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let mut request = agent
        .post(url)
        .header("Content-Type", "application/x-protobuf")
        .header(
            "User-Agent",
            concat!("headroom/", env!("CARGO_PKG_VERSION")),
        );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send(body).with_context(|| format!("POST {url}"))?;
    Ok(())
}

/// One OTLP export of every metric, then of the spans of the runs that
/// finished since the last (sent once: a failed send is not retried).
fn export(base: &str, start_ns: u64, metrics: &LiveMetrics) -> anyhow::Result<()> {
    let base = base.trim_end_matches('/');
    let body = otlp::metrics_body(metrics, start_ns, otlp::now_unix_ns());
    post_protobuf(&format!("{base}/v1/metrics"), &[], &body)?;
    let spans = metrics.take_spans();
    if !spans.is_empty() {
        post_protobuf(&format!("{base}/v1/traces"), &[], &otlp::spans_body(&spans))?;
    }
    Ok(())
}

/// The exporter's last push and scrape, if there is one; a failure is a
/// warning — the measured results are already written.
pub fn finish(exporter: Option<Exporter>) {
    if let Some(Err(e)) = exporter.map(Exporter::finish) {
        eprintln!("headroom: warning: {e:#}");
    }
}
