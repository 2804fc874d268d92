//! The charts of the server's resources in a run's report: CPU, memory,
//! open files and load (the server's, the machine's and the generator's),
//! accept queues against their limits, and each probe's gauges.

use super::charts::{LineChart, Series};
use super::event_markers;
use headroom_records::results::Results;
use headroom_records::server::sample::Sample;
use maud::Markup;

pub(super) fn server_charts(r: &Results) -> Vec<Markup> {
    let Some(server) = &r.server else {
        return Vec::new();
    };
    let samples = &server.samples;
    let mut charts = usage_charts(r, samples);
    charts.extend(queue_chart(r, samples));
    charts.extend(probe_charts(r, samples));
    charts
}

/// `(t_s, value)` of each sample `f` has a value for.
fn points(samples: &[Sample], f: &dyn Fn(&Sample) -> Option<f64>) -> Vec<(f64, f64)> {
    samples
        .iter()
        .filter_map(|s| f(s).map(|v| (s.t_s, v)))
        .collect()
}

/// The server's tree in a sample, while it was alive.
fn alive(s: &Sample) -> Option<headroom_records::server::sample::TreeSample> {
    s.server.clone().filter(|t| t.alive)
}

/// CPU, memory, open files and load: the server's (when watched), the
/// machine's and the generator's.
fn usage_charts(r: &Results, samples: &[Sample]) -> Vec<Markup> {
    let pts = |f: &dyn Fn(&Sample) -> Option<f64>| points(samples, f);
    let mut charts = Vec::new();
    let mut cpu = LineChart::new(
        "CPU",
        "time since start (s)",
        "CPU (% of one core; machine: % of all cores)",
    );
    let watched = samples.iter().any(|s| s.server.is_some());
    if watched {
        cpu.series
            .push(Series::new("server", pts(&|s| alive(s).map(|t| t.cpu_pct))));
    }
    cpu.series.push(Series::new(
        "machine busy",
        pts(&|s| s.machine.as_ref().map(|m| 100.0 - m.cpu_idle_pct)),
    ));
    cpu.series.push(Series::new(
        "generator",
        pts(&|s| s.generator.as_ref().map(|g| g.cpu_pct)),
    ));
    cpu.markers = event_markers(r);
    charts.push(cpu.render());
    let mut mem = LineChart::new("Memory", "time since start (s)", "MiB");
    if watched {
        mem.series.push(Series::new(
            "server RSS",
            pts(&|s| alive(s).map(|t| t.rss_bytes as f64 / 1048576.0)),
        ));
    }
    mem.series.push(Series::new(
        "generator RSS",
        pts(&|s| s.generator.as_ref().map(|g| g.rss_bytes as f64 / 1048576.0)),
    ));
    mem.markers = event_markers(r);
    charts.push(mem.render());
    let mut fds = LineChart::new(
        "Open files and load",
        "time since start (s)",
        "open file descriptors",
    );
    if watched {
        fds.series.push(Series::new(
            "server fds",
            pts(&|s| alive(s).map(|t| t.fds as f64)),
        ));
    }
    fds.series.push(Series::new(
        "generator fds",
        pts(&|s| s.generator.as_ref().map(|g| g.fds as f64)),
    ));
    fds.series.push(
        Series::new(
            "load average (1 min)",
            pts(&|s| s.machine.as_ref().map(|m| m.load1)),
        )
        .right(),
    );
    fds.y2_label = Some("load average".into());
    fds.markers = event_markers(r);
    charts.push(fds.render());
    charts
}

/// Each listening socket's accept queue against its limit — what fills
/// when every worker is busy — and what waits inside the server, as its
/// probes tell (Puma's backlog, Passenger's request queue, haproxy's
/// backend queues). `None` when there is neither.
fn queue_chart(r: &Results, samples: &[Sample]) -> Option<Markup> {
    let pts = |f: &dyn Fn(&Sample) -> Option<f64>| points(samples, f);
    let addresses: std::collections::BTreeSet<String> = samples
        .iter()
        .filter_map(|s| s.server.as_ref())
        .flat_map(|t| t.accept_queues.iter().map(|q| q.address.clone()))
        .collect();
    let inside = pts(&|s| s.probe_queued());
    if addresses.is_empty() && inside.is_empty() {
        return None;
    }
    let mut queues = LineChart::new(
        "Accept queues",
        "time since start (s)",
        "connections waiting for a worker",
    );
    if !inside.is_empty() {
        queues
            .series
            .push(Series::new("queued inside the server (probes)", inside));
    }
    for address in &addresses {
        let queue = |s: &Sample| {
            alive(s)?
                .accept_queues
                .into_iter()
                .find(|q| &q.address == address)
        };
        queues.series.push(Series::new(
            address,
            pts(&|s| queue(s).map(|q| q.depth as f64)),
        ));
        let limit = pts(&|s| queue(s).map(|q| q.limit as f64));
        // The limit only where the queue came near it: a 4096 line
        // would flatten a queue of 14.
        let depth_peak = pts(&|s| queue(s).map(|q| q.depth as f64))
            .iter()
            .map(|p| p.1)
            .fold(0.0, f64::max);
        if limit.iter().any(|p| depth_peak >= p.1 / 2.0) {
            queues
                .series
                .push(Series::new(&format!("{address} limit"), limit));
        }
    }
    queues.markers = event_markers(r);
    Some(queues.render())
}

/// Each probe's gauges, one chart per probe.
fn probe_charts(r: &Results, samples: &[Sample]) -> Vec<Markup> {
    let kinds: std::collections::BTreeSet<&String> =
        samples.iter().flat_map(|s| s.probes.keys()).collect();
    let mut charts = Vec::new();
    for kind in kinds {
        let names: std::collections::BTreeSet<&String> = samples
            .iter()
            .filter_map(|s| s.probes.get(kind))
            .flat_map(|g| g.keys())
            .collect();
        let mut gauges = LineChart::new(
            &format!("The server's own gauges: {kind} probe"),
            "time since start (s)",
            "as the server reports them",
        );
        for name in names {
            gauges.series.push(Series::new(
                name,
                points(samples, &|s| {
                    s.probes.get(kind).and_then(|g| g.get(name)).copied()
                }),
            ));
        }
        gauges.markers = event_markers(r);
        charts.push(gauges.render());
    }
    charts
}
