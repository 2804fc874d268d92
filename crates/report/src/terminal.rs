//! The end-of-run summary for people: the JMeter aggregate table (one row
//! per request name and a TOTAL), the Gatling response-time distribution,
//! status codes, error classes and warnings. Plain text with units on
//! every figure, stable for logs and diffs.

use crate::table::Table;
use headroom_metrics::ErrorClass;
use headroom_records::exemplars::Exemplar;
use headroom_records::results::{LatencySummary, Results, Summary};
use std::io::{self, Write};

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn aggregate_row(label: &str, s: &Summary) -> Vec<String> {
    let l: &LatencySummary = &s.latency_ms;
    vec![
        label.to_string(),
        thousands(s.requests.total),
        ms(l.mean),
        ms(l.p50),
        ms(l.p90),
        ms(l.p95),
        ms(l.p99),
        ms(l.min),
        ms(l.max),
        format!("{:.1}", s.throughput_rps),
        format!("{:.1}", s.received_kib_per_s),
        format!("{:.2} %", s.requests.error_rate * 100.0),
    ]
}

/// The JMeter aggregate table: a row per request name (when there are
/// several) and the TOTAL. The terminal, HTML and Markdown all show this.
pub fn aggregate_table(r: &Results) -> Table {
    let mut t = Table::new(
        &[
            "Label",
            "Samples",
            "Mean ms",
            "Median ms",
            "90% ms",
            "95% ms",
            "99% ms",
            "Min ms",
            "Max ms",
            "Throughput/s",
            "Received KiB/s",
            "Error %",
        ],
        &[0],
    );
    if r.per_request.len() > 1 {
        for (name, summary) in &r.per_request {
            t.push(aggregate_row(name, summary));
        }
    }
    t.push(aggregate_row("TOTAL", &r.summary));
    t
}

/// Gatling's response-time ranges.
pub fn distribution_table(r: &Results) -> Table {
    let mut t = Table::new(&["Response time", "Requests", "%"], &[0]);
    for b in &r.summary.distribution {
        t.push(vec![
            b.label.clone(),
            thousands(b.count),
            format!("{:.2} %", b.percent),
        ]);
    }
    t
}

/// Left-aligns the first column and right-aligns the rest.
fn write_table(out: &mut dyn Write, rows: &[Vec<String>]) -> io::Result<()> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            if c == 0 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str("  ");
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        writeln!(out, "  {}", line.trim_end())?;
    }
    Ok(())
}

/// The run's summary as the terminal shows it: what was run, the
/// connections and protocols, the rate, the tables, then what else was
/// seen (sockets, events, the server, verdicts and warnings).
pub fn write_summary(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    write_heading(out, r)?;
    write_connections(out, r)?;
    write_rate(out, r)?;
    write_tables(out, r)?;
    write_seen(out, r)
}

/// What was run, and its totals.
fn write_heading(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    let c = &r.config;
    let s = &r.summary;
    // Open-model arrivals are requests, or users each running a session.
    let users_arrive = c.arrivals.as_deref() == Some("users");
    let load = match c.model.as_str() {
        "open" if users_arrive => format!(
            "open model, {:.1} users/s arriving",
            r.target_rate_rps.unwrap_or(0.0)
        ),
        "open" => format!(
            "open model, {:.1} req/s requested",
            r.target_rate_rps.unwrap_or(0.0)
        ),
        _ if !c.stages.is_empty() => format!(
            "closed model, up to {} users in {} stages",
            c.vus.unwrap_or(0),
            c.stages.len()
        ),
        _ => format!("closed model, {} users", c.vus.unwrap_or(0)),
    };
    writeln!(out)?;
    writeln!(
        out,
        "headroom run — {} — {load}{}",
        c.url,
        if r.interrupted {
            " — INTERRUPTED"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "  {} requests in {:.2} s: {} ok, {} failed ({:.2} %); {:.1} req/s; {:.1} KiB/s received; {} connections opened",
        thousands(s.requests.total),
        r.duration_s,
        thousands(s.requests.ok),
        thousands(s.requests.failed),
        s.requests.error_rate * 100.0,
        s.throughput_rps,
        s.received_kib_per_s,
        thousands(r.connections_opened),
    )?;
    Ok(())
}

/// The protocols spoken, QUIC's figures, and requests sent again.
fn write_connections(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    let k = &r.connections;
    if k.by_protocol.keys().any(|p| p != "http/1.1") || r.meta.http_version != "1.1" {
        let spoke: Vec<String> = k
            .by_protocol
            .iter()
            .map(|(p, n)| format!("{p} {}", thousands(*n)))
            .collect();
        writeln!(
            out,
            "  protocol: HTTP {} asked; connections by protocol: {}{}",
            r.meta.http_version,
            if spoke.is_empty() {
                "none".to_string()
            } else {
                spoke.join(", ")
            },
            r.config
                .max_streams
                .filter(|_| k.by_protocol.contains_key("h2") || k.by_protocol.contains_key("h3"))
                .map(|m| format!(" (at most {m} streams each)"))
                .unwrap_or_default(),
        )?;
    }
    if let Some(q) = &k.quic {
        write_quic(out, q, k)?;
    }
    if k.h3_refused + k.h3_goaway_unprocessed > 0 {
        writeln!(
            out,
            "  HTTP/3: {} requests sent again after the server rejected their stream \
             (H3_REQUEST_REJECTED), {} after its GOAWAY came before they were sent",
            thousands(k.h3_refused),
            thousands(k.h3_goaway_unprocessed),
        )?;
    }
    if k.h2_refused + k.h2_goaway_unprocessed > 0 {
        writeln!(
            out,
            "  HTTP/2: {} requests sent again after the server refused their stream \
             (REFUSED_STREAM), {} after its GOAWAY left them unprocessed",
            thousands(k.h2_refused),
            thousands(k.h2_goaway_unprocessed),
        )?;
    }
    if k.reconnects_idle_closed + k.retried_stale + k.closed_unrequested_bytes > 0 {
        writeln!(
            out,
            "  connections: {} reconnected after the server closed them while idle (its keep-alive \
             timeout is shorter than the pause), {} requests sent again after meeting a connection \
             the server had just closed, {} closed after the server sent bytes nobody asked for",
            thousands(k.reconnects_idle_closed),
            thousands(k.retried_stale),
            thousands(k.closed_unrequested_bytes),
        )?;
    }
    Ok(())
}

/// What QUIC counted: handshakes, loss, time to first byte, 0-RTT,
/// resets and how connections closed.
fn write_quic(
    out: &mut dyn Write,
    q: &headroom_records::results::QuicSummary,
    k: &headroom_records::results::Connections,
) -> io::Result<()> {
    let loss = if q.packets_sent > 0 {
        q.packets_lost as f64 / q.packets_sent as f64 * 100.0
    } else {
        0.0
    };
    writeln!(
        out,
        "  QUIC: {} handshakes (1-RTT) in {:.2} ms mean, {:.2} ms max; {} packets sent, {} lost \
         ({loss:.3} %), {} congestion events",
        thousands(q.handshakes),
        q.handshake_ms_mean,
        q.handshake_ms_max,
        thousands(q.packets_sent),
        thousands(q.packets_lost),
        thousands(q.congestion_events),
    )?;
    if let Some(t) = &q.ttfb_ms {
        writeln!(
            out,
            "  HTTP/3 time to first byte: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            t.p50, t.p99, t.max
        )?;
    }
    if q.handshakes_0rtt > 0 {
        writeln!(
            out,
            "  0-RTT: {} connections resumed with early data: {} accepted by the server, {} \
             refused ({} requests sent again)",
            thousands(q.handshakes_0rtt),
            thousands(q.zero_rtt_accepted),
            thousands(q.zero_rtt_rejected),
            thousands(k.quic_0rtt_rejected),
        )?;
    }
    let named = |m: &std::collections::BTreeMap<String, u64>| -> String {
        m.iter()
            .map(|(k, n)| format!("{k} {}", thousands(*n)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !q.stream_resets.is_empty() {
        writeln!(
            out,
            "  HTTP/3 stream resets by code: {}",
            named(&q.stream_resets)
        )?;
    }
    if !q.closed.is_empty() {
        writeln!(out, "  QUIC connections closed: {}", named(&q.closed))?;
    }
    Ok(())
}

/// Open model: the rate asked and sent, and how late sends were.
fn write_rate(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    // Open-model arrivals are requests, or users each running a session.
    let users_arrive = r.config.arrivals.as_deref() == Some("users");
    if let (Some(target), Some(achieved), Some(lag)) =
        (r.target_rate_rps, r.achieved_rate_rps, &r.send_lag_ms)
    {
        if users_arrive {
            // Users and requests are different units: no ratio.
            writeln!(
                out,
                "  arrivals: {target:.1} users/s, each on its own connections; {achieved:.1} req/s sent; send lag p50 {} ms, p99 {} ms, max {} ms",
                ms(lag.p50),
                ms(lag.p99),
                ms(lag.max),
            )?;
        } else {
            writeln!(
            out,
            "  rate: {target:.1} req/s requested, {achieved:.1} req/s sent ({:+.2} %); send lag p50 {} ms, p99 {} ms, max {} ms",
            if target > 0.0 { (achieved / target - 1.0) * 100.0 } else { 0.0 },
            ms(lag.p50),
            ms(lag.p99),
            ms(lag.max),
        )?;
        }
    }
    Ok(())
}

/// The aggregate table, the distribution, statuses and errors.
fn write_tables(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    let (c, s) = (&r.config, &r.summary);
    writeln!(out)?;
    writeln!(
        out,
        "Aggregate report (latency in ms, all requests, from the intended send time)"
    )?;
    write_table(out, &aggregate_table(r).with_headers())?;
    if c.model == "open" {
        let st = &r.service_time_ms;
        writeln!(
            out,
            "  (from the actual send, as coordinated-omission-prone tools report: median {} ms, 99% {} ms)",
            ms(st.p50),
            ms(st.p99)
        )?;
    }

    writeln!(out)?;
    writeln!(out, "Response time distribution")?;
    write_table(out, &distribution_table(r).rows)?;

    writeln!(out)?;
    let codes: Vec<String> = s
        .status_codes
        .iter()
        .map(|(code, n)| format!("{code} × {}", thousands(*n)))
        .collect();
    writeln!(
        out,
        "Status codes: {}",
        if codes.is_empty() {
            "none".to_string()
        } else {
            codes.join(", ")
        }
    )?;
    if !s.errors.is_empty() {
        writeln!(out, "Errors:")?;
        let rows: Vec<Vec<String>> = s
            .errors
            .iter()
            .map(|(key, n)| {
                let what = ErrorClass::from_key(key).map_or(
                    if key.starts_with("check: ") {
                        "a check failed"
                    } else {
                        ""
                    },
                    |c| c.describe(),
                );
                vec![key.clone(), thousands(*n), what.to_string()]
            })
            .collect();
        write_table(out, &rows)?;
    }
    write_slowest_traced(out, r)
}

/// The run's `n` slowest traced requests, slowest first (a run with
/// `--trace`; empty otherwise).
pub fn slowest_traced(r: &Results, n: usize) -> Vec<&Exemplar> {
    headroom_records::exemplars::ranked(&r.exemplars, n)
}

/// An exemplar's outcome: its status, or its error class.
pub fn exemplar_status(e: &Exemplar) -> String {
    match (&e.error, e.status) {
        (Some(class), _) => class.clone(),
        (None, Some(status)) => status.to_string(),
        (None, None) => String::new(),
    }
}

/// Where the slowest requests' traces are: the five slowest, each with
/// its trace ID (and link, where the run gave a URL).
fn write_slowest_traced(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    let ranked = slowest_traced(r, 5);
    if ranked.is_empty() {
        return Ok(());
    }
    let url = r.config.trace.as_ref().and_then(|t| t.url.as_deref());
    writeln!(out)?;
    writeln!(
        out,
        "Slowest traced requests (all 100 and each second's in results.json: exemplars)"
    )?;
    let mut rows = vec![vec![
        "Request".to_string(),
        "second".into(),
        "latency ms".into(),
        "status".into(),
        "trace ID".into(),
    ]];
    for e in ranked {
        rows.push(vec![
            e.name.clone(),
            e.second.to_string(),
            ms(e.latency_ms),
            exemplar_status(e),
            match url {
                Some(u) => u.replace("{id}", &e.trace_id),
                None => e.trace_id.clone(),
            },
        ]);
    }
    write_table(out, &rows)
}

/// The scripts' calls, errors and generator CPU, per function; each error
/// with where it was thrown.
fn write_scripts(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "Scripts (generator CPU per call, µs)")?;
    let mut rows = vec![vec![
        "Function".to_string(),
        "Calls".into(),
        "Errors".into(),
        "Failures".into(),
        "CPU ms".into(),
        "Mean µs".into(),
        "99% µs".into(),
    ]];
    for (name, f) in &r.scripts {
        rows.push(vec![
            name.clone(),
            thousands(f.calls),
            thousands(f.errors),
            thousands(f.failures),
            format!("{:.1}", f.cpu_ms_total),
            format!("{:.1}", f.cpu_us_mean),
            format!("{:.1}", f.cpu_us_p99),
        ]);
    }
    write_table(out, &rows)?;
    for (name, f) in &r.scripts {
        for (message, n) in f.error_messages.iter().chain(&f.failure_messages) {
            writeln!(out, "  {name}: {} × {message}", thousands(*n))?;
        }
    }
    Ok(())
}

/// Sockets, events, the server watched, and the run's verdicts.
fn write_seen(out: &mut dyn Write, r: &Results) -> io::Result<()> {
    if !r.scripts.is_empty() {
        write_scripts(out, r)?;
    }
    if let Some(sockets) = &r.sockets {
        write_sockets(out, sockets)?;
    }
    if let Some(events) = crate::events::table(r) {
        writeln!(out)?;
        writeln!(
            out,
            "Events (after: from the event until the latency was back for 5 s; before: as long, just before)"
        )?;
        events.write_text(out)?;
    }
    // The block is the server's: without one watched, the generator's own
    // figures speak only through the generator-bound verdict below.
    match &r.server {
        Some(server) if server.samples.iter().any(|x| x.server.is_some()) => {
            write_server(out, server)?;
        }
        Some(server) if !server.findings.is_empty() => {
            writeln!(out, "\nFindings (generator and machine):")?;
            for f in &server.findings {
                writeln!(out, "  - {}", f.message)?;
            }
        }
        _ => {}
    }
    if r.generator_bound {
        writeln!(out)?;
        writeln!(
            out,
            "GENERATOR-BOUND: these figures describe the load generator's limit, not the server's:"
        )?;
        for reason in &r.generator_bound_reasons {
            writeln!(out, "  - {reason}")?;
        }
    }
    if let Some(reason) = &r.stop_reason {
        writeln!(out, "stopped early: {reason}")?;
    }
    for w in &r.warnings {
        writeln!(out, "warning: {w}")?;
    }
    Ok(())
}

fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / (1024.0 * 1024.0))
}

/// The server table (mean and peak of each figure) and the findings.
/// The server's and the machine's figures, mean and peak: the terminal
/// summary's block and the Markdown report's table.
pub fn server_table(server: &headroom_records::server::ServerReport) -> Table {
    use headroom_records::server::MeanPeak;
    let s = &server.summary;
    let mut table = Table::new(&["", "mean", "peak"], &[0]);
    let mut row = |label: &str, v: Option<MeanPeak>, f: &dyn Fn(f64) -> String| {
        if let Some(v) = v {
            table.push(vec![label.to_string(), f(v.mean), f(v.peak)]);
        }
    };
    let pct = |v: f64| format!("{v:.0} %");
    let num = |v: f64| format!("{v:.0}");
    let dec = |v: f64| format!("{v:.2}");
    row("server CPU (100 % = 1 core)", s.server_cpu_pct, &pct);
    row("server resident memory (MiB)", s.server_rss_bytes, &|v| {
        mib(v)
    });
    row("server processes", s.server_processes, &num);
    row("server threads", s.server_threads, &num);
    row("server open files", s.server_fds, &num);
    row(
        "server accept queue (connections waiting)",
        s.server_accept_queue,
        &num,
    );
    row(
        "machine CPU busy (100 % = all cores)",
        s.machine_cpu_busy_pct,
        &pct,
    );
    row("machine CPU iowait", s.machine_iowait_pct, &pct);
    row("load average (1 min)", s.load1, &dec);
    row("memory available (MiB)", s.mem_available_bytes, &|v| mib(v));
    row("swap used (MiB)", s.swap_used_bytes, &|v| mib(v));
    row("TCP established", s.tcp_established, &num);
    row("TCP time-wait", s.tcp_time_wait, &num);
    row("generator CPU (100 % = 1 core)", s.generator_cpu_pct, &pct);
    row(
        "generator resident memory (MiB)",
        s.generator_rss_bytes,
        &|v| mib(v),
    );
    // A study's services: beside the server, not in its figures.
    for (name, service) in &s.services {
        row(&format!("service {name} CPU"), service.cpu_pct, &pct);
        row(
            &format!("service {name} resident memory (MiB)"),
            service.rss_bytes,
            &|v| mib(v),
        );
    }
    table
}

fn write_server(
    out: &mut dyn Write,
    server: &headroom_records::server::ServerReport,
) -> io::Result<()> {
    let s = &server.summary;
    writeln!(out)?;
    writeln!(
        out,
        "Server and machine ({}, every {:.1} s)",
        server.source, server.interval_s
    )?;
    write_table(out, &server_table(server).with_headers())?;
    writeln!(
        out,
        "  listen queue overflows: {}, SYNs dropped: {}",
        s.listen_overflows, s.listen_drops
    )?;
    for r in &server.restarts {
        let down = r.down_ms.map_or(String::new(), |d| {
            format!(", nothing running for ≤ {d:.0} ms")
        });
        writeln!(
            out,
            "  server restarted by {:.1} s: pid {} → {} (found by {}{down})",
            r.t_s, r.old_pid, r.new_pid, r.how
        )?;
    }
    if server.findings.is_empty() {
        writeln!(out, "Findings: nothing saturated")?;
    } else {
        writeln!(out, "Findings:")?;
        for f in &server.findings {
            writeln!(out, "  - {}", f.message)?;
        }
    }
    for e in &server.errors {
        writeln!(out, "monitor: {e}")?;
    }
    Ok(())
}

/// The sockets block: what was opened, what went each way, how they closed.
fn write_sockets(out: &mut dyn Write, k: &headroom_records::results::Sockets) -> io::Result<()> {
    let kib = |b: u64| format!("{:.1} KiB", b as f64 / 1024.0);
    let mut opened = Vec::new();
    if k.websockets_opened > 0 {
        opened.push(format!("{} WebSockets", thousands(k.websockets_opened)));
    }
    if k.event_streams_opened > 0 {
        let again = if k.event_stream_reconnects > 0 {
            format!(" ({} reconnects)", thousands(k.event_stream_reconnects))
        } else {
            String::new()
        };
        opened.push(format!(
            "{} event streams{again}",
            thousands(k.event_streams_opened)
        ));
    }
    if k.grpc_streams_opened > 0 {
        opened.push(format!("{} gRPC streams", thousands(k.grpc_streams_opened)));
    }
    writeln!(out)?;
    writeln!(
        out,
        "Sockets: {} opened, at most {} open at once",
        if opened.is_empty() {
            "none".to_string()
        } else {
            opened.join(" and ")
        },
        thousands(u64::from(k.open_peak))
    )?;
    writeln!(
        out,
        "  messages sent {} ({:.1}/s, {}), received {} ({:.1}/s, {}); {} unmatched{}",
        thousands(k.messages_sent),
        k.messages_sent_per_s,
        kib(k.bytes_sent),
        thousands(k.messages_received),
        k.messages_received_per_s,
        kib(k.bytes_received),
        thousands(k.unmatched),
        if k.pings_received > 0 {
            format!("; {} pings answered", thousands(k.pings_received))
        } else {
            String::new()
        }
    )?;
    if !k.closes.is_empty() {
        let closes: Vec<String> = k
            .closes
            .iter()
            .map(|(how, n)| format!("{how} × {}", thousands(*n)))
            .collect();
        writeln!(out, "  closed: {}", closes.join(", "))?;
    }
    Ok(())
}
