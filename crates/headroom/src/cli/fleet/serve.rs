//! `headroom fleet SCENARIO --shards N --listen ADDR`: the coordinator of
//! shards started by hand (ssh, a CI matrix) with `headroom run SCENARIO
//! --shard K/N --start-at T --report-to http://ADDR`. Each shard POSTs a
//! report line per second (`/shards/K/report`; the answer says whether the
//! fleet must stop) and its results at the end (`/shards/K/results`); the
//! coordinator shows and judges the fleet live, merges the results, and
//! its exit code is the merged verdict.

use super::view::FleetView;
use super::{finish_fleet, fleet_scenario, Coordinator, FleetEnd};
use crate::cli::args::FleetArgs;
use crate::cli::exit::install_interrupt;
use anyhow::bail;
use headroom_engine::StopSignal;
use headroom_records::merge::ShardFile;
use std::io::Read;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// What the HTTP thread hands the coordinator.
enum Posted {
    Line(usize, String),
    Results(usize, String),
}

pub fn fleet(args: FleetArgs) -> anyhow::Result<i32> {
    let shards = args.shards as usize;
    if !args.listen.ip().is_loopback() && args.token.is_none() {
        bail!(
            "--listen {}: not a loopback address; anyone who reaches it could report as a shard \
             — give --token TOKEN (shards send it: --report-to http://TOKEN@HOST:PORT)",
            args.listen
        );
    }
    let (scenario, thresholds) = fleet_scenario(&args.scenario, &args.run_flags)?;
    let outputs = super::outputs(&args.fleet, thresholds);
    let quiet = args.fleet.quiet;
    outputs.check_writable()?;
    let stop = StopSignal::new();
    install_interrupt(&stop)?;
    let server = Arc::new(
        tiny_http::Server::http(args.listen)
            .map_err(|e| anyhow::anyhow!("--listen {}: {e}", args.listen))?,
    );
    // Why the fleet must stop, once it must: every shard's next report is
    // answered with it.
    let stop_why: Arc<Mutex<Option<String>>> = Arc::default();
    let (posts_to, posts) = mpsc::channel();
    {
        let server = server.clone();
        let stop_why = stop_why.clone();
        let token = args.token.clone();
        std::thread::Builder::new()
            .name("headroom-fleet".into())
            .spawn(move || serve(&server, shards, token.as_deref(), &stop_why, &posts_to))?;
    }
    if !quiet {
        say_where(&server, &args);
    }
    let mut coordinator = Coordinator::start(
        &scenario,
        (shards, headroom_measure::fleet::GRACE),
        outputs.progress,
        quiet,
        &args.fleet.metrics,
        &args.fleet.dashboard,
        &stop,
        &format!("{shards} shards"),
    )?;
    let view = &mut coordinator.view;
    let mut results: Vec<Option<String>> = vec![None; shards];
    let give_up = Instant::now() + args.wait;
    let mut stopped_at: Option<Instant> = None;
    while results.iter().any(Option::is_none) {
        while let Ok(posted) = posts.try_recv() {
            match posted {
                Posted::Line(k, line) => view.line(k, &line),
                Posted::Results(k, json) => {
                    view.ended(k, None);
                    results[k] = Some(json);
                }
            }
        }
        if let Some(breach) = view.tick(None) {
            let why = FleetView::breach_line(&breach);
            eprintln!("headroom: {why}: stopping every shard");
            stop_why.lock().expect("lock").get_or_insert(why);
        }
        if stop.was_interrupted() {
            stop_why
                .lock()
                .expect("lock")
                .get_or_insert_with(|| "the coordinator was interrupted".into());
        }
        let stopping = stop_why.lock().expect("lock").is_some();
        if stopping {
            stopped_at.get_or_insert_with(Instant::now);
        }
        // Shards answer a stop within a second and send their results;
        // one that does not (gone, unreachable) is not waited for long.
        let waited_out = stopped_at.is_some_and(|t| t.elapsed() > Duration::from_secs(30));
        if Instant::now() > give_up || waited_out {
            for (k, r) in results.iter().enumerate() {
                if r.is_none() {
                    eprintln!("headroom: shard {}/{shards} sent no results", k + 1);
                    view.ended(k, Some("sent no results".into()));
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    view.finish(None);
    let files = shard_files(results);
    finish_fleet(
        files,
        FleetEnd {
            stop: &stop,
            coordinator,
            thresholds: &scenario.thresholds,
            monitor: None,
        },
        outputs,
    )
}

/// Where the coordinator listens, and how to start a shard that reports
/// to it.
fn say_where(server: &tiny_http::Server, args: &FleetArgs) {
    let shards = args.shards;
    let bound = server
        .server_addr()
        .to_ip()
        .map_or(args.listen.to_string(), |a| a.to_string());
    eprintln!(
        "headroom: coordinating {shards} shards at http://{bound}/ — start each with \
         `headroom run {} --shard K/{shards} --start-at T --report-to http://{bound}`",
        args.scenario.display()
    );
}

/// The shards' results that read back, named by shard.
fn shard_files(results: Vec<Option<String>>) -> Vec<ShardFile> {
    let shards = results.len();
    let mut files = Vec::new();
    for (k, json) in results.into_iter().enumerate() {
        let Some(json) = json else { continue };
        match serde_json::from_str(&json) {
            Ok(results) => files.push(ShardFile {
                file: format!("shard {}/{shards}", k + 1),
                results,
            }),
            Err(e) => eprintln!(
                "headroom: shard {}/{shards}: its results do not read ({e})",
                k + 1
            ),
        }
    }
    files
}

/// Answers the shards' POSTs until the coordinator ends. Shard K is the
/// process whose POST for it came first (its `X-Headroom-Session`): a
/// second process claiming K — started twice by mistake, or a forged
/// stream — is refused (409), so it can neither add to the fleet's
/// seconds nor replace K's results.
fn serve(
    server: &tiny_http::Server,
    shards: usize,
    token: Option<&str>,
    stop_why: &Mutex<Option<String>>,
    to: &mpsc::Sender<Posted>,
) {
    let mut sessions: Vec<Option<String>> = vec![None; shards];
    for mut request in server.incoming_requests() {
        let authorized = token.is_none_or(|t| {
            request.headers().iter().any(|h| {
                h.field.equiv("Authorization") && h.value.as_str() == format!("Bearer {t}")
            })
        });
        // /shards/K/report or /shards/K/results, K = 1…N.
        let url = request.url().to_string();
        let mut parts = url.trim_start_matches('/').split('/');
        let shard = match (parts.next(), parts.next(), parts.next()) {
            (Some("shards"), Some(k), Some(what)) => k
                .parse::<usize>()
                .ok()
                .filter(|k| (1..=shards).contains(k))
                .map(|k| (k - 1, what.to_string())),
            _ => None,
        };
        let mut body = String::new();
        let read = request
            .as_reader()
            .take(256 << 20)
            .read_to_string(&mut body);
        let session = (request.headers().iter())
            .find(|h| h.field.equiv(super::report::SESSION_HEADER))
            .map_or(String::new(), |h| h.value.as_str().to_string());
        let theirs = match (authorized, &shard) {
            (true, Some((k, _))) => {
                let owner = sessions[*k].get_or_insert_with(|| session.clone());
                *owner == session
            }
            _ => true,
        };
        let (status, answer) = match (authorized, shard, read) {
            (false, _, _) => (401, r#"{"error":"a token is needed"}"#.to_string()),
            (_, None, _) => (
                404,
                r#"{"error":"POST /shards/K/report or /shards/K/results"}"#.into(),
            ),
            (_, _, Err(_)) => (400, r#"{"error":"unreadable body"}"#.into()),
            (true, Some((k, _)), Ok(_)) if !theirs => {
                eprintln!(
                    "headroom: refused a POST for shard {}/{shards} from another process \
                     (session {session:?}): shard {} reports from its first",
                    k + 1,
                    k + 1
                );
                (
                    409,
                    r#"{"error":"this shard reports from another process"}"#.into(),
                )
            }
            (true, Some((k, what)), Ok(_)) => {
                let posted = match what.as_str() {
                    "report" => Some(Posted::Line(k, body)),
                    "results" => Some(Posted::Results(k, body)),
                    _ => None,
                };
                match posted {
                    Some(p) => {
                        let _ = to.send(p);
                        let why = stop_why.lock().expect("lock").clone();
                        (200, serde_json::json!({ "stop": why }).to_string())
                    }
                    None => (404, r#"{"error":"report or results"}"#.into()),
                }
            }
        };
        let response = tiny_http::Response::from_string(answer)
            .with_status_code(status)
            .with_header(
                "Content-Type: application/json"
                    .parse::<tiny_http::Header>()
                    .expect("a valid header"),
            );
        let _ = request.respond(response);
    }
}
