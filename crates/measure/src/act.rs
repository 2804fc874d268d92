//! Acting on events at their planned moments: one thread per event, on
//! the run's clock. A command runs with `sh -c`, its output to a file (a
//! command that leaves a server running in the background must not hold
//! a pipe open); a signal goes to the watched server's main process now —
//! after a restart, the new one — or to a pidfile's process.

use headroom_engine::plan::events::{Action, Event};
use headroom_engine::StopSignal;
use headroom_records::events::EventRecord;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a command may still run after the load ended before it is
/// killed (and recorded without an exit code).
pub const COMMAND_GRACE: Duration = Duration::from_secs(10);
const OUTPUT_KEPT: usize = 4096;

/// Where the events act.
#[derive(Clone, Debug, Default)]
pub struct Target {
    /// The watched server's main process now (0: none), kept current by
    /// the monitor.
    pub main_pid: Arc<AtomicI32>,
    /// Run commands in this process group (a study's server's, so that
    /// whatever they start is stopped with it); else in a group of their
    /// own.
    pub process_group: Option<i32>,
    /// Where commands run (a study's server's folder); else here.
    pub dir: Option<std::path::PathBuf>,
}

pub struct Acting {
    handles: Vec<JoinHandle<EventRecord>>,
    /// Set when the load is over: a command still running gets
    /// [`COMMAND_GRACE`], an event not yet due is skipped.
    over: Arc<std::sync::atomic::AtomicBool>,
}

/// Starts one thread per event, each waiting for `start` + its time.
/// `times` are the events' planned times (stage boundaries resolved).
pub fn start(
    events: &[(Event, Duration)],
    start: Instant,
    target: &Target,
    stop: &StopSignal,
) -> Acting {
    let over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handles = events
        .iter()
        .cloned()
        .map(|(event, at)| {
            let (target, stop, over) = (target.clone(), stop.clone(), over.clone());
            std::thread::Builder::new()
                .name("headroom-event".into())
                .spawn(move || act(&event, at, start, &target, &stop, &over))
                .expect("an event thread can be spawned")
        })
        .collect();
    Acting { handles, over }
}

impl Acting {
    /// The load is over: events still due are skipped, commands still
    /// running get a grace period. Returns the records in the events'
    /// order.
    pub fn finish(self) -> Vec<EventRecord> {
        self.over.store(true, Ordering::SeqCst);
        self.handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    }
}

fn seconds(start: Instant, at: Instant) -> f64 {
    let s = at.saturating_duration_since(start).as_secs_f64();
    (s * 1000.0).round() / 1000.0
}

fn act(
    event: &Event,
    at: Duration,
    start: Instant,
    target: &Target,
    stop: &StopSignal,
    over: &std::sync::atomic::AtomicBool,
) -> EventRecord {
    let mut record = EventRecord {
        label: event.label.clone(),
        kind: match event.action {
            Action::Command(_) => "command",
            Action::Signal { .. } => "signal",
        }
        .into(),
        at_s: at.as_secs_f64(),
        ..EventRecord::default()
    };
    let due = start + at;
    while Instant::now() < due {
        if stop.is_stopping() || over.load(Ordering::SeqCst) {
            record.error = Some("the run ended before the event was due".into());
            return record;
        }
        std::thread::sleep((due - Instant::now()).min(Duration::from_millis(5)));
    }
    let began = Instant::now();
    record.started_s = seconds(start, began);
    match &event.action {
        Action::Command(command) => run_command(command, target, over, &mut record),
        Action::Signal { name, pidfile } => {
            send_signal(name, pidfile.as_deref(), target, &mut record)
        }
    }
    record.ended_s = seconds(start, Instant::now());
    record
}

fn run_command(
    command: &str,
    target: &Target,
    over: &std::sync::atomic::AtomicBool,
    record: &mut EventRecord,
) {
    let output = match tempfile::tempfile() {
        Ok(f) => f,
        Err(e) => {
            record.error = Some(format!("cannot make a file for its output: {e}"));
            return;
        }
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(
            output
                .try_clone()
                .map_or_else(|_| Stdio::null(), Stdio::from),
        )
        .stderr(
            output
                .try_clone()
                .map_or_else(|_| Stdio::null(), Stdio::from),
        )
        .process_group(target.process_group.unwrap_or(0));
    if let Some(dir) = &target.dir {
        cmd.current_dir(dir);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            record.error = Some(format!("cannot start `{command}`: {e}"));
            return;
        }
    };
    let mut deadline: Option<Instant> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(_) => break None,
        }
        if over.load(Ordering::SeqCst) {
            let d = *deadline.get_or_insert_with(|| Instant::now() + COMMAND_GRACE);
            if Instant::now() >= d {
                let _ = child.kill();
                let _ = child.wait();
                record.error = Some(format!(
                    "still running {} s after the load ended: killed",
                    COMMAND_GRACE.as_secs()
                ));
                break None;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    record.exit_code = status.and_then(|s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().or_else(|| s.signal().map(|sig| 128 + sig))
    });
    let mut text = String::new();
    let mut output = output;
    use std::io::Seek;
    if output.seek(std::io::SeekFrom::Start(0)).is_ok() {
        let mut bytes = Vec::new();
        let _ = output.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    record.output = tail(&text, OUTPUT_KEPT);
}

fn send_signal(
    name: &str,
    pidfile: Option<&std::path::Path>,
    target: &Target,
    record: &mut EventRecord,
) {
    let Some(signal) = headroom_monitor::launch::signal_by_name(name) else {
        record.error = Some(format!("`{name}` is not a signal headroom sends"));
        return;
    };
    let pid = match pidfile {
        Some(file) => match std::fs::read_to_string(file) {
            Ok(text) => match text.trim().parse::<i32>() {
                Ok(pid) if pid > 0 => pid,
                _ => {
                    record.error = Some(format!("{} does not hold a process id", file.display()));
                    return;
                }
            },
            Err(e) => {
                record.error = Some(format!("cannot read {}: {e}", file.display()));
                return;
            }
        },
        None => match target.main_pid.load(Ordering::SeqCst) {
            pid if pid > 0 => pid,
            _ => {
                record.error = Some("no server process is watched to signal".into());
                return;
            }
        },
    };
    // SAFETY: a signal to the process the user named (the watched server
    // or a pidfile's process), by pid.
    if unsafe { libc::kill(pid, signal) } == 0 {
        record.exit_code = Some(0);
        record.output = format!("SIG{name} sent to pid {pid}");
    } else {
        record.error = Some(format!(
            "SIG{name} to pid {pid}: {}",
            std::io::Error::last_os_error()
        ));
    }
}

/// Keeps the last `max` bytes of a text, on a character boundary.
fn tail(text: &str, max: usize) -> String {
    let mut cut = text.len().saturating_sub(max);
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text[cut..].to_string()
}
