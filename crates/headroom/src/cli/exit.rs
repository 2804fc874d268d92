//! Exit codes, and the interrupt they report: 0 ok; 1 a threshold was
//! breached (`run --threshold`, `[thresholds]`) or `compare
//! --fail-on-regression` found a regression; 2 usage or run error; 3 the
//! run was measured but its results could not be written where asked (a
//! full disk: the summary was printed, the JSON went to the fallback
//! path); 130 interrupted by Ctrl-C, 143 by SIGTERM (results are still
//! written).

use headroom_engine::StopSignal;

pub const EXIT_OK: i32 = 0;
pub const EXIT_THRESHOLDS: i32 = 1;
pub const EXIT_ERROR: i32 = 2;
/// Measured, but an output could not be written where asked.
pub const EXIT_NOT_WRITTEN: i32 = 3;
/// Interrupted by SIGINT (Ctrl-C): 128 + 2, as shells report it. SIGTERM
/// gives 143 (128 + 15): see [`exit_interrupted`].
pub const EXIT_INTERRUPTED: i32 = 130;

/// The signal that interrupted the run (0: none yet).
static INTERRUPTED_BY: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The exit code of an interrupted command: 128 + the signal's number
/// (130 for Ctrl-C, 143 for SIGTERM), as shells expect.
pub fn exit_interrupted() -> i32 {
    interrupting_signal().map_or(EXIT_INTERRUPTED, |signal| 128 + signal)
}

/// The signal that interrupted the run, if one did.
pub fn interrupting_signal() -> Option<i32> {
    match INTERRUPTED_BY.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Ctrl-C and SIGTERM stop the run gracefully; a second one aborts. The
/// first says so, and names itself in the results' `stop_reason`.
pub fn install_interrupt(stop: &StopSignal) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("headroom-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let name = if signal == SIGTERM { "SIGTERM" } else { "SIGINT (Ctrl-C)" };
                if stop.was_interrupted() {
                    eprintln!("\nheadroom: {name} again: aborting, requests in flight are cut off");
                } else {
                    INTERRUPTED_BY.store(signal, std::sync::atomic::Ordering::SeqCst);
                    eprintln!(
                        "\nheadroom: {name}: stopping — results so far are kept; press Ctrl-C again to abort"
                    );
                }
                stop.interrupt(format!("interrupted by {name}"));
            }
        })?;
    Ok(())
}
