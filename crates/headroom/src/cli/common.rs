//! What every subcommand that measures shares.

use headroom_measure::Recording;

/// How this command's runs are recorded: the distribution's buckets and
/// the command line (kept in each results file's `meta.command`).
/// Credentials on the command line (secret headers, URL passwords) are
/// written as `***`; `secret_headers` are the ones the user named.
pub fn recording(buckets_ms: &[u64], secret_headers: &[String]) -> Recording {
    let args: Vec<String> = std::env::args().collect();
    Recording {
        buckets_ms: buckets_ms.to_vec(),
        command: headroom_http::redact::command(&args, secret_headers),
        ..Recording::default()
    }
}
