//! What every subcommand that measures shares.

use headroom_engine::plan::{HttpVersion, Plan};
use headroom_measure::Recording;

/// Before any load: a plan that asks for HTTP/2 of a server that answers
/// but does not speak it fails here, naming the server. One that cannot be
/// reached is the run's to count (connect errors), as over HTTP/1.1 — but
/// over HTTP/3 an unanswered QUIC handshake is how a server without
/// HTTP/3 looks (UDP tells nothing of a closed port), so it fails here too.
pub fn check_protocol(plan: &Plan) -> anyhow::Result<()> {
    match plan.http_version {
        HttpVersion::Http2 => match headroom_engine::negotiate(plan) {
            Err(refused) if refused.is_protocol() => Err(refused.into()),
            _ => Ok(()),
        },
        HttpVersion::Http3 => match headroom_engine::negotiate(plan) {
            Err(refused) => Err(refused.into()),
            Ok(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

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
