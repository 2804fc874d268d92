// A trivial hook for headroom-api-js.toml: one call per request, the
// least a script does (reads the status, sets a variable).
export function touch(ctx) {
  ctx.vars.last = ctx.response.status;
}
