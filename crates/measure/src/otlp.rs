//! The live metrics and a traced run's slowest requests as OpenTelemetry
//! (`--otlp URL`): OTLP/HTTP protobuf for a collector's `/v1/metrics` and
//! `/v1/traces`. The metrics are the figures `prometheus` keeps — one
//! state, so a scrape, a remote write and an OTLP push never disagree —
//! as cumulative sums, gauges and an explicit-bucket histogram whose
//! buckets carry their traced requests as exemplars. The spans are the
//! run's exemplars (`results.json`'s `exemplars`: the slowest per request
//! per second and the run's 100 slowest — a sample taken at the tail,
//! where the questions are), each with the span ID its `traceparent` sent,
//! so the server's span is their child.
//!
//! | OTLP metric | kind | Prometheus name (a collector's exporter) |
//! |---|---|---|
//! | `headroom.requests` | sum | `headroom_requests_total` |
//! | `headroom.responses` | sum | `headroom_responses_total` |
//! | `headroom.errors` | sum | `headroom_errors_total` |
//! | `headroom.connections.opened` | sum | `headroom_connections_opened_total` |
//! | `headroom.request.duration` (s) | histogram | `headroom_request_duration_seconds` |
//! | `headroom.messages.sent`, `.received` | sum | `headroom_messages_sent_total`, … |
//! | `headroom.<gauge>` | gauge | `headroom_<gauge>` |

use crate::prometheus::{Figures, LiveMetrics, RunSpans, BUCKETS_S};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    exemplar, metric, number_data_point, AggregationTemporality, Exemplar, Gauge, Histogram,
    HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};
use prost::Message;

/// Nanoseconds since the Unix epoch, now.
pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The ExportMetricsServiceRequest of every run's figures: cumulative
/// since `start_ns` (when the exporter started), observed at `now_ns`.
pub fn metrics_body(live: &LiveMetrics, start_ns: u64, now_ns: u64) -> Vec<u8> {
    let metrics = live.with_runs(|runs| {
        let mut families = Families::default();
        for (labels, figures) in runs {
            let at = Point {
                attributes: labels.iter().map(|(k, v)| text(k, v)).collect(),
                start_ns,
                now_ns,
            };
            families.add(&at, figures);
        }
        families.0.into_values().collect()
    });
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource()),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// The ExportTraceServiceRequest of finished runs' exemplars, one CLIENT
/// span each, from its intended send to its end.
pub fn spans_body(runs: &[RunSpans]) -> Vec<u8> {
    let spans = runs
        .iter()
        .flat_map(|run| run.exemplars.iter().filter_map(move |e| span_of(run, e)))
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource()),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope()),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn span_of(run: &RunSpans, e: &headroom_records::exemplars::Exemplar) -> Option<Span> {
    let trace_id = u128::from_str_radix(&e.trace_id, 16).ok()?;
    let span_id = u64::from_str_radix(&e.span_id, 16).ok()?;
    let end_ns = run.started_unix_ms * 1_000_000 + (e.end_ms? * 1e6) as u64;
    let start_ns = end_ns.saturating_sub((e.latency_ms * 1e6) as u64);
    let mut attributes: Vec<KeyValue> = run.labels.iter().map(|(k, v)| text(k, v)).collect();
    if let Some(code) = e.status {
        attributes.push(int("http.response.status_code", code.into()));
    }
    if let Some(class) = &e.error {
        attributes.push(text("error.type", class));
    }
    if let Some(rank) = e.rank {
        attributes.push(int("headroom.rank", rank.into()));
    }
    let failed = e.error.is_some() || e.status.is_some_and(|s| s >= 400);
    Some(Span {
        trace_id: trace_id.to_be_bytes().to_vec(),
        span_id: span_id.to_be_bytes().to_vec(),
        name: e.name.clone(),
        kind: span::SpanKind::Client as i32,
        start_time_unix_nano: start_ns,
        end_time_unix_nano: end_ns,
        attributes,
        status: Some(Status {
            code: if failed {
                status::StatusCode::Error
            } else {
                status::StatusCode::Unset
            } as i32,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// Where a data point belongs: its run's attributes and times.
struct Point {
    attributes: Vec<KeyValue>,
    start_ns: u64,
    now_ns: u64,
}

impl Point {
    fn number(&self, extra: Vec<KeyValue>, value: number_data_point::Value) -> NumberDataPoint {
        NumberDataPoint {
            attributes: self.attributes.iter().cloned().chain(extra).collect(),
            start_time_unix_nano: self.start_ns,
            time_unix_nano: self.now_ns,
            value: Some(value),
            ..Default::default()
        }
    }
}

/// The metrics by name, each with the data points of every run.
#[derive(Default)]
struct Families(std::collections::BTreeMap<String, Metric>);

impl Families {
    fn add(&mut self, at: &Point, f: &Figures) {
        let count = |n: u64| number_data_point::Value::AsInt(n as i64);
        for ((request, outcome), n) in &f.requests {
            let labels = vec![text("request", request), text("outcome", outcome)];
            self.sum(
                "headroom.requests",
                "{request}",
                at.number(labels, count(*n)),
            );
        }
        for (code, n) in &f.responses {
            let labels = vec![int("status", (*code).into())];
            self.sum(
                "headroom.responses",
                "{response}",
                at.number(labels, count(*n)),
            );
        }
        for (class, n) in &f.errors {
            self.sum(
                "headroom.errors",
                "{error}",
                at.number(vec![text("class", class)], count(*n)),
            );
        }
        for (protocol, n) in &f.connections {
            let labels = vec![text("protocol", protocol)];
            self.sum(
                "headroom.connections.opened",
                "{connection}",
                at.number(labels, count(*n)),
            );
        }
        if let Some((sent, received)) = f.messages {
            self.sum(
                "headroom.messages.sent",
                "{message}",
                at.number(vec![], count(sent)),
            );
            self.sum(
                "headroom.messages.received",
                "{message}",
                at.number(vec![], count(received)),
            );
        }
        for (gauge, v) in &f.gauges {
            let point = at.number(vec![], number_data_point::Value::AsDouble(*v));
            self.gauge(&format!("headroom.{gauge}"), point);
        }
        if f.count > 0 {
            self.histogram(at, f);
        }
    }

    fn metric(
        &mut self,
        name: &str,
        unit: &str,
        data: impl FnOnce() -> metric::Data,
    ) -> &mut metric::Data {
        let metric = self.0.entry(name.to_string()).or_insert_with(|| Metric {
            name: name.into(),
            unit: unit.into(),
            data: Some(data()),
            ..Default::default()
        });
        metric.data.as_mut().expect("set when made")
    }

    fn sum(&mut self, name: &str, unit: &str, point: NumberDataPoint) {
        let empty = || {
            metric::Data::Sum(Sum {
                data_points: vec![],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            })
        };
        if let metric::Data::Sum(sum) = self.metric(name, unit, empty) {
            sum.data_points.push(point);
        }
    }

    fn gauge(&mut self, name: &str, point: NumberDataPoint) {
        let empty = || {
            metric::Data::Gauge(Gauge {
                data_points: vec![],
            })
        };
        if let metric::Data::Gauge(gauge) = self.metric(name, "", empty) {
            gauge.data_points.push(point);
        }
    }

    fn histogram(&mut self, at: &Point, f: &Figures) {
        let exemplars = (f.exemplars.iter().flatten())
            .filter_map(|e| {
                Some(Exemplar {
                    trace_id: u128::from_str_radix(&e.trace_id, 16)
                        .ok()?
                        .to_be_bytes()
                        .to_vec(),
                    span_id: u64::from_str_radix(&e.span_id, 16)
                        .ok()?
                        .to_be_bytes()
                        .to_vec(),
                    time_unix_nano: (e.at_s * 1e9) as u64,
                    value: Some(exemplar::Value::AsDouble(e.latency_s)),
                    ..Default::default()
                })
            })
            .collect();
        let point = HistogramDataPoint {
            attributes: at.attributes.clone(),
            start_time_unix_nano: at.start_ns,
            time_unix_nano: at.now_ns,
            count: f.count,
            sum: Some(f.sum_s),
            bucket_counts: f.buckets.clone(),
            explicit_bounds: BUCKETS_S.to_vec(),
            exemplars,
            ..Default::default()
        };
        let empty = || {
            metric::Data::Histogram(Histogram {
                data_points: vec![],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })
        };
        if let metric::Data::Histogram(h) = self.metric("headroom.request.duration", "s", empty) {
            h.data_points.push(point);
        }
    }
}

fn resource() -> Resource {
    Resource {
        attributes: vec![
            text("service.name", "headroom"),
            text("service.version", env!("CARGO_PKG_VERSION")),
        ],
        ..Default::default()
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "headroom".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
        ..Default::default()
    }
}
