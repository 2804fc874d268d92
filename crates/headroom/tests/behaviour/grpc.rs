//! gRPC calls against a server from another codebase: grpcio (Debian's
//! python3-grpcio, gRPC's C core) serving `demo.v1.Greeter`
//! (`common/grpc_server.py`), which counts what it gets. Types from the
//! server's reflection, a `.proto` file and a protoset; statuses as
//! classes; deadlines; checks on the decoded answer.

use crate::common::{import_to_scenario, run, scenario_dir, ProcessGuard};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};

struct GrpcServer {
    _guard: ProcessGuard,
    dir: tempfile::TempDir,
    port: u16,
}

impl GrpcServer {
    /// The server with `flags` (`--no-reflection`, `--v1alpha-only`); its
    /// .proto and protoset written beside its counts.
    fn start(flags: &[&str]) -> GrpcServer {
        Self::start_in(tempfile::tempdir().unwrap(), flags)
    }

    /// Over TLS, with a certificate made here (`cert.pem` beside it).
    fn start_tls() -> GrpcServer {
        let pki = crate::common::self_signed();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, &pki.cert_pem).unwrap();
        std::fs::write(&key, &pki.key_pem).unwrap();
        let (cert, key) = (cert.display().to_string(), key.display().to_string());
        Self::start_in(dir, &["--tls", &cert, &key])
    }

    fn start_in(dir: tempfile::TempDir, flags: &[&str]) -> GrpcServer {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/common/grpc_server.py");
        let port_file = dir.path().join("port");
        // Debian's python3, where python3-grpcio is installed.
        let child = Command::new("/usr/bin/python3")
            .arg(script)
            .arg(&port_file)
            .arg(dir.path().join("counts.json"))
            .args(flags)
            .arg("--proto-out")
            .arg(dir.path().join("greeter.proto"))
            .arg("--protoset-out")
            .arg(dir.path().join("greeter.protoset"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start the gRPC server (python3-grpcio)");
        let guard = ProcessGuard { child };
        let port = crate::common::port_from_file(&port_file, "the gRPC server");
        GrpcServer {
            _guard: guard,
            dir,
            port,
        }
    }

    fn url(&self) -> String {
        format!("grpc://127.0.0.1:{}", self.port)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn counts(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.file("counts.json")).unwrap()).unwrap()
    }
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The command line users' scripts call: `--grpc --call --data`, the types
/// asked of the server's reflection service (v1, and v1alpha where only
/// that is served), then from `--proto` and `--protoset` with reflection
/// off: every call counted as the server counted it.
#[test]
fn unary_calls_from_reflection_proto_and_protoset_count_as_the_server_does() {
    let call = |server: &GrpcServer, types: &[&str]| {
        let url = server.url();
        let mut args = vec![
            "--grpc",
            &url,
            "--call",
            "demo.v1.Greeter/SayHello",
            "--data",
            r#"{"name": "ann"}"#,
            "--vus",
            "4",
            "--requests",
            "200",
        ];
        args.extend_from_slice(types);
        let r = run(&args);
        assert_eq!(r.code, 0, "{types:?}: {}\n{}", r.stdout, r.stderr);
        let results = r.results();
        assert_eq!(results["requests"]["total"], 200, "{types:?}");
        assert_eq!(results["requests"]["failed"], 0, "{}", results["errors"]);
        let c = server.counts();
        assert_eq!(n(&c["calls"]["SayHello"]), 200, "{types:?}: {c}");
        assert_eq!(n(&c["statuses"]["ok"]), 200, "{c}");
        assert!(results["connections"]["by_protocol"]["h2"].as_u64() > Some(0));
    };
    call(&GrpcServer::start(&[]), &[]);
    call(&GrpcServer::start(&["--v1alpha-only"]), &[]);
    let server = GrpcServer::start(&["--no-reflection"]);
    let proto = server.file("greeter.proto").display().to_string();
    call(&server, &["--proto", &proto]);
    let server = GrpcServer::start(&["--no-reflection"]);
    let protoset = server.file("greeter.protoset").display().to_string();
    call(&server, &["--protoset", &protoset]);
    // Without either, and no reflection: a clear error before any load.
    let server = GrpcServer::start(&["--no-reflection"]);
    let url = server.url();
    let r = run(&[
        "--grpc",
        &url,
        "--call",
        "demo.v1.Greeter/SayHello",
        "-n",
        "1",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("reflection"), "{}", r.stderr);
    assert_eq!(n(&server.counts()["calls"]["SayHello"]), 0);
    // A method the schema lacks: named, with what there is.
    let r = run(&[
        "--grpc",
        &url,
        "--call",
        "demo.v1.Greeter/Nope",
        "--proto",
        &proto,
        "-n",
        "1",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("SayHello, Countdown"), "{}", r.stderr);
}

/// grpcs://: TLS with ALPN h2 (types by reflection over it), and the
/// streams model: `--connections 4 --streams 25` (100 users, as h2load's
/// -c 4 -m 25) is 4 connections, as headroom and the server count them.
#[test]
fn tls_and_the_streams_model() {
    let server = GrpcServer::start_tls();
    let url = format!("grpcs://127.0.0.1:{}", server.port);
    let ca = server.file("cert.pem").display().to_string();
    let r = run(&[
        "--grpc",
        &url,
        "--call",
        "demo.v1.Greeter/SayHello",
        "--data",
        r#"{"name": "tls"}"#,
        "--ca-file",
        &ca,
        "--connections",
        "4",
        "--streams",
        "25",
        "--requests",
        "2000",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let results = r.results();
    assert_eq!(results["requests"]["total"], 2000);
    assert_eq!(results["requests"]["failed"], 0, "{}", results["errors"]);
    assert_eq!(
        results["connections"]["by_protocol"]["h2"], 4,
        "{}",
        results["connections"]
    );
    let c = server.counts();
    assert_eq!(n(&c["calls"]["SayHello"]), 2000);
    // The server's own count of the connections its calls came on.
    assert_eq!(n(&c["connections"]), 4, "{c}");
}

/// Each status a server gives is its own class, exactly as often as it
/// was given; a deadline shorter than the server's delay is
/// `grpc_deadline_exceeded` each time; trailers-only answers are read; a
/// 10 MB answer is counted whole; checks and extraction read the decoded
/// answer, templates fill the message.
#[test]
fn statuses_deadlines_checks_and_templates_in_a_scenario() {
    let server = GrpcServer::start(&["--no-reflection"]);
    let dir = scenario_dir(&[(
        "s.toml",
        &format!(
            r#"
base_url = "http://127.0.0.1:{port}"
[grpc]
proto = ["{proto}"]
[load]
vus = 2
iterations = 5
[[session]]
name = "calls"
steps = [
  {{ request = "hello" }},
  {{ request = "again" }},
  {{ request = "unavailable" }},
  {{ request = "exhausted" }},
  {{ request = "trailers-only" }},
  {{ request = "slow" }},
  {{ request = "big" }},
]
[[request]]
name = "hello"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "user{{{{user_id}}}}" }}
check = [ {{ json_path = "$.message", equals = "hello user{{{{user_id}}}}" }} ]
extract = [ {{ name = "said", json_path = "$.message" }} ]
[[request]]
name = "again"
grpc = "demo.v1.Greeter/SayHello"
body = '{{"name": "{{{{said}}}}"}}'
check = [ {{ body_contains = "hello hello user" }} ]
[[request]]
name = "unavailable"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "unavailable" }}
[[request]]
name = "exhausted"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "exhausted" }}
[[request]]
name = "trailers-only"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "trailers-only" }}
[[request]]
name = "slow"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "slow:1500" }}
timeout = "200ms"
[[request]]
name = "big"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "big" }}
"#,
            port = server.port,
            proto = server.file("greeter.proto").display()
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    let errors = &results["errors"];
    // 2 users × 5 iterations: 10 of each.
    assert_eq!(n(&errors["grpc_unavailable"]), 10, "{errors}");
    assert_eq!(n(&errors["grpc_resource_exhausted"]), 10, "{errors}");
    assert_eq!(n(&errors["grpc_failed_precondition"]), 10, "{errors}");
    assert_eq!(n(&errors["grpc_deadline_exceeded"]), 10, "{errors}");
    assert_eq!(n(&results["requests"]["failed"]), 40, "{errors}");
    let per = |name: &str| results["per_request"][name].clone();
    assert_eq!(
        n(&per("hello")["requests"]["failed"]),
        0,
        "{}",
        per("hello")
    );
    assert_eq!(
        n(&per("again")["requests"]["failed"]),
        0,
        "{}",
        per("again")
    );
    assert_eq!(n(&per("big")["requests"]["failed"]), 0, "{}", per("big"));
    assert!(
        n(&per("big")["bytes_received"]) >= 10 * 10 * 1024 * 1024,
        "{}",
        per("big")
    );
    let c = server.counts();
    assert_eq!(n(&c["calls"]["SayHello"]), 70, "{c}");
    assert_eq!(n(&c["statuses"]["unavailable"]), 10, "{c}");
    assert_eq!(n(&c["statuses"]["failed_precondition"]), 10, "{c}");
    assert_eq!(n(&c["statuses"]["slow"]), 10, "{c}");
}

/// The three streaming shapes against grpcio, from a scenario: a server
/// stream's replies, a client stream's messages (an array sent 3 times
/// over, `interval` apart) and a bidirectional chat's echoes, each
/// message counted as the server counted it and timed in the call's
/// `first message` / `next message` entries; a server that waits 30 ms
/// before each reply shows it in both; a stream past its deadline is
/// `grpc_deadline_exceeded`, its messages cut off.
#[test]
fn server_client_and_bidirectional_streams_count_and_time_each_message() {
    let server = GrpcServer::start(&[]);
    let dir = scenario_dir(&[(
        "s.toml",
        &format!(
            r#"
base_url = "http://127.0.0.1:{port}"
[grpc]
protoset = "{protoset}"
[load]
vus = 2
iterations = 3
[[session]]
name = "streams"
steps = [
  {{ request = "countdown" }},
  {{ request = "paced countdown" }},
  {{ request = "collect" }},
  {{ request = "chat" }},
  {{ request = "late" }},
]
[[request]]
name = "countdown"
grpc = "demo.v1.Greeter/Countdown"
json = {{ name = "u{{{{user_id}}}}", times = 5 }}
check = [ {{ json_path = "$[4].message", equals = "u{{{{user_id}}}} 1" }} ]
[[request]]
name = "paced countdown"
grpc = "demo.v1.Greeter/Countdown"
json = {{ name = "every:30", times = 3 }}
[[request]]
name = "collect"
grpc = "demo.v1.Greeter/Collect"
body = '[{{"name": "a"}}, {{"name": "b"}}]'
stream = {{ count = 6, interval = "5ms" }}
check = [ {{ json_path = "$.message", equals = "collected 6 a b a b a b" }} ]
[[request]]
name = "chat"
grpc = "demo.v1.Greeter/Chat"
json = {{ name = "hi {{{{user_id}}}}" }}
stream = {{ count = 4, interval = "20ms" }}
check = [ {{ json_path = "$[3].message", equals = "echo hi {{{{user_id}}}}" }} ]
[[request]]
name = "late"
grpc = "demo.v1.Greeter/Countdown"
json = {{ name = "every:1000", times = 5 }}
timeout = "300ms"
"#,
            port = server.port,
            protoset = server.file("greeter.protoset").display()
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    let per = |name: &str| results["per_request"][name].clone();
    let count = |name: &str| n(&per(name)["requests"]["total"]);
    let failed = |name: &str| n(&per(name)["requests"]["failed"]);
    // 2 users × 3 iterations: 6 calls of each.
    for call in ["countdown", "paced countdown", "collect", "chat", "late"] {
        assert_eq!(count(call), 6, "{call}: {}", per(call));
    }
    for call in ["countdown", "paced countdown", "collect", "chat"] {
        assert_eq!(failed(call), 0, "{call}: {}", results["errors"]);
    }
    assert_eq!(failed("late"), 6, "{}", results["errors"]);
    assert_eq!(
        n(&results["errors"]["grpc_deadline_exceeded"]),
        6,
        "{}",
        results["errors"]
    );
    // Messages received, each timed: the first of each call, then the rest.
    let first = |call: &str| count(&format!("{call} first message"));
    let next = |call: &str| count(&format!("{call} next message"));
    assert_eq!((first("countdown"), next("countdown")), (6, 24));
    assert_eq!((first("paced countdown"), next("paced countdown")), (6, 12));
    assert_eq!((first("collect"), next("collect")), (6, 0));
    assert_eq!((first("chat"), next("chat")), (6, 18));
    // The late stream got no reply before its deadline.
    assert_eq!(first("late"), 0, "{}", per("late first message"));
    // 30 ms before each reply: none came sooner after the call's start;
    // the later ones' gaps (from the reply before: one read late shortens
    // the next gap, so their mean, with room) show the wait too.
    let latency = |entry: &str, figure: &str| per(entry)["latency_ms"][figure].as_f64().unwrap();
    let first_min = latency("paced countdown first message", "min");
    assert!(
        first_min >= 29.0,
        "{}",
        per("paced countdown first message")
    );
    let next_mean = latency("paced countdown next message", "mean");
    assert!(next_mean >= 20.0, "{}", per("paced countdown next message"));
    assert!(latency("countdown next message", "mean") < next_mean);
    let k = &results["sockets"];
    assert_eq!(n(&k["grpc_streams_opened"]), 30, "{k}");
    // Sent: 4 server-stream requests, 6 + 4 messages a client stream.
    assert_eq!(n(&k["messages_sent"]), 6 * (1 + 1 + 6 + 4 + 1), "{k}");
    assert_eq!(n(&k["messages_received"]), 6 * (5 + 3 + 1 + 4), "{k}");
    assert_eq!(n(&k["closes"]["server:ok"]), 24, "{k}");
    let c = server.counts();
    assert_eq!(n(&c["calls"]["Countdown"]), 18, "{c}");
    assert_eq!(n(&c["calls"]["Collect"]), 6, "{c}");
    assert_eq!(n(&c["calls"]["Chat"]), 6, "{c}");
    // What the server received and sent (the late streams' replies never
    // left: their calls were cancelled first).
    assert_eq!(n(&c["received"]), n(&k["messages_sent"]), "{c}");
    assert_eq!(n(&c["sent"]), 6 * (5 + 3 + 1 + 4), "{c}");
}

/// Metadata reaches the server: text as given, a `-bin` field given as
/// base64 (padded or not) arrives as its bytes; one that is not base64 is
/// refused before any load, naming the file and the field.
#[test]
fn text_and_binary_metadata_reach_the_server() {
    let server = GrpcServer::start(&[]);
    let scenario = |trace: &str| {
        format!(
            r#"
base_url = "http://127.0.0.1:{port}"
[load]
vus = 1
iterations = 3
[[request]]
name = "metadata"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "metadata" }}
headers = {{ "x-tenant" = "t1", "trace-bin" = "{trace}" }}
check = [ {{ json_path = "$.message", equals = "trace-bin=68690a x-tenant=t1" }} ]
"#,
            port = server.port
        )
    };
    for trace in ["aGkK", "aGkK===="] {
        let dir = scenario_dir(&[("s.toml", &scenario(trace))]);
        let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
        assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
        let results = r.results();
        assert_eq!(results["requests"]["total"], 3);
        assert_eq!(results["requests"]["failed"], 0, "{}", results["errors"]);
    }
    let dir = scenario_dir(&[("s.toml", &scenario("not base64!"))]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("s.toml")
            && r.stderr.contains("trace-bin")
            && r.stderr.contains("base64"),
        "{}",
        r.stderr
    );
    assert_eq!(n(&server.counts()["calls"]["SayHello"]), 6);
}

/// `--trace`: a unary call carries `traceparent` as metadata, the one its
/// exemplar names.
#[test]
fn a_traced_call_carries_traceparent_metadata() {
    let server = GrpcServer::start(&[]);
    let dir = scenario_dir(&[(
        "s.toml",
        &format!(
            r#"
base_url = "http://127.0.0.1:{port}"
[load]
vus = 1
iterations = 3
[[request]]
name = "metadata"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "metadata" }}
"#,
            port = server.port
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap(), "--trace"]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let results = r.results();
    assert_eq!(results["requests"]["ok"], 3, "{}", results["errors"]);
    let exemplars = results["exemplars"].as_array().unwrap();
    assert_eq!(exemplars.len(), 3, "each call among the run's slowest");
    // The server lists what it got: each call's traceparent, the IDs
    // headroom kept for it.
    let echoed: BTreeSet<String> = server.counts()["metadata_echoed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    let kept: BTreeSet<String> = exemplars
        .iter()
        .map(|e| {
            format!(
                "traceparent=00-{}-{}-01",
                e["trace_id"].as_str().unwrap(),
                e["span_id"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(echoed, kept);
}

/// `[grpc] compression = "gzip"`: messages go compressed (a 10,000-letter
/// name in under a tenth of its size) and the server's gzip answers are
/// read — unary and bidirectional, checks on the unpacked messages.
#[test]
fn gzip_compression_both_ways() {
    let server = GrpcServer::start(&["--gzip"]);
    let name = "a".repeat(10_000);
    let dir = scenario_dir(&[(
        "s.toml",
        &format!(
            r#"
base_url = "http://127.0.0.1:{port}"
[grpc]
compression = "gzip"
[load]
vus = 1
iterations = 2
[[session]]
name = "packed"
steps = [ {{ request = "hello" }}, {{ request = "chat" }} ]
[[request]]
name = "hello"
grpc = "demo.v1.Greeter/SayHello"
json = {{ name = "{name}" }}
check = [ {{ json_path = "$.message", equals = "hello {name}" }} ]
[[request]]
name = "chat"
grpc = "demo.v1.Greeter/Chat"
json = {{ name = "{name}" }}
stream = {{ count = 3 }}
check = [ {{ json_path = "$[2].message", equals = "echo {name}" }} ]
"#,
            port = server.port
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    assert_eq!(results["requests"]["failed"], 0, "{}", results["errors"]);
    assert_eq!(n(&results["per_request"]["hello"]["requests"]["total"]), 2);
    let k = &results["sockets"];
    assert_eq!(n(&k["messages_sent"]), 6, "{k}");
    assert_eq!(n(&k["messages_received"]), 6, "{k}");
    // Compressed each way: far under the 10,000 bytes a message holds.
    assert!(n(&k["bytes_sent"]) < 6 * 1_000, "{k}");
    assert!(n(&k["bytes_received"]) < 6 * 1_000, "{k}");
    let hello = n(&results["per_request"]["hello"]["bytes_received"]);
    assert!(hello < 2 * 1_000, "{}", results["per_request"]["hello"]);
    assert_eq!(n(&server.counts()["calls"]["Chat"]), 2);
    // A compression headroom does not speak is refused before the load.
    let text = std::fs::read_to_string(dir.path().join("s.toml")).unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        text.replace("\"gzip\"", "\"br\""),
    )
    .unwrap();
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("s.toml:4") && r.stderr.contains("gzip, identity"),
        "{}",
        r.stderr
    );
}

/// `headroom import k6` of a k6 gRPC script (`k6/net/grpc`, as k6's docs
/// write one): the scenario it writes calls the same server, types from
/// the script's `.proto`, metadata and checks on the message carried.
#[test]
fn a_k6_grpc_script_imports_and_runs() {
    let server = GrpcServer::start(&["--no-reflection"]);
    let proto = std::fs::read_to_string(server.file("greeter.proto")).unwrap();
    let script = format!(
        "import grpc from 'k6/net/grpc';\n\
         import {{ check }} from 'k6';\n\
         export const options = {{ vus: 2, iterations: 10 }};\n\
         const client = new grpc.Client();\n\
         client.load(['.'], 'greeter.proto');\n\
         export default () => {{\n\
           client.connect('127.0.0.1:{port}', {{ plaintext: true }});\n\
           const res = client.invoke('demo.v1.Greeter/SayHello', {{ name: 'metadata' }}, {{ metadata: {{ 'x-tenant': 't1' }} }});\n\
           check(res, {{\n\
             'status is OK': (r) => r && r.status === grpc.StatusOK,\n\
             'metadata arrived': (r) => r.message.message === 'x-tenant=t1',\n\
           }});\n\
           client.close();\n\
         }};\n",
        port = server.port
    );
    let dir = scenario_dir(&[("script.js", &script), ("greeter.proto", &proto)]);
    let (scenario, _) = import_to_scenario("k6", &dir.path().join("script.js"));
    let r = run(&[scenario.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.results();
    assert_eq!(results["requests"]["total"], 10, "{}", r.stdout);
    assert_eq!(results["requests"]["failed"], 0, "{}", results["errors"]);
    assert_eq!(n(&server.counts()["calls"]["SayHello"]), 10);
}

/// `--processes 2` with a streaming call: each process runs its share,
/// and the merged results add up exactly — calls, their message entries
/// and the streams' counts — to what the server counted.
#[test]
fn streaming_calls_over_two_processes_add_up() {
    let server = GrpcServer::start(&[]);
    let r = run(&[
        "--grpc",
        &server.url(),
        "--call",
        "demo.v1.Greeter/Chat",
        "--data",
        r#"[{"name": "a"}, {"name": "b"}]"#,
        "--stream-call-count",
        "4",
        "--vus",
        "4",
        "--requests",
        "40",
        "--processes",
        "2",
    ]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let results = r.results();
    let per = |name: &str| n(&results["per_request"][name]["requests"]["total"]);
    assert_eq!(
        per("demo.v1.Greeter/Chat"),
        40,
        "{}",
        results["per_request"]
    );
    assert_eq!(per("demo.v1.Greeter/Chat first message"), 40);
    assert_eq!(per("demo.v1.Greeter/Chat next message"), 120);
    let k = &results["sockets"];
    assert_eq!(n(&k["grpc_streams_opened"]), 40, "{k}");
    assert_eq!(n(&k["messages_sent"]), 160, "{k}");
    assert_eq!(n(&k["closes"]["server:ok"]), 40, "{k}");
    let c = server.counts();
    assert_eq!(n(&c["calls"]["Chat"]), 40, "{c}");
    assert_eq!(n(&c["received"]), 160, "{c}");
}

/// A gRPC stream held by a session, as WebSocket steps hold a socket:
/// opened (metadata sent), messages sent at a rate, each echo awaited as
/// a match (its round trip timed), closed with the server's status — every
/// message counted as the server counted it.
#[test]
fn a_session_holds_a_grpc_stream_with_socket_steps() {
    let server = GrpcServer::start(&[]);
    let dir = scenario_dir(&[(
        "s.toml",
        &format!(
            r#"
base_url = "http://127.0.0.1:{port}"
[load]
vus = 2
iterations = 3
[[session]]
name = "chatter"
steps = [
  {{ grpc_stream = "demo.v1.Greeter/Chat", name = "chat", headers = {{ "x-tenant" = "t1" }} }},
  {{ repeat = 4, every = "20ms", steps = [
    {{ send = '{{"name": "u{{{{user_id}}}}"}}', name = "echo", expect = {{ json_path = "$.message", equals = "echo u{{{{user_id}}}}", within = "2s" }} }},
  ] }},
  {{ close = 1000 }},
]
"#,
            port = server.port
        ),
    )]);
    let r = run(&[dir.path().join("s.toml").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let results = r.results();
    let per = |name: &str| results["per_request"][name]["requests"].clone();
    assert_eq!(n(&per("chat")["total"]), 6, "{}", results["per_request"]);
    assert_eq!(n(&per("chat")["failed"]), 0, "{}", results["errors"]);
    assert_eq!(n(&per("echo")["total"]), 24, "{}", results["per_request"]);
    assert_eq!(n(&per("echo")["failed"]), 0, "{}", results["errors"]);
    let k = &results["sockets"];
    assert_eq!(n(&k["grpc_streams_opened"]), 6, "{k}");
    assert_eq!(n(&k["messages_sent"]), 24, "{k}");
    assert_eq!(n(&k["messages_received"]), 24, "{k}");
    assert_eq!(n(&k["unmatched"]), 0, "{k}");
    assert_eq!(n(&k["closes"]["server:ok"]), 6, "{k}");
    let c = server.counts();
    assert_eq!(n(&c["calls"]["Chat"]), 6, "{c}");
    assert_eq!((n(&c["received"]), n(&c["sent"])), (24, 24), "{c}");
}
