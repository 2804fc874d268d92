// Carried over from a k6 script by `headroom import k6`: the scenario's
// steps, conditions and hooks call what this module defines. k6's
// `crypto` and `encoding` are headroom's own (the same names).

// k6 prints; a load generator's scripts stay quiet.
const console = { log() {}, info() {}, warn() {}, error() {}, debug() {} };
// Scripts do not read the environment: `${NAME}` in the scenario does.
const __ENV = {};

// A response as k6 scripts read it: status, body, headers under k6's
// names (Content-Type), json() and json('a.b.0').
function k6response(r) {
  const headers = {};
  for (const [name, value] of Object.entries(r.headers)) {
    headers[name.replace(/(^|-)([a-z])/g, (_, dash, c) => dash + c.toUpperCase())] = value;
  }
  let parsed;
  return {
    status: r.status,
    body: r.body,
    headers,
    json(path) {
      if (parsed === undefined) parsed = JSON.parse(r.body);
      if (path === undefined) return parsed;
      return String(path)
        .split(".")
        .reduce((at, key) => (at === null || at === undefined ? undefined : at[key]), parsed);
    },
  };
}

// A URL's path and query: the scenario's base URL is the origin.
function k6path(url) {
  const text = String(url);
  const origin = text.match(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i);
  const rest = origin ? text.slice(origin[0].length) : text;
  return rest === "" ? "/" : rest;
}

// A body as k6 sends it: an object as a form, anything else as text.
function k6body(body, request) {
  if (body === null || body === undefined) return "";
  if (typeof body === "object") {
    request.headers["Content-Type"] = "application/x-www-form-urlencoded";
    return Object.entries(body)
      .map(([k, v]) => encodeURIComponent(k) + "=" + encodeURIComponent(v))
      .join("&");
  }
  return String(body);
}

// jslib.k6.io's k6-utils, the functions scripts import most.
const k6utils = {
  randomIntBetween(min, max) {
    return Math.floor(Math.random() * (max - min + 1) + min);
  },
  randomItem(items) {
    return items[Math.floor(Math.random() * items.length)];
  },
  randomString(length, chars = "abcdefghijklmnopqrstuvwxyz") {
    let out = "";
    for (let i = 0; i < length; i++) out += chars[Math.floor(Math.random() * chars.length)];
    return out;
  },
  uuidv4() {
    return crypto.uuidv4();
  },
};
