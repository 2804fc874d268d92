//! Driving headless Chromium as a person would: the DevTools protocol over
//! its WebSocket (`--remote-debugging-port`, on loopback), to open a live
//! page, read what it shows as it changes, and click its buttons.

use super::chromium::chromium_args;
use super::ProcessGuard;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// A page open in headless Chromium, driven over the DevTools protocol.
pub struct Browser {
    page: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    // Dropped after the page's socket: Chromium stops, then its profile goes.
    _chromium: ProcessGuard,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Chromium started on `url`, its page's DevTools socket open.
    pub fn open(url: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let data = profile.path().join("data");
        let child = Command::new("chromium")
            .args(chromium_args(&data))
            .arg("--remote-debugging-address=127.0.0.1")
            // 0: a free port, written to DevToolsActivePort (no race).
            .arg("--remote-debugging-port=0")
            .arg(url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium is installed (.ci/run installs it)");
        let chromium = ProcessGuard { child };
        let port = devtools_port(&data.join("DevToolsActivePort"));
        let targets: Value = serde_json::from_str(&json_list(port)).unwrap();
        let socket = targets
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .unwrap_or_else(|| panic!("no page among {targets}"))
            .to_string();
        let (page, _) = tungstenite::connect(socket).expect("the page's DevTools socket");
        if let MaybeTlsStream::Plain(s) = page.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        }
        Browser {
            page,
            next_id: 0,
            _chromium: chromium,
            _profile: profile,
        }
    }

    /// `expression` evaluated in the page (promises awaited): its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        self.try_eval(expression)
            .unwrap_or_else(|thrown| panic!("`{expression}` threw: {thrown}"))
    }

    /// The same, or what it threw (a page still loading has no body yet).
    fn try_eval(&mut self, expression: &str) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let call = json!({
            "id": id,
            "method": "Runtime.evaluate",
            "params": { "expression": expression, "returnByValue": true, "awaitPromise": true },
        });
        self.page.send(Message::text(call.to_string())).unwrap();
        loop {
            let Message::Text(text) = self.page.read().expect("an answer from Chromium") else {
                continue;
            };
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == id {
                let result = &answer["result"];
                if !result["exceptionDetails"].is_null() {
                    return Err(result.clone());
                }
                return Ok(result["result"]["value"].clone());
            }
        }
    }

    /// The text of the element with this id (empty when there is none).
    pub fn text(&mut self, id: &str) -> String {
        let value = self.eval(&format!(
            "(document.getElementById({id:?}) || {{textContent: ''}}).textContent"
        ));
        value.as_str().unwrap_or_default().to_string()
    }

    /// Waits (up to `within`) until `expression` is true in the page.
    pub fn wait_for(&mut self, expression: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.eval(expression) != json!(true) {
            assert!(
                Instant::now() < deadline,
                "never true in the page: {expression}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Chromium's list of targets: read by its length, as Chromium keeps the
/// connection open whatever the request asks.
fn json_list(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /json/list HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

/// The port Chromium's DevTools listen on, once it has written it.
fn devtools_port(file: &std::path::Path) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(port) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.lines().next()?.trim().parse().ok())
        {
            return port;
        }
        assert!(
            Instant::now() < deadline,
            "Chromium never opened its DevTools port"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
