//! `[trace]` (and `--trace`): the W3C trace context a run sends, checked
//! so that no request carries a header a tracer would reject.

use super::builder::Builder;
use crate::raw::RawTrace;
use headroom_engine::plan::trace_context::TraceContext;

/// The longest `tracestate` the specification lets a sender pass on.
const TRACESTATE_MAX: usize = 512;

impl Builder<'_> {
    pub(super) fn trace_context(&mut self, raw: Option<&RawTrace>) -> Option<TraceContext> {
        let raw = raw?;
        if raw.enabled == Some(false) {
            return None;
        }
        if let Some(state) = &raw.tracestate {
            let printable = state.bytes().all(|b| (0x20..=0x7e).contains(&b));
            if state.trim().is_empty() || state.len() > TRACESTATE_MAX || !printable {
                let message = format!(
                    "[trace] tracestate: give 1 to {TRACESTATE_MAX} printable ASCII characters, \
                     e.g. \"vendor=value\""
                );
                self.problem(Some("trace"), "tracestate", state, message);
            }
        }
        if let Some(url) = &raw.url {
            let web = url.starts_with("http://") || url.starts_with("https://");
            if !url.contains("{id}") || !web {
                let message = format!(
                    "[trace] url: give an http:// or https:// address with `{{id}}` where the \
                     trace ID goes, e.g. \"http://127.0.0.1:16686/trace/{{id}}\" (not `{url}`)"
                );
                self.problem(Some("trace"), "url", url, message);
            }
        }
        Some(TraceContext {
            per: raw.per.unwrap_or_default(),
            sampled: raw.sampled.unwrap_or(true),
            tracestate: raw.tracestate.clone(),
            url: raw.url.clone(),
        })
    }
}
