//! Integration tests of behaviour — exact counts, error classes, scenario
//! features, the command line, TLS, the Ruby servers — against real
//! servers on loopback (the built-in target, nginx, haproxy, Debian's Ruby
//! servers, raw sockets that misbehave). None asserts a timing tighter than
//! "it did not hang", so they run in parallel. Timing tests are in
//! `tests/timing`.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod counts;
mod dashboard;
mod docs;
mod errors;
mod events;
mod grpc;
mod h2;
mod h3;
mod hostile;
mod import;
mod injection;
mod install;
mod kubernetes;
mod layout;
mod probes;
mod prometheus;
mod reports;
mod router;
mod ruby_servers;
mod scenario;
mod scripts;
mod shards;
mod sockets;
mod study;
mod target;
mod tls;
mod traces;
mod validation;
