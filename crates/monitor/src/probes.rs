//! The servers' own gauges, where they publish them: what their workers
//! are doing and how much waits for them — the figures the accept queue
//! cannot see (Puma queues accepted requests for its threads; haproxy
//! queues them for its backends). Each probe is read on a thread of its
//! own once per interval ([`Probing`]), so a slow one never delays the
//! monitor's samples; a probe that fails is a warning, never a failed run.
//!
//! | probe | target | gauges |
//! |---|---|---|
//! | `puma` | the control app's stats URL (`--control-url`, with `?token=`) | `backlog`, `running`, `pool_capacity`, `max_threads`, `busy_threads` (over workers) |
//! | `nginx` | a `stub_status` URL | `active`, `reading`, `writing`, `waiting` |
//! | `haproxy` | the stats socket (`stats socket PATH`) | `BACKEND.queue`, `BACKEND.sessions`, `FRONTEND.sessions` per proxy |
//! | `passenger` | `passenger-status`: its instance registry folder, an instance name, or nothing (the only instance) | `request_queue`, `processes`, `sessions` (busy) |
//! | `prometheus` | a URL serving the text format, `#name,name…` | each named series (summed over its labels) |

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one HTTP or socket probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);

/// How long `passenger-status` may run: a Ruby program that takes most of
/// a second to start on an idle machine, longer on a saturated one.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// A probe's reading: its gauges, or why they could not be read.
pub type Reading = Result<BTreeMap<String, f64>, String>;

/// Probes read in the background, each on its own thread once per
/// interval; a sample takes each one's newest reading it has not taken.
pub struct Probing {
    slots: Vec<Slot>,
    interval: Duration,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

struct Slot {
    name: &'static str,
    /// The newest reading not yet taken, and when it was read.
    newest: Arc<Mutex<Option<(Instant, Reading)>>>,
    /// The last gauges taken, and when they were read.
    last: Option<(Instant, BTreeMap<String, f64>)>,
}

/// How many intervals a sample may carry a probe's gauges while the probe
/// reads again: a gauge is a level, and two samples in a row must see a
/// queue for a finding even when `passenger-status` takes two seconds.
const CARRIED_INTERVALS: u32 = 3;

/// What a sample gets from a probe.
pub enum Taken {
    /// A reading made since the last sample.
    Fresh(Reading),
    /// The last gauges again: the probe is still reading.
    Carried(BTreeMap<String, f64>),
}

impl Probing {
    /// Starts reading `probes`, the first reading at once.
    pub fn start(probes: &[Probe], interval: Duration) -> Probing {
        let stop = Arc::new(AtomicBool::new(false));
        let mut slots = Vec::new();
        let mut threads = Vec::new();
        for probe in probes {
            let newest = Arc::new(Mutex::new(None));
            slots.push(Slot {
                name: probe.kind.name(),
                newest: newest.clone(),
                last: None,
            });
            let (probe, stop) = (probe.clone(), stop.clone());
            let thread = std::thread::Builder::new()
                .name(format!("probe {}", probe.kind.name()))
                .spawn(move || {
                    let start = Instant::now();
                    let mut k = 0u32;
                    while !stop.load(Ordering::SeqCst) {
                        let reading = probe.read();
                        *newest.lock().expect("probe lock") = Some((Instant::now(), reading));
                        // The next tick of the interval (ticks missed by
                        // a slow read are skipped, not caught up).
                        k = k.max((start.elapsed().as_secs_f64() / interval.as_secs_f64()) as u32)
                            + 1;
                        let due = start + interval * k;
                        while Instant::now() < due && !stop.load(Ordering::SeqCst) {
                            std::thread::sleep(
                                (due - Instant::now()).min(Duration::from_millis(20)),
                            );
                        }
                    }
                });
            if let Ok(t) = thread {
                threads.push(t);
            }
        }
        Probing {
            slots,
            interval,
            stop,
            threads,
        }
    }

    /// Each probe's newest reading since the last call, by index and
    /// kind; for a probe still reading, its last gauges if they are at
    /// most [`CARRIED_INTERVALS`] old.
    pub fn take(&mut self) -> Vec<(usize, &'static str, Taken)> {
        let oldest = self.interval * CARRIED_INTERVALS;
        let mut taken = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let fresh = slot.newest.lock().expect("probe lock").take();
            match fresh {
                Some((at, reading)) => {
                    slot.last = reading.as_ref().ok().map(|g| (at, g.clone()));
                    taken.push((i, slot.name, Taken::Fresh(reading)));
                }
                None => {
                    if let Some((at, gauges)) = &slot.last {
                        if at.elapsed() <= oldest {
                            taken.push((i, slot.name, Taken::Carried(gauges.clone())));
                        }
                    }
                }
            }
        }
        taken
    }
}

impl Drop for Probing {
    /// Stops the threads; one in the middle of a read ends with it (its
    /// timeout bounds the wait).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The largest answer a probe reads.
const MAX_ANSWER: u64 = 4 * 1024 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Puma,
    Nginx,
    Haproxy,
    Passenger,
    Prometheus,
}

/// One probe: `KIND=TARGET` on the command line and in study files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub kind: Kind,
    /// A URL, a socket path, or (passenger) an instance name.
    pub target: String,
    /// `prometheus`: the series to keep.
    pub series: Vec<String>,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Puma => "puma",
            Kind::Nginx => "nginx",
            Kind::Haproxy => "haproxy",
            Kind::Passenger => "passenger",
            Kind::Prometheus => "prometheus",
        }
    }
}

impl std::str::FromStr for Probe {
    type Err = String;

    fn from_str(spec: &str) -> Result<Probe, String> {
        let (kind, target) = spec.split_once('=').unwrap_or((spec, ""));
        let kind = match kind.trim() {
            "puma" => Kind::Puma,
            "nginx" => Kind::Nginx,
            "haproxy" => Kind::Haproxy,
            "passenger" => Kind::Passenger,
            "prometheus" => Kind::Prometheus,
            other => {
                return Err(format!(
                    "probe `{other}`: unknown (puma, nginx, haproxy, passenger, prometheus)"
                ))
            }
        };
        let target = target.trim();
        let (target, series) = match kind {
            Kind::Prometheus => {
                let (url, names) = target.split_once('#').unwrap_or((target, ""));
                let series: Vec<String> = names
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                if series.is_empty() {
                    return Err(format!(
                        "probe `{spec}`: name the series to keep after `#` (prometheus=URL#name,name)"
                    ));
                }
                (url, series)
            }
            _ => (target, Vec::new()),
        };
        let needs_url = matches!(kind, Kind::Puma | Kind::Nginx | Kind::Prometheus);
        if needs_url && !target.starts_with("http://") {
            return Err(format!(
                "probe `{spec}`: {} needs an http:// URL ({}=http://…)",
                kind.name(),
                kind.name()
            ));
        }
        if kind == Kind::Haproxy && target.is_empty() {
            return Err(format!(
                "probe `{spec}`: haproxy needs its stats socket (haproxy=/run/haproxy.sock)"
            ));
        }
        Ok(Probe {
            kind,
            target: target.to_string(),
            series,
        })
    }
}

impl Probe {
    /// The server's gauges now, or why they could not be read.
    pub fn read(&self) -> Reading {
        let gauges = match self.kind {
            Kind::Puma => get(&self.target).and_then(|b| puma(&b)),
            Kind::Nginx => get(&self.target).and_then(|b| stub_status(&b)),
            Kind::Haproxy => haproxy_stat(&self.target).and_then(|t| haproxy(&t)),
            Kind::Passenger => passenger_status(&self.target).and_then(|x| passenger(&x)),
            Kind::Prometheus => get(&self.target).and_then(|b| prometheus(&b, &self.series)),
        };
        gauges.map_err(|e| format!("{} probe {}: {e}", self.kind.name(), self.target))
    }
}

fn get(url: &str) -> Result<String, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(PROBE_TIMEOUT))
        .build()
        .into();
    let mut response = agent
        .get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_to_string()
        .map_err(|e| format!("GET {url}: {e}"))
}

/// Puma's `/stats`: one worker's status (single mode) or each worker's
/// `last_status` (cluster mode), added up.
fn puma(body: &str) -> Result<BTreeMap<String, f64>, String> {
    let stats: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("not Puma's stats JSON: {e}"))?;
    let statuses: Vec<&serde_json::Value> = match stats["worker_status"].as_array() {
        Some(workers) => workers.iter().map(|w| &w["last_status"]).collect(),
        None => vec![&stats],
    };
    let mut gauges = BTreeMap::new();
    for key in ["backlog", "running", "pool_capacity", "max_threads"] {
        let values: Vec<f64> = statuses.iter().filter_map(|s| s[key].as_f64()).collect();
        if values.is_empty() {
            return Err(format!("no `{key}` in Puma's stats"));
        }
        gauges.insert(key.to_string(), values.iter().sum());
    }
    gauges.insert(
        "busy_threads".into(),
        gauges["max_threads"] - gauges["pool_capacity"],
    );
    Ok(gauges)
}

/// nginx's `stub_status` page.
fn stub_status(body: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut gauges = BTreeMap::new();
    let words: Vec<&str> = body.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        let key = match *w {
            "connections:" if i > 0 && words[i - 1] == "Active" => "active",
            "Reading:" => "reading",
            "Writing:" => "writing",
            "Waiting:" => "waiting",
            _ => continue,
        };
        let value = words
            .get(i + 1)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("`{w}` without a number"))?;
        gauges.insert(key.to_string(), value);
    }
    if gauges.len() != 4 {
        return Err("not an nginx stub_status page".into());
    }
    Ok(gauges)
}

/// `show stat` on haproxy's stats socket (CSV).
fn haproxy_stat(socket: &str) -> Result<String, String> {
    let mut s = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = s.set_read_timeout(Some(PROBE_TIMEOUT));
    let _ = s.set_write_timeout(Some(PROBE_TIMEOUT));
    s.write_all(b"show stat\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.take(MAX_ANSWER)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}

fn haproxy(csv: &str) -> Result<BTreeMap<String, f64>, String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .and_then(|h| h.strip_prefix("# "))
        .ok_or("not haproxy's `show stat` CSV")?
        .split(',')
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("no `{name}` column"))
    };
    let (px, sv, qcur, scur) = (
        column("pxname")?,
        column("svname")?,
        column("qcur")?,
        column("scur")?,
    );
    let mut gauges = BTreeMap::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let cells: Vec<&str> = line.split(',').collect();
        let cell = |i: usize| cells.get(i).copied().unwrap_or("");
        let number = |i: usize| cell(i).parse::<f64>().unwrap_or(0.0);
        match cell(sv) {
            "BACKEND" => {
                gauges.insert(format!("{}.queue", cell(px)), number(qcur));
                gauges.insert(format!("{}.sessions", cell(px)), number(scur));
            }
            "FRONTEND" => {
                gauges.insert(format!("{}.sessions", cell(px)), number(scur));
            }
            _ => {}
        }
    }
    Ok(gauges)
}

/// `passenger-status --show=xml` for one instance: by the instance
/// registry folder it was started with (`passenger start
/// --instance-registry-dir PATH`: a target starting with `/`), by its
/// name, or the only one running (an empty target).
fn passenger_status(instance: &str) -> Result<String, String> {
    let mut command = std::process::Command::new("passenger-status");
    command.arg("--show=xml");
    if instance.starts_with('/') {
        command.env("PASSENGER_INSTANCE_REGISTRY_DIR", instance);
    } else if !instance.is_empty() {
        command.arg(instance);
    }
    let (status, stdout, stderr) =
        output_within(command, COMMAND_TIMEOUT).map_err(|e| format!("passenger-status: {e}"))?;
    if !status.success() {
        return Err(format!(
            "passenger-status: {}",
            String::from_utf8_lossy(&stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// A command's exit status, stdout and stderr, or an error if it could
/// not start or ran past `timeout` (then it is killed).
fn output_within(
    mut command: std::process::Command,
    timeout: Duration,
) -> Result<(std::process::ExitStatus, Vec<u8>, Vec<u8>), String> {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    // Read as it runs: a full pipe would stop it before it exits.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(p) = pipe {
                let _ = p.take(MAX_ANSWER).read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("no answer within {} s: killed", timeout.as_secs()));
            }
            Err(e) => break Err(format!("cannot wait for it: {e}")),
        }
    };
    let (stdout, stderr) = (
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    );
    status.map(|s| (s, stdout, stderr))
}

/// Passenger's pool: requests waiting in its queues, processes, and the
/// sessions they are serving, over every application group.
fn passenger(xml: &str) -> Result<BTreeMap<String, f64>, String> {
    // The XML follows a banner line ("Version : …") in some versions.
    let start = xml.find("<?xml").or_else(|| xml.find("<info")).unwrap_or(0);
    let doc = roxmltree::Document::parse(&xml[start..])
        .map_err(|e| format!("not passenger-status XML: {e}"))?;
    let sum = |tag: &str| -> f64 {
        doc.descendants()
            .filter(|n| n.has_tag_name(tag))
            .filter_map(|n| n.text()?.trim().parse::<f64>().ok())
            .sum()
    };
    let mut gauges = BTreeMap::new();
    // Per group and the global queue.
    gauges.insert(
        "request_queue".into(),
        sum("get_wait_list_size") + sum("request_queue_size"),
    );
    gauges.insert(
        "processes".into(),
        doc.descendants()
            .filter(|n| n.has_tag_name("process"))
            .count() as f64,
    );
    gauges.insert("sessions".into(), sum("sessions"));
    Ok(gauges)
}

/// The named series of a Prometheus text page, each summed over its labels.
fn prometheus(body: &str, series: &[String]) -> Result<BTreeMap<String, f64>, String> {
    let mut gauges = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .unwrap_or(line.len());
        let name = &line[..name_end];
        if !series.iter().any(|s| s == name) {
            continue;
        }
        // The value follows the labels (which may hold spaces).
        let after_labels = match line[name_end..].strip_prefix('{') {
            Some(rest) => rest.rsplit_once('}').map_or("", |(_, v)| v),
            None => &line[name_end..],
        };
        let Some(value) = after_labels
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        *gauges.entry(name.to_string()).or_insert(0.0) += value;
    }
    if gauges.is_empty() {
        return Err(format!("none of {} in the page", series.join(", ")));
    }
    Ok(gauges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_command_that_runs_too_long_is_killed_and_a_long_answer_read_whole() {
        let sh = |script: &str| {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", script]);
            c
        };
        let started = Instant::now();
        let e = output_within(
            sh("echo partial; exec sleep 30"),
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(e.contains("killed"), "{e}");
        // Killed, not waited for (30 s).
        assert!(started.elapsed() < Duration::from_secs(20));
        // More than a pipe holds (64 KiB), and its stderr apart.
        let (status, out, err) = output_within(
            sh("head -c 300000 /dev/zero; echo oops >&2; exit 3"),
            Duration::from_secs(20),
        )
        .unwrap();
        assert_eq!(
            (status.code(), out.len(), &err[..]),
            (Some(3), 300_000, &b"oops\n"[..])
        );
        assert!(output_within(
            std::process::Command::new("/no/such/program"),
            COMMAND_TIMEOUT
        )
        .unwrap_err()
        .contains("cannot run it"));
    }

    #[test]
    fn specs_parse_or_say_what_is_wrong() {
        let p: Probe = "puma=http://127.0.0.1:9293/stats?token=x".parse().unwrap();
        assert_eq!(p.kind, Kind::Puma);
        let p: Probe = "prometheus=http://127.0.0.1:9394/metrics#puma_backlog,puma_running"
            .parse()
            .unwrap();
        assert_eq!(
            (p.target.as_str(), p.series.len()),
            ("http://127.0.0.1:9394/metrics", 2)
        );
        assert!("prometheus=http://x/metrics"
            .parse::<Probe>()
            .unwrap_err()
            .contains("#name"));
        assert!("unicorn=x"
            .parse::<Probe>()
            .unwrap_err()
            .contains("unknown"));
        assert!("nginx=/status"
            .parse::<Probe>()
            .unwrap_err()
            .contains("http://"));
        assert!("haproxy"
            .parse::<Probe>()
            .unwrap_err()
            .contains("stats socket"));
        assert_eq!("passenger".parse::<Probe>().unwrap().target, "");
    }

    #[test]
    fn puma_single_and_cluster_stats() {
        let single = r#"{"started_at":"2026-11-26T12:00:00Z","backlog":3,"running":1,"pool_capacity":0,"max_threads":1,"requests_count":10}"#;
        let g = puma(single).unwrap();
        assert_eq!((g["backlog"], g["busy_threads"]), (3.0, 1.0));
        let cluster = r#"{"workers":2,"worker_status":[
            {"pid":1,"last_status":{"backlog":2,"running":5,"pool_capacity":0,"max_threads":5}},
            {"pid":2,"last_status":{"backlog":1,"running":5,"pool_capacity":2,"max_threads":5}}]}"#;
        let g = puma(cluster).unwrap();
        assert_eq!(
            (g["backlog"], g["busy_threads"], g["max_threads"]),
            (3.0, 8.0, 10.0)
        );
        assert!(puma("<html>").is_err());
        assert!(puma("{}").unwrap_err().contains("backlog"));
    }

    #[test]
    fn nginx_stub_status_page() {
        let page = "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n";
        let g = stub_status(page).unwrap();
        assert_eq!(
            (g["active"], g["writing"], g["waiting"]),
            (291.0, 179.0, 106.0)
        );
        assert!(stub_status("Hello, world!").is_err());
    }

    #[test]
    fn haproxy_show_stat() {
        let csv = "# pxname,svname,qcur,qmax,scur,smax,slim\nweb,FRONTEND,,,12,20,2000\napp,s1,3,5,4,4,4\napp,BACKEND,7,9,8,8,200\n\n";
        let g = haproxy(csv).unwrap();
        assert_eq!(
            (g["app.queue"], g["app.sessions"], g["web.sessions"]),
            (7.0, 8.0, 12.0)
        );
        assert!(haproxy("Unknown command").is_err());
    }

    #[test]
    fn passenger_status_xml() {
        let xml = r#"Version : 6.0.17
<?xml version="1.0" encoding="iso8859-1" ?>
<info version="3"><get_wait_list_size>2</get_wait_list_size><supergroups><supergroup><group>
<get_wait_list_size>5</get_wait_list_size><processes>
<process><sessions>1</sessions></process><process><sessions>1</sessions></process>
</processes></group></supergroup></supergroups></info>"#;
        let g = passenger(xml).unwrap();
        assert_eq!(
            (g["request_queue"], g["processes"], g["sessions"]),
            (7.0, 2.0, 2.0)
        );
        assert!(passenger("ERROR: Phusion Passenger doesn't seem to be running.").is_err());
    }

    #[test]
    fn prometheus_series_are_summed_over_labels() {
        let page = "# HELP puma_backlog x\n# TYPE puma_backlog gauge\npuma_backlog{worker=\"0\"} 2\npuma_backlog{worker=\"1\",note=\"a b}\"} 3 1700000000\npuma_running 5\nother 9\n";
        let g = prometheus(page, &["puma_backlog".into(), "puma_running".into()]).unwrap();
        assert_eq!((g["puma_backlog"], g["puma_running"]), (5.0, 5.0));
        assert!(!g.contains_key("other"));
        assert!(prometheus("garbage", &["x".into()]).is_err());
    }
}
