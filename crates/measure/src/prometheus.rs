//! Live metrics the Prometheus way: the figures of the runs going on (and
//! of those finished, for a study or a capacity search), updated every
//! second and exactly at each run's end, as an exposition for a scrape
//! (`--metrics-listen`, Prometheus' text format) and as a
//! remote-write request (`--metrics-push`: protobuf + snappy, the wire
//! format Prometheus and compatible stores accept). One list of series
//! feeds both, so a scrape and a push never disagree.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `headroom_requests_total` | counter | `request`, `outcome` (ok, failed) |
//! | `headroom_responses_total` | counter | `status` |
//! | `headroom_errors_total` | counter | `class` |
//! | `headroom_connections_opened_total` | counter | `protocol` (`http/1.1`, `h2`) |
//! | `headroom_request_duration_seconds` | histogram | — (from the intended send time) |
//! | `headroom_active_users`, `headroom_in_flight` | gauge | |
//! | `headroom_sockets_open` | gauge | (WebSockets and event streams) |
//! | `headroom_messages_sent_total`, `headroom_messages_received_total` | counter | (on those sockets) |
//! | `headroom_target_rate` | gauge | (open model: requests or sessions per second) |
//! | `headroom_server_cpu_cores`, `headroom_server_resident_memory_bytes`, `headroom_server_open_fds`, `headroom_server_processes`, `headroom_server_accept_queue` | gauge | |
//! | `headroom_generator_cpu_cores`, `headroom_generator_resident_memory_bytes` | gauge | |
//!
//! Every series also carries the run's own labels: `config` in a study,
//! `step` in a capacity search.

use hdrhistogram::Histogram;
use headroom_engine::plan::{Load, Plan};
use headroom_engine::Progress;
use headroom_metrics::histogram;
use headroom_records::results::Connections;
use headroom_records::server::sample::Sample;
use headroom_records::Results;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Bucket bounds of the duration histogram, in seconds (Prometheus'
/// defaults, with 1 ms and 2.5 ms for loopback-fast servers).
pub const BUCKETS_S: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

pub type Labels = Vec<(String, String)>;

/// One run's figures (read by `otlp` too).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Figures {
    /// (request, outcome) → count.
    pub(crate) requests: BTreeMap<(String, &'static str), u64>,
    pub(crate) responses: BTreeMap<u16, u64>,
    pub(crate) errors: BTreeMap<String, u64>,
    /// Connections opened by protocol (`http/1.1`, `h2`).
    pub(crate) connections: BTreeMap<String, u64>,
    /// Non-cumulative counts per bucket of [`BUCKETS_S`], then +Inf.
    pub(crate) buckets: Vec<u64>,
    pub(crate) sum_s: f64,
    pub(crate) count: u64,
    pub(crate) gauges: BTreeMap<&'static str, f64>,
    /// Messages sent and received on sockets, when the run has any.
    pub(crate) messages: Option<(u64, u64)>,
    /// A traced request per bucket of [`BUCKETS_S`] (then +Inf): the
    /// newest offered, for OpenMetrics exemplars.
    pub(crate) exemplars: Vec<Option<BucketExemplar>>,
}

/// A finished run's exemplars, waiting to be sent as spans (`otlp`).
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpans {
    /// The run's own labels (`config`, `step`).
    pub labels: Labels,
    /// When it started (its exemplars' `end_ms` count from here).
    pub started_unix_ms: u64,
    pub exemplars: Vec<headroom_records::exemplars::Exemplar>,
}

/// A traced request shown beside the bucket its latency fell in.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketExemplar {
    pub trace_id: String,
    pub span_id: String,
    pub latency_s: f64,
    /// When it was offered, Unix seconds.
    pub at_s: f64,
}

impl Figures {
    fn latency(&mut self, h: &Histogram<u64>) {
        let mut below = 0;
        self.buckets = BUCKETS_S
            .iter()
            .map(|le| {
                let upto = h.count_between(0, (le * 1e6) as u64);
                let n = upto.saturating_sub(below);
                below = upto;
                n
            })
            .collect();
        self.buckets.push(h.len().saturating_sub(below));
        self.count = h.len();
        self.sum_s = h.mean() * h.len() as f64 / 1e6;
    }

    /// Each traced request (trace ID, span ID, latency) beside its bucket
    /// (the last offered wins).
    fn exemplars(&mut self, traced: impl Iterator<Item = (String, String, f64)>) {
        let at_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.exemplars.resize(BUCKETS_S.len() + 1, None);
        for (trace_id, span_id, latency_s) in traced {
            let bucket = BUCKETS_S
                .iter()
                .position(|le| latency_s <= *le)
                .unwrap_or(BUCKETS_S.len());
            self.exemplars[bucket] = Some(BucketExemplar {
                trace_id,
                span_id,
                latency_s,
                at_s,
            });
        }
    }
}

#[derive(Debug, Default)]
struct State {
    runs: BTreeMap<Labels, Figures>,
    /// Scrapes served, so a caller can wait for one after the last update.
    scrapes: u64,
    updates: u64,
    /// Finished runs' exemplars not yet sent as spans; `None`: no one
    /// sends them, so none are kept.
    spans: Option<Vec<RunSpans>>,
}

/// The live figures, shared by the runs and the endpoint.
#[derive(Clone, Debug, Default)]
pub struct LiveMetrics {
    state: Arc<Mutex<State>>,
}

/// The same figures (one shared state), not equal figures.
impl PartialEq for LiveMetrics {
    fn eq(&self, other: &LiveMetrics) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }
}

impl Eq for LiveMetrics {}

/// One series of one family, for remote write.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// With `__name__` first.
    pub labels: Labels,
    pub value: f64,
    /// A histogram bucket's traced request (OpenMetrics only).
    pub exemplar: Option<BucketExemplar>,
}

/// The two expositions a scrape may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus' text format 0.0.4 (what `promtool check metrics` reads).
    Text,
    /// OpenMetrics 1.0, with exemplars: what Prometheus asks for first.
    OpenMetrics,
}

impl Exposition {
    /// The one a scraper's `Accept` header prefers.
    pub fn accepted(accept: Option<&str>) -> Exposition {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Exposition::OpenMetrics,
            _ => Exposition::Text,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Text => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

impl LiveMetrics {
    pub fn new() -> LiveMetrics {
        LiveMetrics::default()
    }

    /// Figures that also keep each finished run's exemplars until
    /// [`LiveMetrics::take_spans`] (for `--otlp`).
    pub fn keeping_spans() -> LiveMetrics {
        let metrics = LiveMetrics::default();
        metrics.state.lock().expect("metrics lock").spans = Some(Vec::new());
        metrics
    }

    /// The finished runs' exemplars kept since the last call.
    pub fn take_spans(&self) -> Vec<RunSpans> {
        let mut state = self.state.lock().expect("metrics lock");
        state.spans.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Reads every run's figures under the lock.
    pub(crate) fn with_runs<R>(&self, f: impl FnOnce(&BTreeMap<Labels, Figures>) -> R) -> R {
        f(&self.state.lock().expect("metrics lock").runs)
    }

    fn update(&self, labels: &Labels, f: impl FnOnce(&mut Figures)) {
        let mut state = self.state.lock().expect("metrics lock");
        f(state.runs.entry(labels.clone()).or_default());
        state.updates += 1;
    }

    /// After each second of a run: its totals so far, and the gauges.
    pub fn second(&self, labels: &Labels, plan: &Plan, p: &Progress, sample: Option<&Sample>) {
        self.update(labels, |f| {
            for (spec, c) in plan.requests.iter().zip(p.by_request) {
                f.requests.insert((spec.name.clone(), "ok"), c.ok);
                f.requests.insert((spec.name.clone(), "failed"), c.failed);
            }
            f.responses = statuses(&p.total.status);
            f.errors = p
                .total
                .error_counts()
                .map(|(c, n)| (c.key().to_string(), n))
                .collect();
            f.latency(&p.total.latency);
            f.exemplars((p.exemplars.iter()).map(|e| {
                let latency_s = e.latency_us as f64 / 1e6;
                (e.trace.trace_hex(), e.trace.span_hex(), latency_s)
            }));
            f.connections = Connections::by_protocol(p.total);
            f.gauges
                .insert("active_users", p.second.active_users as f64);
            f.gauges.insert("in_flight", p.second.in_flight as f64);
            if let Some(open) = p.second.sockets_open {
                f.gauges.insert("sockets_open", open as f64);
            }
            let k = &p.total.sockets;
            if !k.is_empty() {
                f.messages = Some((k.messages_sent, k.messages_received));
            }
            if let Load::Open(o) = &plan.load {
                f.gauges
                    .insert("target_rate", o.schedule.rate_at(p.elapsed));
            }
            if let Some(s) = sample {
                gauges_of(f, s);
            }
        });
    }

    /// At a run's end: its exact totals (the last partial second included).
    pub fn finish(&self, labels: &Labels, r: &Results) {
        if let Some(spans) = &mut self.state.lock().expect("metrics lock").spans {
            if let (false, Some(started_unix_ms)) =
                (r.exemplars.is_empty(), r.meta.started_at_unix_ms)
            {
                spans.push(RunSpans {
                    labels: labels.clone(),
                    started_unix_ms,
                    exemplars: r.exemplars.clone(),
                });
            }
        }
        self.update(labels, |f| {
            for (name, s) in &r.per_request {
                f.requests.insert((name.clone(), "ok"), s.requests.ok);
                f.requests
                    .insert((name.clone(), "failed"), s.requests.failed);
            }
            f.responses = r
                .summary
                .status_codes
                .iter()
                .filter_map(|(k, v)| Some((k.parse().ok()?, *v)))
                .collect();
            f.errors = r.summary.errors.clone();
            f.connections = r.connections.by_protocol.clone();
            if let Ok(h) = histogram::from_base64(&r.histograms.latency) {
                f.latency(&h);
            }
            // By second, so each bucket keeps its latest traced request.
            let mut traced: Vec<_> = r.exemplars.iter().collect();
            traced.sort_by_key(|e| e.second);
            f.exemplars(
                (traced.into_iter())
                    .map(|e| (e.trace_id.clone(), e.span_id.clone(), e.latency_ms / 1000.0)),
            );
            f.gauges.insert("active_users", 0.0);
            f.gauges.insert("in_flight", 0.0);
            if let Some(k) = &r.sockets {
                f.gauges.insert("sockets_open", 0.0);
                f.messages = Some((k.messages_sent, k.messages_received));
            }
            f.gauges.remove("target_rate");
        });
    }

    /// Every series, as remote write sends them (counters with `_total`,
    /// histograms as `_bucket{le}`, `_sum`, `_count`).
    pub fn series(&self) -> Vec<Series> {
        let state = self.state.lock().expect("metrics lock");
        let mut out = Vec::new();
        for (base, f) in &state.runs {
            let first = out.len();
            let mut push = |name: &str, extra: Vec<(&str, String)>, value: f64| {
                let mut labels = vec![("__name__".to_string(), name.to_string())];
                labels.extend(base.iter().cloned());
                labels.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
                labels[1..].sort();
                out.push(Series {
                    labels,
                    value,
                    exemplar: None,
                });
            };
            for ((request, outcome), n) in &f.requests {
                push(
                    "headroom_requests_total",
                    vec![
                        ("request", request.clone()),
                        ("outcome", outcome.to_string()),
                    ],
                    *n as f64,
                );
            }
            for (status, n) in &f.responses {
                push(
                    "headroom_responses_total",
                    vec![("status", status.to_string())],
                    *n as f64,
                );
            }
            for (class, n) in &f.errors {
                push(
                    "headroom_errors_total",
                    vec![("class", class.clone())],
                    *n as f64,
                );
            }
            for (protocol, n) in &f.connections {
                push(
                    "headroom_connections_opened_total",
                    vec![("protocol", protocol.clone())],
                    *n as f64,
                );
            }
            let mut cumulative = 0;
            for (i, n) in f.buckets.iter().enumerate() {
                cumulative += n;
                let le = BUCKETS_S
                    .get(i)
                    .map_or("+Inf".to_string(), |b| b.to_string());
                push(
                    "headroom_request_duration_seconds_bucket",
                    vec![("le", le)],
                    cumulative as f64,
                );
            }
            push("headroom_request_duration_seconds_sum", vec![], f.sum_s);
            push(
                "headroom_request_duration_seconds_count",
                vec![],
                f.count as f64,
            );
            if let Some((sent, received)) = f.messages {
                push("headroom_messages_sent_total", vec![], sent as f64);
                push("headroom_messages_received_total", vec![], received as f64);
            }
            for (gauge, v) in &f.gauges {
                push(&format!("headroom_{gauge}"), vec![], *v);
            }
            // Each bucket's traced request, in the buckets' order.
            let buckets = out[first..]
                .iter_mut()
                .filter(|s| s.labels[0].1 == "headroom_request_duration_seconds_bucket");
            for (series, exemplar) in buckets.zip(&f.exemplars) {
                series.exemplar.clone_from(exemplar);
            }
        }
        out
    }

    /// The exposition for a scrape: Prometheus' text format 0.0.4, which
    /// Prometheus scrapes and `promtool check metrics` (Debian 12's 2.42)
    /// reads — it rejects OpenMetrics counter families (`# TYPE x counter`
    /// over `x_total` samples), the only text `prometheus-client` writes.
    pub fn render(&self) -> String {
        self.render_as(Exposition::Text)
    }

    /// The exposition in either format. OpenMetrics names a counter's
    /// family without `_total`, puts each bucket's traced request after it
    /// (`# {trace_id="…"} 0.812 1764300000.1`: Prometheus keeps it with
    /// `--enable-feature=exemplar-storage`), and ends with `# EOF`.
    pub fn render_as(&self, exposition: Exposition) -> String {
        use std::fmt::Write;
        let series = self.series();
        self.state.lock().expect("metrics lock").scrapes += 1;
        let mut families: Vec<(&str, Vec<&Series>)> = Vec::new();
        for s in &series {
            let family = family_of(&s.labels[0].1);
            match families.iter_mut().find(|(f, _)| *f == family) {
                Some((_, members)) => members.push(s),
                None => families.push((family, vec![s])),
            }
        }
        let open_metrics = exposition == Exposition::OpenMetrics;
        let mut text = String::new();
        for (family, members) in families {
            let (kind, help) = describe(family);
            let (name, kind) = match (open_metrics, kind) {
                (true, "counter") => (family.trim_end_matches("_total"), kind),
                (true, "untyped") => (family, "unknown"),
                _ => (family, kind),
            };
            let _ = writeln!(text, "# HELP {name} {help}");
            let _ = writeln!(text, "# TYPE {name} {kind}");
            for s in members {
                text.push_str(&s.labels[0].1);
                let labels: Vec<String> = s.labels[1..]
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                    .collect();
                if !labels.is_empty() {
                    let _ = write!(text, "{{{}}}", labels.join(","));
                }
                let _ = write!(text, " {}", s.value);
                if let (true, Some(e)) = (open_metrics, &s.exemplar) {
                    let _ = write!(
                        text,
                        " # {{trace_id=\"{}\"}} {} {:.3}",
                        escape(&e.trace_id),
                        e.latency_s,
                        e.at_s
                    );
                }
                text.push('\n');
            }
        }
        if open_metrics {
            text.push_str("# EOF\n");
        }
        text
    }

    /// (scrapes served, updates made): to wait for a scrape after the last
    /// update.
    pub fn counters(&self) -> (u64, u64) {
        let state = self.state.lock().expect("metrics lock");
        (state.scrapes, state.updates)
    }

    /// A Prometheus remote-write request of every series at `now_ms`:
    /// protobuf (`prometheus.WriteRequest`), snappy-compressed.
    pub fn remote_write_body(&self, now_ms: i64) -> Vec<u8> {
        remote_write::encode(&self.series(), now_ms)
    }
}

fn statuses(counts: &[u64]) -> BTreeMap<u16, u64> {
    counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(code, n)| (code as u16, *n))
        .collect()
}

fn gauges_of(f: &mut Figures, s: &Sample) {
    if let Some(t) = s.server.as_ref().filter(|t| t.alive) {
        f.gauges.insert("server_cpu_cores", t.cpu_pct / 100.0);
        f.gauges
            .insert("server_resident_memory_bytes", t.rss_bytes as f64);
        f.gauges.insert("server_open_fds", t.fds as f64);
        f.gauges.insert("server_processes", t.processes as f64);
        if !t.accept_queues.is_empty() {
            f.gauges
                .insert("server_accept_queue", t.accept_queue_depth() as f64);
        }
    }
    if let Some(g) = &s.generator {
        f.gauges.insert("generator_cpu_cores", g.cpu_pct / 100.0);
        f.gauges
            .insert("generator_resident_memory_bytes", g.rss_bytes as f64);
    }
}

/// The family a series belongs to (a histogram's `_bucket`, `_sum` and
/// `_count` are one).
fn family_of(name: &str) -> &str {
    const HISTOGRAM: &str = "headroom_request_duration_seconds";
    if name.starts_with(HISTOGRAM) {
        HISTOGRAM
    } else {
        name
    }
}

/// (type, help) of a family.
fn describe(family: &str) -> (&'static str, &'static str) {
    match family.trim_start_matches("headroom_") {
        "requests_total" => (
            "counter",
            "Requests completed, by request name and outcome.",
        ),
        "responses_total" => ("counter", "Responses received, by HTTP status."),
        "errors_total" => ("counter", "Failed requests, by error class."),
        "connections_opened_total" => (
            "counter",
            "Connections opened, by the protocol they agreed on (http/1.1, h2).",
        ),
        "request_duration_seconds" => ("histogram", "Request latency from the intended send time."),
        "active_users" => (
            "gauge",
            "Users running (closed model) or sessions in progress.",
        ),
        "in_flight" => ("gauge", "Requests sent and not yet answered."),
        "sockets_open" => ("gauge", "WebSockets and event streams open."),
        "messages_sent_total" => ("counter", "Messages sent on WebSockets."),
        "messages_received_total" => (
            "counter",
            "Messages (and events) received on WebSockets and event streams.",
        ),
        "target_rate" => (
            "gauge",
            "Open model: arrivals per second the schedule asks for now.",
        ),
        "server_cpu_cores" => ("gauge", "CPU of the watched server's processes, in cores."),
        "server_resident_memory_bytes" => (
            "gauge",
            "Resident memory of the watched server's processes.",
        ),
        "server_open_fds" => (
            "gauge",
            "Open file descriptors of the watched server's processes.",
        ),
        "server_processes" => ("gauge", "Processes of the watched server."),
        "server_accept_queue" => (
            "gauge",
            "Connections waiting in the watched server's accept queues (all its listening sockets).",
        ),
        "generator_cpu_cores" => ("gauge", "CPU of headroom itself, in cores."),
        "generator_resident_memory_bytes" => ("gauge", "Resident memory of headroom itself."),
        _ => ("untyped", "A headroom figure."),
    }
}

/// A label value in the text format: backslash, quote and newline escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Prometheus remote write 1.0: `WriteRequest` protobuf, snappy block
/// format (prometheus/prompb/remote.proto, types.proto).
mod remote_write {
    use super::Series;

    #[derive(Clone, PartialEq, prost::Message)]
    struct WriteRequest {
        #[prost(message, repeated, tag = "1")]
        timeseries: Vec<TimeSeries>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct TimeSeries {
        #[prost(message, repeated, tag = "1")]
        labels: Vec<Label>,
        #[prost(message, repeated, tag = "2")]
        samples: Vec<Sample>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct Label {
        #[prost(string, tag = "1")]
        name: String,
        #[prost(string, tag = "2")]
        value: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    struct Sample {
        #[prost(double, tag = "1")]
        value: f64,
        #[prost(int64, tag = "2")]
        timestamp: i64,
    }

    pub fn encode(series: &[Series], now_ms: i64) -> Vec<u8> {
        use prost::Message;
        let request = WriteRequest {
            timeseries: series
                .iter()
                .map(|s| TimeSeries {
                    labels: s
                        .labels
                        .iter()
                        .map(|(name, value)| Label {
                            name: name.clone(),
                            value: value.clone(),
                        })
                        .collect(),
                    samples: vec![Sample {
                        value: s.value,
                        timestamp: now_ms,
                    }],
                })
                .collect(),
        };
        snap::raw::Encoder::new()
            .compress_vec(&request.encode_to_vec())
            .expect("snappy compresses any input")
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use prost::Message;

        #[test]
        fn decodes_back_to_the_series() {
            let series = vec![Series {
                labels: vec![
                    ("__name__".into(), "headroom_requests_total".into()),
                    ("outcome".into(), "ok".into()),
                ],
                value: 42.0,
                exemplar: None,
            }];
            let body = encode(&series, 1_700_000_000_000);
            let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
            let back = WriteRequest::decode(raw.as_slice()).unwrap();
            assert_eq!(back.timeseries.len(), 1);
            assert_eq!(
                back.timeseries[0].labels[0].value,
                "headroom_requests_total"
            );
            assert_eq!(back.timeseries[0].samples[0].value, 42.0);
            assert_eq!(back.timeseries[0].samples[0].timestamp, 1_700_000_000_000);
        }
    }
}
