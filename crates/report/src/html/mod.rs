//! The HTML report: one self-contained file (inline CSS, SVG and script,
//! no font, image or script fetched), for a run, a study, a capacity
//! search or a comparison. Light and dark mode follow the reader's system;
//! printing drops the colours of the page, not of the charts.
//!
//! Built with maud: the markup is checked when headroom compiles, and every
//! value written into it (a URL, a request's name, an error message) is
//! escaped unless marked `PreEscaped` — only the style sheet is.
//!
//! - [`charts`]: the line charts, drawn in the browser with the dashboard's code.
//! - [`svg`]: bars and the heat-map, inline SVG.

pub mod charts;
mod server_charts;
pub mod svg;

use crate::table::Table;
use charts::{LineChart, Marker, Series};
use headroom_metrics::aggregate::TimelinePoint;
use headroom_metrics::histogram;
use headroom_records::capacity::CapacityReport;
use headroom_records::results::Results;
use headroom_records::study::StudyReport;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use server_charts::server_charts;
use svg::{BarChart, Heatmap};

const CSS: &str = r#"
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1d232a; --muted: #5b6570; --grid: #e3e7eb;
  --card: #f6f8fa; --ok: #1a7f37; --bad: #cf222e; --best: #fff3bf;
  --s1: #2f6fdf; --s2: #e8590c; --s3: #2b8a3e; --s4: #ae3ec9; --s5: #c92a2a; --s6: #0c8599; --s7: #5c940d; --s8: #862e9c; }
@media (prefers-color-scheme: dark) { :root { --bg: #0f1419; --fg: #e6e9ec; --muted: #9aa5b1; --grid: #2a323c;
  --card: #171d24; --ok: #57d97a; --bad: #ff7b72; --best: #3b3413;
  --s1: #6ea8fe; --s2: #ff922b; --s3: #69db7c; --s4: #da77f2; --s5: #ff8787; --s6: #3bc9db; --s7: #a9e34b; --s8: #e599f7; } }
body { background: var(--bg); color: var(--fg); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1100px; padding: 24px; }
h1 { font-size: 1.6em; margin: 0 0 4px; } h2 { font-size: 1.2em; margin: 28px 0 8px; border-bottom: 1px solid var(--grid); padding-bottom: 4px; }
.meta { color: var(--muted); margin: 0 0 12px; }
.scroll { overflow-x: auto; } @media print { .scroll { overflow: visible; } }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; font-size: 0.9em; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--grid); text-align: right; white-space: nowrap; }
th { background: var(--card); } td.text, th.text { text-align: left; }
tr.best td { background: var(--best); font-weight: 600; }
.pass { color: var(--ok); font-weight: 600; } .fail { color: var(--bad); font-weight: 600; }
.verdict { background: var(--card); border-left: 4px solid var(--s1); padding: 8px 12px; margin: 12px 0; }
.verdict.warn { border-left-color: var(--bad); }
.charts { display: grid; grid-template-columns: 1fr; gap: 12px; }
svg.chart { width: 100%; height: auto; background: var(--card); border-radius: 6px; }
div.uchart { background: var(--card); border-radius: 6px; padding: 8px; min-height: 300px; } div.uchart h3 { font-size: 14px; margin: 4px 8px; }
@media print { div.uchart { break-inside: avoid; } }
svg .title { font-weight: 600; font-size: 14px; fill: var(--fg); }
svg .tick, svg .legend, svg .cell-label { font-size: 11px; fill: var(--muted); } svg .cell-label { fill: var(--fg); }
svg .label { font-size: 12px; fill: var(--fg); }
svg .grid { stroke: var(--grid); stroke-width: 1; } svg .axis { stroke: var(--muted); stroke-width: 1; }
svg .line { fill: none; stroke-width: 2; }
svg .diag { stroke: var(--muted); stroke-dasharray: 4 4; }
svg .marker { stroke: var(--bad); stroke-width: 1.5; stroke-dasharray: 5 3; } svg .marker-label { font-size: 11px; fill: var(--bad); }
svg .cell { fill: var(--s1); } svg .cell-empty { fill: none; stroke: var(--grid); }
svg .bar.best { stroke: var(--fg); stroke-width: 2; }
.s1 { stroke: var(--s1); fill: var(--s1); } .s2 { stroke: var(--s2); fill: var(--s2); } .s3 { stroke: var(--s3); fill: var(--s3); }
.s4 { stroke: var(--s4); fill: var(--s4); } .s5 { stroke: var(--s5); fill: var(--s5); } .s6 { stroke: var(--s6); fill: var(--s6); }
.s7 { stroke: var(--s7); fill: var(--s7); } .s8 { stroke: var(--s8); fill: var(--s8); }
polyline.line { fill: none; }
@media print { body { max-width: none; padding: 0; font-size: 11pt; } h2 { break-after: avoid; } svg.chart { break-inside: avoid; } }
"#;

/// The page around `body`.
fn page(title: &str, body: Markup) -> String {
    let has_line_charts = body.0.contains("data-chart=");
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(CSS)) }
            }
            body {
                (body)
                @if has_line_charts {
                    noscript { p class="meta" { "The line charts are drawn by the script in this file: allow JavaScript to see them (the tables are all here)." } }
                    (charts::scripts())
                }
                p class="meta" {
                    "Made by headroom " (env!("CARGO_PKG_VERSION"))
                    " — a self-contained file: nothing is loaded from the network."
                }
            }
        }
    }
    .into_string()
}

/// A table as HTML; rows whose first cell is in `best` are highlighted.
fn table_html(t: &Table, best: &[String]) -> Markup {
    let left = |i: usize| t.left.contains(&i).then_some("text");
    // A verdict cell is coloured.
    let verdict = |c: &str| {
        if c == "pass" || c.starts_with("pass ") {
            Some("pass")
        } else if c.starts_with("FAIL") {
            Some("fail")
        } else {
            None
        }
    };
    let class = |i: usize, c: &str| {
        let words: Vec<&str> = left(i).into_iter().chain(verdict(c)).collect();
        (!words.is_empty()).then(|| words.join(" "))
    };
    // Wide tables scroll inside their box instead of widening the page.
    html! {
        div class="scroll" {
            table {
                thead { tr { @for (i, h) in t.headers.iter().enumerate() { th class=[left(i)] { (h) } } } }
                tbody {
                    @for row in &t.rows {
                        tr class=[row.iter().any(|c| best.contains(c)).then_some("best")] {
                            @for (i, c) in row.iter().enumerate() { td class=[class(i, c)] { (c) } }
                        }
                    }
                }
            }
        }
    }
}

fn thresholds_html(r: &Results) -> Markup {
    html! {
        @if !r.thresholds.is_empty() {
            h2 { "Thresholds" }
            (table_html(&crate::thresholds::table(&r.thresholds), &[]))
        }
    }
}

/// A marker at each event's start and each server restart, for every
/// chart over time.
fn event_markers(r: &Results) -> Vec<Marker> {
    let events = r.events.iter().map(|e| Marker {
        x: e.started_s,
        label: e.label.chars().take(30).collect(),
    });
    let restarts = r.server.iter().flat_map(|s| &s.restarts).map(|x| Marker {
        x: x.t_s,
        label: format!("restart: pid {}", x.new_pid),
    });
    events.chain(restarts).collect()
}

/// Each event's 100 ms buckets: OK and failed responses, and p99.
fn event_charts(r: &Results) -> Vec<Markup> {
    r.events
        .iter()
        .filter(|e| !e.timeline_100ms.is_empty())
        .map(|e| {
            let mut c = LineChart::new(
                &format!(
                    "Around `{}` (100 ms buckets)",
                    e.label.chars().take(40).collect::<String>()
                ),
                "time since start (s)",
                "responses per 100 ms",
            );
            let pts = |f: &dyn Fn(&headroom_records::events::FinePoint) -> f64| {
                e.timeline_100ms.iter().map(|p| (p.t_s, f(p))).collect()
            };
            c.series.push(Series::new("OK", pts(&|p| p.ok as f64)));
            c.series
                .push(Series::new("failed", pts(&|p| p.failed as f64)));
            c.series
                .push(Series::new("p99 (ms)", pts(&|p| p.p99_ms.unwrap_or(f64::NAN))).right());
            c.y2_label = Some("p99 latency (ms)".into());
            c.markers.push(Marker {
                x: e.started_s,
                label: "start".into(),
            });
            if let Some(a) = &e.after {
                c.markers.push(Marker {
                    x: a.max_gap_from_s,
                    label: format!("longest gap {:.0} ms", a.max_gap_ms),
                });
            }
            c.render()
        })
        .collect()
}

/// WebSockets and event streams: messages each way per second, and the
/// sockets open.
fn sockets_chart(r: &Results) -> Markup {
    let t = |f: &dyn Fn(&TimelinePoint) -> f64| over_time(&r.timeline, f);
    // Counts per second: whole seconds only.
    let c = |f: &dyn Fn(&TimelinePoint) -> f64| over_time(whole_seconds(r), f);
    let mut sockets = LineChart::new(
        "Sockets and messages",
        "time since start (s)",
        "messages per second",
    );
    sockets.series.push(Series::new(
        "sent",
        c(&|p| p.messages_sent.unwrap_or(0) as f64),
    ));
    sockets.series.push(Series::new(
        "received",
        c(&|p| p.messages_received.unwrap_or(0) as f64),
    ));
    sockets
        .series
        .push(Series::new("sockets open", t(&|p| p.sockets_open.unwrap_or(0) as f64)).right());
    sockets.y2_label = Some("sockets open".into());
    sockets.markers = event_markers(r);
    sockets.render()
}

/// Each request's p95 and its OK and KO responses per second, when the
/// timeline keeps each request's seconds.
fn per_request_charts(r: &Results) -> [Markup; 2] {
    let t = |f: &dyn Fn(&TimelinePoint) -> f64| over_time(&r.timeline, f);
    // Counts per second: whole seconds only.
    let c = |f: &dyn Fn(&TimelinePoint) -> f64| over_time(whole_seconds(r), f);
    let names: Vec<&str> = r.config.requests.iter().map(|q| q.name.as_str()).collect();
    let mut lat = LineChart::new(
        "p95 latency by request",
        "time since start (s)",
        "latency (ms)",
    );
    let mut thr = LineChart::new(
        "Responses per second by request (KO dashed, right axis)",
        "time since start (s)",
        "OK responses per second",
    );
    for (i, name) in names.iter().enumerate() {
        let at = |p: &TimelinePoint| p.per_request.get(i).cloned().unwrap_or_default();
        lat.series
            .push(Series::new(name, t(&|p| at(p).p95_ms.unwrap_or(f64::NAN))));
        thr.series
            .push(Series::new(&format!("{name} OK"), c(&|p| at(p).ok as f64)));
        thr.series
            .push(Series::new(&format!("{name} KO"), c(&|p| at(p).failed as f64)).right());
    }
    thr.y2_label = Some("KO per second".into());
    lat.markers = event_markers(r);
    thr.markers = event_markers(r);
    [lat.render(), thr.render()]
}

fn timeline_charts(r: &Results) -> Vec<Markup> {
    let tl = &r.timeline;
    let t = |f: &dyn Fn(&TimelinePoint) -> f64| over_time(&r.timeline, f);
    // Counts per second: whole seconds only.
    let c = |f: &dyn Fn(&TimelinePoint) -> f64| over_time(whole_seconds(r), f);
    let mut charts = Vec::new();
    let mut lat = LineChart::new(
        "Latency over time (from the intended send time)",
        "time since start (s)",
        "latency (ms)",
    );
    // A second in which nothing completed has no latency: NaN, drawn as a gap.
    let gap = |v: Option<f64>| v.unwrap_or(f64::NAN);
    lat.series.push(Series::new("p50", t(&|p| gap(p.p50_ms))));
    lat.series.push(Series::new("p90", t(&|p| gap(p.p90_ms))));
    lat.series.push(Series::new("p95", t(&|p| gap(p.p95_ms))));
    lat.series.push(Series::new("p99", t(&|p| gap(p.p99_ms))));
    lat.series.push(Series::new("max", t(&|p| gap(p.max_ms))));
    lat.markers = event_markers(r);
    charts.push(lat.render());

    let mut thr = LineChart::new(
        "Throughput and concurrency",
        "time since start (s)",
        "responses per second (req/s)",
    );
    thr.series
        .push(Series::new("throughput (req/s)", c(&|p| p.requests as f64)));
    thr.series
        .push(Series::new("in flight", t(&|p| p.in_flight as f64)).right());
    if r.config.model == "closed" {
        thr.series
            .push(Series::new("active users", t(&|p| p.active_users as f64)).right());
    }
    thr.y2_label = Some("requests in flight / users".into());
    thr.markers = event_markers(r);
    charts.push(thr.render());

    if r.sockets.is_some() {
        charts.push(sockets_chart(r));
    }

    let mut err = LineChart::new(
        "Errors by class",
        "time since start (s)",
        "failed requests per second",
    );
    err.series
        .push(Series::new("all failed", c(&|p| p.failed as f64)));
    let classes: std::collections::BTreeSet<&String> =
        tl.iter().flat_map(|p| p.errors.keys()).collect();
    for class in classes {
        err.series.push(Series::new(
            class,
            c(&|p| p.errors.get(class).copied().unwrap_or(0) as f64),
        ));
    }
    err.markers = event_markers(r);
    charts.push(err.render());
    if tl.iter().any(|p| !p.per_request.is_empty()) {
        charts.extend(per_request_charts(r));
    }
    if tl.iter().any(|p| p.offered.is_some()) {
        let mut rate = LineChart::new(
            "Offered and achieved (open model)",
            "time since start (s)",
            "requests per second",
        );
        rate.series.push(Series::new(
            "offered (the schedule)",
            c(&|p| p.offered.unwrap_or(0) as f64),
        ));
        rate.series
            .push(Series::new("completed", c(&|p| p.requests as f64)));
        rate.series.push(Series::new("OK", c(&|p| p.ok as f64)));
        rate.markers = event_markers(r);
        charts.push(rate.render());
    }
    charts
}

/// Response-time histogram from the run's HDR histogram: 40 equal bins
/// from the minimum to p99.9, the rest in a last bin.
fn distribution_chart(r: &Results) -> Option<Markup> {
    let h = histogram::from_base64(&r.histograms.latency).ok()?;
    if h.is_empty() {
        return None;
    }
    let lo = h.min() as f64 / 1000.0;
    let hi = (h.value_at_quantile(0.999) as f64 / 1000.0).max(lo + 0.001);
    const BINS: usize = 40;
    let width = (hi - lo) / BINS as f64;
    let mut counts = vec![0u64; BINS + 1];
    for v in h.iter_recorded() {
        let ms = v.value_iterated_to() as f64 / 1000.0;
        let i = (((ms - lo) / width).floor().max(0.0) as usize).min(BINS);
        counts[i] += v.count_at_value();
    }
    let mut categories: Vec<String> = (0..BINS)
        .map(|i| svg::short(lo + width * (i as f64 + 0.5)))
        .collect();
    categories.push(format!(">{}", svg::short(hi)));
    Some(
        BarChart {
            title: "Response-time distribution (all requests)".into(),
            y_label: "requests".into(),
            x_label: "latency (ms, bin centre)".into(),
            categories,
            series: vec![(
                "requests".into(),
                counts.iter().map(|&c| c as f64).collect(),
            )],
            highlight: None,
            // Every 5th label only, so they stay readable and whole.
            label_every: 5,
        }
        .render(),
    )
}

/// The run's slowest traced requests (a run with `--trace`): each trace ID
/// copied by a click, or a link where the run gave a URL with `{id}`.
fn exemplars_html(r: &Results) -> Markup {
    let ranked = crate::terminal::slowest_traced(r, SLOWEST_SHOWN);
    if ranked.is_empty() {
        return html! {};
    }
    let url = r.config.trace.as_ref().and_then(|t| t.url.as_deref());
    // Only a web address becomes a link (results.json may be hand-edited).
    let url = url.filter(|u| u.starts_with("http://") || u.starts_with("https://"));
    html! {
        h2 { "Slowest requests and their traces" }
        p class="meta" {
            "The " (ranked.len()) " slowest requests of the run (latency from the intended send              time), with the W3C trace ID each was sent with in traceparent. "
            "results.json's exemplars hold the 100 slowest and each request's 5 slowest per second. "
            @if url.is_none() { "Click an ID to copy it (--trace-url links them to your tracing backend)." }
        }
        div class="scroll" {
            table {
                thead { tr {
                    th { "#" } th class="text" { "Request" } th { "second" } th { "latency ms" }
                    th class="text" { "status" } th class="text" { "trace ID" }
                } }
                tbody {
                    @for e in &ranked {
                        tr {
                            td { (e.rank.unwrap_or(0)) }
                            td class="text" { (e.name) }
                            td { (e.second) }
                            td { (format!("{:.2}", e.latency_ms)) }
                            td class="text" { (crate::terminal::exemplar_status(e)) }
                            td class="text" {
                                @match url {
                                    Some(u) => a href=(u.replace("{id}", &e.trace_id)) { code { (e.trace_id) } },
                                    None => code class="copy" title="click to copy"
                                        onclick="navigator.clipboard.writeText(this.textContent)" { (e.trace_id) },
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Traced requests shown in the report (all 100 are in results.json).
const SLOWEST_SHOWN: usize = 20;

fn findings_html(r: &Results) -> Markup {
    let findings: Vec<_> = r.server.iter().flat_map(|s| &s.findings).collect();
    let nothing = !r.generator_bound && findings.is_empty() && r.warnings.is_empty();
    html! {
        h2 { "Findings" }
        ul {
            @if r.generator_bound {
                li class="fail" { "GENERATOR-BOUND: " (r.generator_bound_reasons.join("; ")) }
            }
            @for f in findings { li { b { (f.kind) } ": " (f.message) } }
            @for w in &r.warnings { li { (w) } }
            @if nothing { li { "Nothing ran out: no finding fired." } }
        }
    }
}

/// Responses by HTTP status, with their share of all requests.
/// `HTTP 2 asked: h2 × 4 connections (10 streams each)`, for the header.
fn protocol_text(r: &Results) -> String {
    let spoke: Vec<String> = r
        .connections
        .by_protocol
        .iter()
        .map(|(p, n)| format!("{p} × {n}"))
        .collect();
    let streams = r
        .config
        .max_streams
        .filter(|_| {
            let by = &r.connections.by_protocol;
            by.contains_key("h2") || by.contains_key("h3")
        })
        .map(|m| format!(" ({m} streams each)"))
        .unwrap_or_default();
    let quic = r
        .connections
        .quic
        .as_ref()
        .map(|q| {
            format!(
                "; QUIC handshakes {:.2} ms mean ({:.2} max), {} of {} packets lost",
                q.handshake_ms_mean, q.handshake_ms_max, q.packets_lost, q.packets_sent
            )
        })
        .unwrap_or_default();
    format!(
        "HTTP {} asked: {} connections{streams}{quic}",
        r.meta.http_version,
        if spoke.is_empty() {
            "no".to_string()
        } else {
            spoke.join(", ")
        }
    )
}

fn status_table(r: &Results) -> Table {
    let total = r.summary.requests.total.max(1) as f64;
    let mut t = Table::new(&["Status", "Responses", "% of requests"], &[0]);
    for (status, n) in &r.summary.status_codes {
        t.push(vec![
            status.clone(),
            n.to_string(),
            format!("{:.2}", *n as f64 / total * 100.0),
        ]);
    }
    if t.rows.is_empty() {
        t.push(vec!["(no response)".into(), "0".into(), "0.00".into()]);
    }
    t
}

/// Failed requests by class, with their share of all requests.
fn errors_table(r: &Results) -> Table {
    let total = r.summary.requests.total.max(1) as f64;
    let mut t = Table::new(&["Error", "Requests", "% of requests"], &[0]);
    for (class, n) in &r.summary.errors {
        t.push(vec![
            class.clone(),
            n.to_string(),
            format!("{:.2}", *n as f64 / total * 100.0),
        ]);
    }
    if t.rows.is_empty() {
        t.push(vec!["none".into(), "0".into(), "0.00".into()]);
    }
    t
}

/// The timeline without a last second the run only partly covered: its
/// counts are a fraction of a second's, drawn they would read as a drop.
/// `(t_s, f(point))` for each of `points`: a series over time.
fn over_time(points: &[TimelinePoint], f: &dyn Fn(&TimelinePoint) -> f64) -> Vec<(f64, f64)> {
    points.iter().map(|p| (p.t_s as f64, f(p))).collect()
}

fn whole_seconds(r: &Results) -> &[TimelinePoint] {
    let tl = &r.timeline;
    match tl.last() {
        Some(last) if (last.t_s as f64) - r.duration_s > 0.01 => &tl[..tl.len() - 1],
        _ => tl,
    }
}

/// The report of one run.
pub fn run_report(r: &Results) -> String {
    // Gatling's per-request table: OK and KO, then the figures.
    let mut per_request = Table::new(
        &[
            "Request", "Samples", "OK", "KO", "KO %", "p50 ms", "p90 ms", "p95 ms", "p99 ms",
            "max ms", "req/s",
        ],
        &[0],
    );
    for (name, s) in &r.per_request {
        let l = &s.latency_ms;
        per_request.push(vec![
            name.clone(),
            s.requests.total.to_string(),
            s.requests.ok.to_string(),
            s.requests.failed.to_string(),
            format!("{:.2}", s.requests.error_rate * 100.0),
            format!("{:.2}", l.p50),
            format!("{:.2}", l.p90),
            format!("{:.2}", l.p95),
            format!("{:.2}", l.p99),
            format!("{:.2}", l.max),
            format!("{:.1}", s.throughput_rps),
        ]);
    }
    let server = server_charts(r);
    let body = html! {
        h1 { (r.config.url) }
        p class="meta" {
            "headroom run — started " (r.meta.started_at) " — " (r.config.model) " model — "
            (format!("{:.1}", r.duration_s)) " s — " (r.summary.requests.total) " requests — "
            (protocol_text(r))
        }
        (thresholds_html(r))
        h2 { "Summary" }
        (table_html(&crate::terminal::aggregate_table(r), &[]))
        h2 { "Response-time ranges" }
        (table_html(&crate::terminal::distribution_table(r), &[]))
        div class="charts" {
            div { h2 { "Status codes" } (table_html(&status_table(r), &[])) }
            div { h2 { "Errors" } (table_html(&errors_table(r), &[])) }
        }
        h2 { "Per request" }
        (table_html(&per_request, &[]))
        @if let Some(t) = crate::events::table(r) {
            h2 { "Events" }
            p class="meta" {
                "after: from the event until the latency was back within the pre-event p99 for 5 s; \
                 before: as long, just before; max gap: the longest time in which no request \
                 completed OK"
            }
            (table_html(&t, &[]))
            div class="charts" { @for c in event_charts(r) { (c) } }
        }
        h2 { "Over time" }
        div class="charts" { @for c in timeline_charts(r) { (c) } }
        (exemplars_html(r))
        @if let Some(c) = distribution_chart(r) {
            h2 { "Distribution" }
            div class="charts" { (c) }
        }
        @if !server.is_empty() {
            h2 { "Server and machine" }
            p class="meta" { "watched: " (r.server.as_ref().map_or("", |s| s.source.as_str())) }
            div class="charts" { @for c in &server { (c) } }
        }
        (findings_html(r))
    };
    page(&format!("headroom — {}", r.config.url), body)
}

/// The report of a study: the comparison, charts across configurations
/// and, for a two-parameter grid, a heat-map.
/// Each configuration's name under its bar: with one server, its name on
/// every bar says nothing, so the parameters alone.
fn bar_labels(configs: &[&headroom_records::study::ConfigReport]) -> Vec<String> {
    let one_server = configs.windows(2).all(|w| w[0].server == w[1].server);
    configs
        .iter()
        .map(|c| {
            let short = c.label.strip_prefix(&c.server).map(str::trim);
            match short {
                Some(p) if one_server && !p.is_empty() => p.to_string(),
                _ => c.label.clone(),
            }
        })
        .collect()
}

/// A configuration's capacity over its repeats (the median); NaN, a gap,
/// when none was found.
fn median_capacity(c: &headroom_records::study::ConfigReport) -> f64 {
    c.stats
        .as_ref()
        .and_then(|s| s.capacity)
        .map_or(f64::NAN, |s| s.median)
}

pub fn study_report(report: &StudyReport) -> String {
    let winner = report.winner.as_ref().map(|w| w.label.clone());
    let configs: Vec<&headroom_records::study::ConfigReport> = report.configs.iter().collect();
    let highlight = winner
        .as_ref()
        .and_then(|w| configs.iter().position(|c| &c.label == w));
    let labels = bar_labels(&configs);
    let figure = |f: &dyn Fn(&Results) -> f64| -> Vec<f64> {
        configs
            .iter()
            .map(|c| c.results.as_ref().map_or(f64::NAN, f))
            .collect()
    };
    let peak = |f: &dyn Fn(&headroom_records::server::Summary) -> Option<f64>| -> Vec<f64> {
        configs
            .iter()
            .map(|c| {
                c.results
                    .as_ref()
                    .and_then(|r| r.server.as_ref())
                    .and_then(|s| f(&s.summary))
                    .unwrap_or(f64::NAN)
            })
            .collect()
    };
    let bar = |title: &str, y: &str, series: Vec<(String, Vec<f64>)>| {
        BarChart {
            title: title.into(),
            y_label: y.into(),
            x_label: "configuration".into(),
            categories: labels.clone(),
            series,
            highlight,
            label_every: 1,
        }
        .render()
    };
    let mut charts = Vec::new();
    if report.objective == headroom_records::study::Objective::Capacity {
        let caps: Vec<f64> = configs.iter().map(|c| median_capacity(c)).collect();
        charts.push(bar(
            "Capacity within the objective",
            "capacity (axis unit)",
            vec![("capacity".into(), caps)],
        ));
    }
    charts.push(bar(
        "Throughput",
        "req/s",
        vec![("throughput".into(), figure(&|r| r.summary.throughput_rps))],
    ));
    charts.push(bar(
        "Latency",
        "ms",
        vec![
            ("p90".into(), figure(&|r| r.summary.latency_ms.p90)),
            ("p99".into(), figure(&|r| r.summary.latency_ms.p99)),
        ],
    ));
    charts.push(bar(
        "Peak server CPU",
        "% of one core",
        vec![(
            "peak CPU".into(),
            peak(&|s| s.server_cpu_pct.map(|m| m.peak)),
        )],
    ));
    charts.push(bar(
        "Peak server memory",
        "MiB",
        vec![(
            "peak RSS".into(),
            peak(&|s| s.server_rss_bytes.map(|m| m.peak / 1048576.0)),
        )],
    ));
    if let Some(h) = heatmap(report) {
        charts.push(h);
    }
    let body = html! {
        h1 { "Study: " (report.study) }
        p class="meta" {
            "ranked by " (report.objective.describe()) " — " (report.configs.len())
            " configurations × " (report.repeat) " run(s)"
        }
        @match &report.winner {
            Some(w) => p class="verdict" { "Winner: " b { (w.label) } " — " (w.reason) },
            None => p class="verdict warn" { "No winner: no configuration met the objective." },
        }
        h2 { "Comparison" }
        (table_html(&crate::study_table::table(report, false), winner.as_slice()))
        h2 { "Charts" }
        div class="charts" { @for c in &charts { (c) } }
    };
    page(&format!("headroom study — {}", report.study), body)
}

/// Workers × threads (any two grid parameters of one server): throughput,
/// or capacity when that is the objective.
fn heatmap(report: &StudyReport) -> Option<Markup> {
    let first = report.configs.first()?;
    let keys: Vec<&String> = first.params.keys().collect();
    if keys.len() != 2 || report.configs.iter().any(|c| c.server != first.server) {
        return None;
    }
    let distinct = |k: &String| {
        let mut v: Vec<serde_json::Value> = Vec::new();
        for c in &report.configs {
            if let Some(x) = c.params.get(k) {
                if !v.contains(x) {
                    v.push(x.clone());
                }
            }
        }
        v
    };
    let (rk, ck) = (keys[0], keys[1]);
    let (rows, cols) = (distinct(rk), distinct(ck));
    let capacity = report.objective == headroom_records::study::Objective::Capacity;
    let values = rows
        .iter()
        .map(|r| {
            cols.iter()
                .map(|c| {
                    let cfg = report
                        .configs
                        .iter()
                        .find(|x| x.params.get(rk) == Some(r) && x.params.get(ck) == Some(c))?;
                    if capacity {
                        cfg.stats.as_ref()?.capacity.map(|s| s.median)
                    } else {
                        cfg.results.as_ref().map(|r| r.summary.throughput_rps)
                    }
                })
                .collect()
        })
        .collect();
    let text = |v: &serde_json::Value| headroom_records::study::param_text(v);
    Some(
        Heatmap {
            title: format!(
                "{} by {rk} × {ck}",
                if capacity { "Capacity" } else { "Throughput" }
            ),
            row_label: rk.clone(),
            col_label: ck.clone(),
            rows: rows.iter().map(text).collect(),
            cols: cols.iter().map(text).collect(),
            values,
            unit: "req/s".into(),
        }
        .render(),
    )
}

/// The report of a capacity search: latency and achieved load against the
/// offered load, with the knee and the capacity marked.
pub fn capacity_report(c: &CapacityReport) -> String {
    let mut sorted: Vec<&headroom_records::capacity::Step> = c
        .steps
        .iter()
        .filter(|s| s.results.is_some() && !s.discarded)
        .collect();
    sorted.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    let pts = |f: &dyn Fn(&Results) -> f64| -> Vec<(f64, f64)> {
        sorted
            .iter()
            .filter_map(|s| s.results.as_ref().map(|r| (s.offered, f(r))))
            .collect()
    };
    let mut markers = Vec::new();
    if let Some(k) = c.knee {
        markers.push(Marker {
            x: k,
            label: format!("knee {}", svg::short(k)),
        });
    }
    if let Some(cap) = c.capacity {
        markers.push(Marker {
            x: cap,
            label: format!("capacity {}", svg::short(cap)),
        });
    }
    let x_label = format!("offered load ({})", c.unit);
    let mut lat = LineChart::new("Latency against offered load", &x_label, "latency (ms)");
    lat.series
        .push(Series::new("p50", pts(&|r| r.summary.latency_ms.p50)));
    lat.series
        .push(Series::new("p90", pts(&|r| r.summary.latency_ms.p90)));
    lat.series
        .push(Series::new("p99", pts(&|r| r.summary.latency_ms.p99)));
    lat.markers = markers;
    let mut ach = LineChart::new(
        "Achieved against offered load",
        &x_label,
        "achieved (OK req/s)",
    );
    ach.series.push(Series::new(
        "achieved",
        sorted.iter().map(|s| (s.offered, s.achieved)).collect(),
    ));
    ach.diagonal = c.unit == "req/s";
    for m in &lat.markers {
        ach.markers.push(Marker {
            x: m.x,
            label: m.label.clone(),
        });
    }
    let mut err = LineChart::new("Errors against offered load", &x_label, "errors (%)");
    err.series.push(Series::new(
        "errors",
        pts(&|r| r.summary.requests.error_rate * 100.0),
    ));
    let body = html! {
        h1 { "Capacity: " (c.target) }
        p class="meta" {
            "objective " (c.slo) " — " (c.unit) " axis — " (c.steps.len()) " steps in "
            (format!("{:.0}", c.elapsed_s)) " s"
        }
        p class={ "verdict" @if c.generator_bound { " warn" } } { (c.verdict) }
        @if let (Some(kind), Some(detail)) = (&c.limited_by, &c.limited_by_detail) {
            p { b { "Limited by" } ": " (kind) " — " (detail) }
        }
        h2 { "Steps" }
        (table_html(&crate::capacity_table::steps(c), &[]))
        h2 { "Charts" }
        div class="charts" { (lat.render()) (ach.render()) (err.render()) }
    };
    page(&format!("headroom capacity — {}", c.target), body)
}

/// The report of `headroom compare`.
pub fn compare_report(cmp: &crate::compare::Comparison) -> String {
    let categories = cmp.names.clone();
    let mut charts = Vec::new();
    for (metric, title, unit) in [
        ("throughput_rps", "Throughput", "req/s"),
        ("p90_ms", "p90 latency", "ms"),
        ("p99_ms", "p99 latency", "ms"),
    ] {
        let values: Vec<f64> = cmp.values(metric);
        charts.push(
            BarChart {
                title: title.into(),
                y_label: unit.into(),
                x_label: "run".into(),
                categories: categories.clone(),
                series: vec![(metric.into(), values)],
                highlight: None,
                label_every: 1,
            }
            .render(),
        );
    }
    let body = html! {
        h1 { "Comparison" }
        p class="meta" {
            "baseline: " (cmp.names[0]) " — differences marked noise when the spreads overlap"
        }
        @for n in cmp.notes() { p class="meta" { "note: " (n) } }
        (table_html(&cmp.table(), &[]))
        div class="charts" { @for c in &charts { (c) } }
    };
    page("headroom compare", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What users type — a URL, request names, warnings — lands in the
    /// page as text, never as markup.
    #[test]
    fn what_users_typed_is_escaped() {
        let mut r: Results =
            serde_json::from_str(include_str!("../../../records/tests/data/results-min.json"))
                .unwrap();
        r.config.url = "http://127.0.0.1:1/?a=<script>alert(1)</script>&b=\"c\"".into();
        let named = r.summary.clone();
        r.per_request
            .insert("<img src=x onerror=boom>".into(), named);
        r.warnings.push("a & b < c".into());
        let page = run_report(&r);
        // The only scripts are the report's own: uPlot, the charts' code
        // and the line that draws them.
        assert!(!page.contains("<script>alert"), "{page}");
        assert_eq!(page.matches("<script>").count(), 3);
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;b=&quot;c&quot;"));
        assert!(page.contains("&lt;img src=x onerror=boom&gt;"));
        assert!(page.contains("<li>a &amp; b &lt; c</li>"));
        // The style sheet is the one thing written as it is.
        assert!(page.contains("th, td { padding"));
    }
}
