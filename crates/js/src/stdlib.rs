//! The standard library scripts get, as k6 names it where k6 has it:
//! `crypto` (hmac, sha1/sha256/sha384/sha512/md5 digests, uuidv4 /
//! randomUUID), `encoding` (b64encode, b64decode, hexEncode), and
//! `Math.random` drawn from the run's seed. Nothing here reads a file, the
//! environment or the network.

use base64::Engine as _;
use rquickjs::function::Opt;
use rquickjs::{Ctx, Exception, Function, Object, Result};
use std::cell::RefCell;
use std::rc::Rc;

/// Defines `crypto`, `encoding` and the seeded `Math.random` on the
/// context's global object.
pub(crate) fn install(ctx: &Ctx<'_>, seed: u64) -> Result<()> {
    let globals = ctx.globals();
    let crypto = Object::new(ctx.clone())?;
    crypto.set("hmac", Function::new(ctx.clone(), hmac)?)?;
    for (name, algorithm) in [
        ("sha1", "sha1"),
        ("sha256", "sha256"),
        ("sha384", "sha384"),
        ("sha512", "sha512"),
        ("md5", "md5"),
    ] {
        let f = move |ctx: Ctx<'_>, data: String, out: Opt<String>| -> Result<String> {
            let bytes = digest(&ctx, algorithm, data.as_bytes())?;
            encode(&ctx, &bytes, out.0.as_deref())
        };
        crypto.set(name, Function::new(ctx.clone(), f)?)?;
    }
    let rng = Rc::new(RefCell::new(fastrand::Rng::with_seed(seed)));
    let uuid_rng = rng.clone();
    let uuid = move || -> String {
        let bytes: [u8; 16] = std::array::from_fn(|_| uuid_rng.borrow_mut().u8(..));
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    };
    crypto.set("uuidv4", Function::new(ctx.clone(), uuid.clone())?)?;
    crypto.set("randomUUID", Function::new(ctx.clone(), uuid)?)?;
    globals.set("crypto", crypto)?;

    let encoding = Object::new(ctx.clone())?;
    encoding.set("b64encode", Function::new(ctx.clone(), b64encode)?)?;
    encoding.set("b64decode", Function::new(ctx.clone(), b64decode)?)?;
    encoding.set(
        "hexEncode",
        Function::new(ctx.clone(), |data: String| hex(data.as_bytes()))?,
    )?;
    globals.set("encoding", encoding)?;

    let math: Object = globals.get("Math")?;
    let random = move || rng.borrow_mut().f64();
    math.set("random", Function::new(ctx.clone(), random)?)?;
    Ok(())
}

/// k6's `crypto.hmac(algorithm, secret, data, outputEncoding)`.
fn hmac(
    ctx: Ctx<'_>,
    algorithm: String,
    secret: String,
    data: String,
    out: Opt<String>,
) -> Result<String> {
    use ring::hmac;
    let algorithm = match algorithm.to_ascii_lowercase().as_str() {
        "sha256" => hmac::HMAC_SHA256,
        "sha384" => hmac::HMAC_SHA384,
        "sha512" => hmac::HMAC_SHA512,
        "sha1" => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        other => {
            return Err(Exception::throw_type(
                &ctx,
                &format!("crypto.hmac: unknown algorithm `{other}` (sha1, sha256, sha384, sha512)"),
            ))
        }
    };
    let key = hmac::Key::new(algorithm, secret.as_bytes());
    let tag = hmac::sign(&key, data.as_bytes());
    encode(&ctx, tag.as_ref(), out.0.as_deref())
}

fn digest(ctx: &Ctx<'_>, algorithm: &str, data: &[u8]) -> Result<Vec<u8>> {
    use ring::digest;
    let algorithm = match algorithm {
        "sha1" => &digest::SHA1_FOR_LEGACY_USE_ONLY,
        "sha256" => &digest::SHA256,
        "sha384" => &digest::SHA384,
        "sha512" => &digest::SHA512,
        "md5" => {
            use md5::Digest;
            return Ok(md5::Md5::digest(data).to_vec());
        }
        other => {
            return Err(Exception::throw_type(
                ctx,
                &format!("unknown digest `{other}`"),
            ))
        }
    };
    Ok(digest::digest(algorithm, data).as_ref().to_vec())
}

/// Bytes as text in k6's output encodings (default hex).
fn encode(ctx: &Ctx<'_>, bytes: &[u8], how: Option<&str>) -> Result<String> {
    use base64::engine::general_purpose as b64;
    Ok(match how.unwrap_or("hex") {
        "hex" => hex(bytes),
        "base64" | "std" => b64::STANDARD.encode(bytes),
        "base64url" | "url" => b64::URL_SAFE.encode(bytes),
        "base64rawurl" | "rawurl" => b64::URL_SAFE_NO_PAD.encode(bytes),
        "rawstd" => b64::STANDARD_NO_PAD.encode(bytes),
        other => {
            return Err(Exception::throw_type(
                ctx,
                &format!(
                "unknown output encoding `{other}` (hex, base64, base64url, base64rawurl, rawstd)"
            ),
            ))
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// k6's `encoding.b64encode(input, encoding)`.
fn b64encode(ctx: Ctx<'_>, data: String, how: Opt<String>) -> Result<String> {
    let how = how.0.unwrap_or_else(|| "std".into());
    encode(&ctx, data.as_bytes(), Some(&how))
}

/// k6's `encoding.b64decode(input, encoding)`, as text.
fn b64decode(ctx: Ctx<'_>, data: String, how: Opt<String>) -> Result<String> {
    use base64::engine::general_purpose as b64;
    let engine = match how.0.as_deref().unwrap_or("std") {
        "std" | "base64" => b64::STANDARD,
        "rawstd" => b64::STANDARD_NO_PAD,
        "url" | "base64url" => b64::URL_SAFE,
        "rawurl" | "base64rawurl" => b64::URL_SAFE_NO_PAD,
        other => {
            return Err(Exception::throw_type(
                &ctx,
                &format!("unknown base64 encoding `{other}` (std, rawstd, url, rawurl)"),
            ))
        }
    };
    let bytes = engine
        .decode(data.trim())
        .map_err(|e| Exception::throw_type(&ctx, &format!("encoding.b64decode: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
