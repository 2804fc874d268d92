// Postman's `pm` (and CryptoJS) as collections' scripts use them most,
// over headroom's ctx: variables, the request in a pre-request script, the
// response and pm.test / pm.expect in a test script. A failed pm.test fails
// the request as its `after` check, with the test's name and message.

// The collection's own variables (`collectionDefaults`, written before
// this by the importer) are what `get` finds when the user has no such
// variable of its own.
function pmStore(ctx) {
  return {
    get: (k) => (k in ctx.vars ? ctx.vars[k] : collectionDefaults[k]),
    set: (k, v) => { ctx.vars[k] = typeof v === "string" ? v : JSON.stringify(v); },
    unset: (k) => { delete ctx.vars[k]; },
    has: (k) => k in ctx.vars || k in collectionDefaults,
    replaceIn: (text) => String(text).replace(/\{\{([^}]+)\}\}/g, (m, k) => (k in ctx.vars ? ctx.vars[k] : m)),
  };
}

function pmHeaders(object) {
  const find = (name) => Object.keys(object).find((k) => k.toLowerCase() === String(name).toLowerCase());
  return {
    get: (name) => { const k = find(name); return k === undefined ? undefined : object[k]; },
    has: (name) => find(name) !== undefined,
    add: (h) => { object[h.key] = String(h.value); },
    upsert: (h) => { const k = find(h.key); object[k === undefined ? h.key : k] = String(h.value); },
    remove: (name) => { const k = find(name); if (k !== undefined) delete object[k]; },
  };
}

function pmExpect(actual, negate) {
  const check = (ok, what) => {
    if (ok === !!negate) {
      throw new Error(`expected ${JSON.stringify(actual)} ${negate ? "not " : ""}${what}`);
    }
  };
  const deepEqual = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const chain = {
    equal: (v) => check(actual === v, `to equal ${JSON.stringify(v)}`),
    eql: (v) => check(deepEqual(actual, v), `to deeply equal ${JSON.stringify(v)}`),
    above: (v) => check(actual > v, `to be above ${v}`),
    below: (v) => check(actual < v, `to be below ${v}`),
    least: (v) => check(actual >= v, `to be at least ${v}`),
    most: (v) => check(actual <= v, `to be at most ${v}`),
    include: (v) => check(actual != null && actual.includes(v), `to include ${JSON.stringify(v)}`),
    oneOf: (list) => check(list.includes(actual), `to be one of ${JSON.stringify(list)}`),
    property: (name, v) => check(actual != null && name in Object(actual) && (v === undefined || deepEqual(actual[name], v)),
      `to have property ${name}`),
    lengthOf: (n) => check(actual != null && actual.length === n, `to have length ${n}`),
    a: (type) => check(Array.isArray(actual) ? type === "array" : typeof actual === type, `to be a ${type}`),
  };
  chain.an = chain.a;
  chain.equals = chain.equal;
  chain.contain = chain.include;
  const words = ["to", "be", "been", "is", "that", "which", "and", "has", "have", "with", "at", "of", "same", "deep"];
  for (const w of words) chain[w] = chain;
  Object.defineProperty(chain, "not", { get: () => pmExpect(actual, !negate) });
  for (const [name, ok] of [["ok", () => !!actual], ["true", () => actual === true], ["false", () => actual === false],
    ["null", () => actual === null], ["undefined", () => actual === undefined],
    ["empty", () => actual != null && Object.keys(actual).length === 0]]) {
    Object.defineProperty(chain, name, { get: () => check(ok(), `to be ${name}`) });
  }
  return chain;
}

function pmFor(ctx) {
  const store = pmStore(ctx);
  const pm = {
    environment: store,
    collectionVariables: store,
    variables: store,
    globals: store,
    test: (name, fn) => {
      try {
        fn();
      } catch (e) {
        ctx.fail(`${name}: ${e.message}`);
      }
    },
    expect: (actual) => pmExpect(actual, false),
  };
  if (ctx.request) {
    pm.request = {
      method: ctx.request.method,
      url: { toString: () => ctx.request.url },
      headers: pmHeaders(ctx.request.headers),
      body: { raw: ctx.request.body, toString: () => ctx.request.body },
    };
  } else {
    const r = ctx.response;
    const status = (code) => {
      if (r.status !== code) throw new Error(`expected response to have status code ${code} but got ${r.status}`);
    };
    pm.response = {
      code: r.status,
      json: () => r.json(),
      text: () => r.body,
      headers: pmHeaders(r.headers),
      to: { have: { status, header: (name) => { if (!(String(name).toLowerCase() in r.headers)) throw new Error(`expected header ${name}`); } },
        be: { get ok() { if (r.status < 200 || r.status > 299) throw new Error(`expected a 2xx status but got ${r.status}`); } } },
    };
  }
  return pm;
}

// CryptoJS's hashes and HMACs, as pre-request scripts sign with them.
const CryptoJS = (() => {
  const word = (hex) => ({
    hex,
    toString: (enc) => (enc === CryptoJS.enc.Base64 ? encodeHexAsBase64(hex) : hex),
  });
  const encodeHexAsBase64 = (hex) => {
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const bytes = [];
    for (let i = 0; i < hex.length; i += 2) bytes.push(parseInt(hex.substr(i, 2), 16));
    let out = "";
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
      out += alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63] +
        (i + 1 < bytes.length ? alphabet[(n >> 6) & 63] : "=") + (i + 2 < bytes.length ? alphabet[n & 63] : "=");
    }
    return out;
  };
  const text = (m) => (typeof m === "string" ? m : String(m));
  return {
    enc: { Hex: { name: "hex" }, Base64: { name: "base64" }, Utf8: { name: "utf8" } },
    HmacSHA256: (m, k) => word(crypto.hmac("sha256", text(k), text(m), "hex")),
    HmacSHA1: (m, k) => word(crypto.hmac("sha1", text(k), text(m), "hex")),
    HmacSHA512: (m, k) => word(crypto.hmac("sha512", text(k), text(m), "hex")),
    SHA256: (m) => word(crypto.sha256(text(m), "hex")),
    SHA1: (m) => word(crypto.sha1(text(m), "hex")),
    MD5: (m) => word(crypto.md5(text(m), "hex")),
  };
})();
