//! The servers' own gauges, where they publish them: what their workers
//! are doing and how much waits for them — the figures the accept queue
//! cannot see (Puma queues accepted requests for its threads; haproxy
//! queues them for its backends). Read once per sample; a probe that
//! fails is a warning, never a failed run.
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
use std::time::Duration;

/// How long one probe may take: a sample must not wait on a slow server.
const PROBE_TIMEOUT: Duration = Duration::from_millis(800);

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
    pub fn read(&self) -> Result<BTreeMap<String, f64>, String> {
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
    let output = command
        .output()
        .map_err(|e| format!("cannot run passenger-status: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "passenger-status: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
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
