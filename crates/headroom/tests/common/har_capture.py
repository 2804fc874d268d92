#!/usr/bin/env python3
"""Load a page in headless Chromium and save what it sent as a HAR 1.2 file,
the way the developer tools' "Save all as HAR" does: a DevTools-protocol
client over --remote-debugging-pipe (NUL-separated JSON on fds 3 and 4), so
no WebSocket library is needed.

    har_capture.py URL OUT.har [--chromium PATH] [--timeout SECONDS]

The page is done when its load event has fired and no request has been in
flight for a second; the whole capture is bounded by --timeout (default 20 s).
"""

import argparse
import datetime
import json
import os
import select
import subprocess
import sys
import tempfile
import time


class Pipe:
    """Chromium's end of the protocol: write to its fd 3, read its fd 4."""

    def __init__(self, to_chromium, from_chromium):
        self.out = to_chromium
        self.inp = from_chromium
        self.buffered = b""
        self.next_id = 0

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.out, json.dumps(message).encode() + b"\0")
        return self.next_id

    def receive(self, deadline):
        """The next message, or None when the deadline passes first."""
        while b"\0" not in self.buffered:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.inp], [], [], left)[0]:
                return None
            chunk = os.read(self.inp, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffered += chunk
        message, self.buffered = self.buffered.split(b"\0", 1)
        return json.loads(message)


def call(pipe, events, method, params, session, deadline):
    """Send a command and wait for its answer; events meanwhile are kept."""
    wanted = pipe.send(method, params, session)
    while True:
        m = pipe.receive(deadline)
        if m is None:
            raise RuntimeError(f"no answer to {method}")
        if m.get("id") == wanted:
            if "error" in m:
                raise RuntimeError(f"{method}: {m['error']}")
            return m.get("result", {})
        events.append(m)


def headers_list(headers):
    return [{"name": k, "value": v} for k, v in (headers or {}).items()]


def iso(wall_seconds):
    t = datetime.datetime.fromtimestamp(wall_seconds, datetime.timezone.utc)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def to_har(events, page_url):
    """HAR 1.2 entries from the Network domain's events, in request order."""
    requests = {}  # by requestId: the latest request under that id
    order = []  # keys of requests, in the order they were sent
    extras = {}  # by requestId: requestWillBeSentExtraInfo, one per hop
    for m in events:
        method, p = m.get("method"), m.get("params", {})
        rid = p.get("requestId")
        if method == "Network.requestWillBeSent":
            if p["request"]["url"].startswith("data:"):
                continue  # in the page itself, not sent (DevTools leaves them out too)
            if rid in requests:
                # A redirect reuses the id: the hop before keeps its own key
                # and gets the redirect as its response.
                hop = requests.pop(rid)
                hop["response"] = p.get("redirectResponse", {})
                key = f"{rid}@{len(order)}"
                requests[key] = hop
                order[order.index(rid)] = key
            hop = len([k for k in order if k.split("@")[0] == rid])
            requests[rid] = {"sent": p, "hop": hop}
            order.append(rid)
        elif method == "Network.requestWillBeSentExtraInfo":
            extras.setdefault(rid, []).append(p)
        elif method == "Network.responseReceived" and rid in requests:
            requests[rid]["response"] = p["response"]
    for key in order:
        r = requests[key]
        hops = extras.get(key.split("@")[0], [])
        r["extra"] = hops[r["hop"]] if r["hop"] < len(hops) else {}
    entries = []
    for rid in order:
        r = requests[rid]
        sent = r["sent"]
        req = sent["request"]
        # The headers on the wire (Cookie included) when Chromium reports them.
        headers = r["extra"].get("headers") or req.get("headers")
        url = req["url"] + req.get("urlFragment", "")
        query = []
        if "?" in url:
            for pair in url.split("?", 1)[1].split("#")[0].split("&"):
                name, _, value = pair.partition("=")
                query.append({"name": name, "value": value})
        request = {
            "method": req["method"],
            "url": url,
            "httpVersion": "HTTP/1.1",
            "headers": headers_list(headers),
            "queryString": query,
            "cookies": [],
            "headersSize": -1,
            "bodySize": len(req.get("postData", "").encode()),
        }
        if req.get("hasPostData"):
            request["postData"] = {
                "mimeType": (req.get("headers") or {}).get("Content-Type", ""),
                "text": req.get("postData", ""),
            }
        resp = r.get("response", {})
        entries.append(
            {
                "startedDateTime": iso(sent["wallTime"]),
                "time": 0,
                "request": request,
                "response": {
                    "status": resp.get("status", 0),
                    "statusText": resp.get("statusText", ""),
                    "httpVersion": resp.get("protocol", "http/1.1").upper(),
                    "headers": headers_list(resp.get("headers")),
                    "cookies": [],
                    "content": {"size": -1, "mimeType": resp.get("mimeType", "")},
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": -1,
                },
                "cache": {},
                "timings": {"send": 0, "wait": 0, "receive": 0},
                "_resourceType": sent.get("type", "").lower(),
            }
        )
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "headroom har_capture (DevTools protocol)", "version": "1"},
            "pages": [{"id": "page_1", "title": page_url, "startedDateTime": entries[0]["startedDateTime"] if entries else iso(time.time()), "pageTimings": {}}],
            "entries": entries,
        }
    }


def capture(url, chromium, timeout):
    deadline = time.monotonic() + timeout
    profile = tempfile.TemporaryDirectory(ignore_cleanup_errors=True)
    # fds 3 and 4 in the child: 3 is what Chromium reads, 4 what it writes.
    chromium_reads, we_write = os.pipe()
    we_read, chromium_writes = os.pipe()

    def fds_3_and_4():
        # Copies first: either pipe end may itself be fd 3 or 4, and
        # dup2 onto itself would leave it close-on-exec.
        reads, writes = os.dup(chromium_reads), os.dup(chromium_writes)
        os.dup2(reads, 3)
        os.dup2(writes, 4)

    child = subprocess.Popen(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-pings",
            # Chromium's own background requests must not leave the machine.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile.name}",
            "about:blank",
        ],
        # Not close_fds: it would close 3 and 4 after preexec_fn; Python's
        # own fds are close-on-exec anyway.
        close_fds=False,
        preexec_fn=fds_3_and_4,
        stdout=subprocess.DEVNULL,
        stderr=None if os.environ.get("HAR_DEBUG") else subprocess.DEVNULL,
    )
    os.close(chromium_reads)
    os.close(chromium_writes)
    pipe = Pipe(we_write, we_read)
    events = []
    try:
        target = call(pipe, events, "Target.createTarget", {"url": "about:blank"}, None, deadline)
        session = call(
            pipe, events, "Target.attachToTarget",
            {"targetId": target["targetId"], "flatten": True}, None, deadline,
        )["sessionId"]
        call(pipe, events, "Network.enable", {}, session, deadline)
        call(pipe, events, "Page.enable", {}, session, deadline)
        events.clear()  # about:blank's own events
        call(pipe, events, "Page.navigate", {"url": url}, session, deadline)
        loaded = False
        in_flight = set()
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            m = pipe.receive(min(deadline, time.monotonic() + 0.2))
            now = time.monotonic()
            if m is not None:
                events.append(m)
                method, p = m.get("method"), m.get("params", {})
                if method == "Page.loadEventFired":
                    loaded = True
                elif method == "Network.requestWillBeSent":
                    in_flight.add(p["requestId"])
                elif method in ("Network.loadingFinished", "Network.loadingFailed"):
                    in_flight.discard(p["requestId"])
                if in_flight:
                    quiet_since = now
            if loaded and not in_flight and now - quiet_since >= 1.0:
                return to_har(events, url)
        raise RuntimeError(f"the page did not settle within {timeout} s")
    finally:
        # Browser.close lets Chromium end its helpers before the profile goes.
        try:
            pipe.send("Browser.close")
            child.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            child.kill()
            child.wait()
        profile.cleanup()


def main():
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("url")
    args.add_argument("out")
    args.add_argument("--chromium", default="chromium")
    args.add_argument("--timeout", type=float, default=20.0)
    a = args.parse_args()
    har = capture(a.url, a.chromium, a.timeout)
    with open(a.out, "w") as f:
        json.dump(har, f, indent=1)
    print(f"{len(har['log']['entries'])} entries in {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
