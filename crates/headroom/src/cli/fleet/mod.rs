//! Shards run as one fleet, shown and judged while they run: each shard
//! reports its seconds (`report`: `run --report-to`), the coordinator
//! merges them exactly and publishes them as one run's (`view`).
//!
//! ```text
//!  shard ──Report line per second──▶ pipe (run --processes)
//!                                    pod log (k8s run, kubectl logs -f)
//!                                    HTTP POST (headroom fleet)
//!                                        │
//!                      coordinator: Fleet (exact merge) → FleetView
//!                      live line · metrics · dashboard · aborts → stop shards
//! ```

pub mod report;
pub mod view;
