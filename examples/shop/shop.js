// Logic for shop.toml: which product to add, and the signature of calls that change the cart.
const SECRET = "s3cr3t";

export function pickProduct(ctx) {
  const inStock = ctx.response.json().products.filter((p) => p.stock > 0);
  if (inStock.length === 0) {
    return ctx.endIteration();
  }
  ctx.vars.product = inStock[Math.floor(Math.random() * inStock.length)].id;
}

export function sign(ctx) {
  const ts = String(Date.now());
  ctx.request.headers["X-Timestamp"] = ts;
  ctx.request.headers["X-Signature"] = crypto.hmac("sha256", SECRET, ts + "\n" + ctx.request.body, "hex");
}
