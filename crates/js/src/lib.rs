//! Scenario scripts: JavaScript where a scenario file needs logic, run in
//! an embedded QuickJS (rquickjs; chosen over boa by `bench/js-engines`).
//!
//! One [`Worker`] per worker thread holds one engine; each user of that
//! thread has its own variables object in it (`ctx.vars`), kept in step
//! with the user's template variables (the same `{{name}}`s) before and
//! after each call. A call is bounded in time and in the memory it may
//! add ([`Limits`]); what it throws, or where it was stopped, comes back as
//! a [`ScriptError`] located at the script's file and line. Scripts reach
//! the world only through their session's requests: no file, network,
//! process or environment access is linked.

mod limits;
mod stdlib;

use limits::{Budget, Counting};
use rquickjs::context::EvalOptions;
use rquickjs::{
    Array, CaughtError, Context, Ctx, Function, Module, Object, Persistent, Runtime, Value,
};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A user's variables, as templates read them (the engine's own type).
pub type Vars = HashMap<String, String, rustc_hash::FxBuildHasher>;

/// The scenario's script file: its name as errors show it, and its text.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptFile {
    pub name: String,
    pub source: String,
}

/// Code a step or hook runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Code {
    /// A function the script file exports, called with `ctx`.
    Export(String),
    /// Code written in the scenario: an expression whose value is the
    /// answer (`if`, `while`), or statements (`js`, `before`, `after`).
    /// `origin` is where it was written, for its errors.
    Inline {
        code: String,
        expression: bool,
        origin: String,
    },
}

impl Code {
    /// The name its calls are counted under.
    pub fn label(&self) -> String {
        match self {
            Code::Export(name) => name.clone(),
            Code::Inline { code, .. } => {
                let one_line = code.split_whitespace().collect::<Vec<_>>().join(" ");
                match one_line.char_indices().nth(48) {
                    Some((at, _)) => format!("{}…", &one_line[..at]),
                    None => one_line,
                }
            }
        }
    }
}

/// What one call may take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Wall-clock time of one call (it is interrupted past it).
    pub call_time: Duration,
    /// Memory one call may add to its engine.
    pub call_memory: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_time: Duration::from_millis(100),
            call_memory: 64 << 20,
        }
    }
}

/// Everything a run's scripts are: the file, the code its steps and hooks
/// run (indexed as the plan refers to them), and the limits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    pub file: Option<ScriptFile>,
    pub code: Vec<Code>,
    pub limits: Limits,
    /// `Math.random`'s seed (each worker thread draws its own stream from
    /// it); `None`: a fresh seed each run.
    pub seed: Option<u64>,
}

/// Each code's label; two pieces whose labels read the same (inline code
/// that differs past its first 48 characters) are told apart by ` #2`, …,
/// so their calls are not counted as one function's.
pub fn unique_labels(code: &[Code]) -> Vec<String> {
    let mut seen: HashMap<String, u32> = HashMap::new();
    code.iter()
        .map(|c| {
            let label = c.label();
            let n = seen.entry(label.clone()).or_insert(0);
            *n += 1;
            if *n == 1 {
                label
            } else {
                format!("{label} #{n}")
            }
        })
        .collect()
}

/// Deepest JavaScript recursion, in bytes of the engine's stack: a runaway
/// recursion is a `RangeError`, not a crashed worker thread.
const MAX_STACK: usize = 256 << 10;

/// The functions a script file exports, or where it fails to compile
/// (`file:line:column: message`). The module's top level runs.
pub fn exports(file: &ScriptFile) -> Result<Vec<String>, String> {
    let budget = Budget::new();
    let (rt, context) = engine(&budget).map_err(|e| e.to_string())?;
    let _ = rt;
    context.with(|ctx| {
        stdlib::install(&ctx, 0).map_err(|e| e.to_string())?;
        let namespace = load_module(&ctx, file)?;
        let mut names = Vec::new();
        for key in namespace.keys::<String>() {
            let key = key.map_err(|e| e.to_string())?;
            let value: Value = namespace.get(&key).map_err(|e| e.to_string())?;
            if value.is_function() {
                names.push(key);
            }
        }
        names.sort();
        Ok(names)
    })
}

impl Program {
    /// Compiles every piece once, as a worker will: the file's syntax and
    /// exports, and each inline piece's syntax. Each problem located.
    pub fn check(&self) -> Result<(), Vec<String>> {
        match Worker::new(self, None, 0) {
            Ok(_) => Ok(()),
            Err(problems) => Err(problems),
        }
    }
}

/// The last response, as `ctx.response` shows it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Response<'a> {
    pub status: u16,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

/// A request about to be sent, as a `before` hook sees and changes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// What the call asked of the session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Flow {
    #[default]
    Continue,
    /// `ctx.endIteration()`: the rest of this iteration is skipped.
    EndIteration,
    /// `ctx.endUser()`: this user runs no more iterations.
    EndUser,
}

/// A call that returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Called {
    pub flow: Flow,
    /// The value it returned, read as a condition.
    pub truthy: bool,
    /// It returned `false`, or called `ctx.fail(message)` (the message).
    pub failed: Option<String>,
    /// The worker thread's time the call took (it runs start to end on
    /// it: its CPU time).
    pub cpu_ns: u64,
}

/// A call that threw, ran past its time or its memory.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptError {
    /// `file:line` of the throw (or the code's origin).
    pub at: String,
    pub message: String,
    pub cpu_ns: u64,
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// A user's variables object in a worker's engine. Its slot is given back
/// when the user goes (and cleared when it is next given out).
#[derive(Debug)]
pub struct User {
    slot: u32,
    free: Rc<std::cell::RefCell<Vec<u32>>>,
    /// Each variable's text as last exchanged with the engine: only what
    /// changed on either side crosses over.
    synced: Vars,
    /// `ctx.user` and `ctx.iteration`: the user's number and its
    /// iterations done (templates' `user_id` and `iteration`), kept by the
    /// engine that runs it.
    pub id: u64,
    pub iteration: u64,
}

impl Drop for User {
    fn drop(&mut self) {
        self.free.borrow_mut().push(self.slot);
    }
}

impl User {
    /// Starts over as a new user: the engine's object is emptied at the
    /// next call.
    pub fn reset(&mut self) {
        self.synced.clear();
        self.synced.insert(String::new(), String::new());
    }
}

/// One engine of a worker thread, its program loaded.
pub struct Worker {
    // Values of the engine first: they are dropped before it (QuickJS
    // aborts on a value outliving its runtime).
    dispatch: Persistent<Function<'static>>,
    /// The module's namespace, for `setup` and `teardown`.
    namespace: Option<Persistent<Object<'static>>>,
    users: Persistent<Array<'static>>,
    view: Rc<ViewCell>,
    context: Context,
    _runtime: Runtime,
    budget: Rc<Budget>,
    limits: Limits,
    labels: Vec<String>,
    origins: Vec<String>,
    /// Which code is a condition: it reads the variables, and what it
    /// assigns is not kept (half a trivial call's cost is the way back).
    conditions: Vec<bool>,
    free: Rc<std::cell::RefCell<Vec<u32>>>,
    next_slot: std::cell::Cell<u32>,
}

/// The response a call may read, set only while the call runs.
#[derive(Default)]
struct ViewCell {
    status: std::cell::Cell<u16>,
    headers: std::cell::Cell<(*const (String, String), usize)>,
    body: std::cell::Cell<(*const u8, usize)>,
}

impl ViewCell {
    fn set(&self, r: Option<Response<'_>>) {
        let r = r.unwrap_or_default();
        self.status.set(r.status);
        self.headers.set((r.headers.as_ptr(), r.headers.len()));
        self.body.set((r.body.as_ptr(), r.body.len()));
    }

    fn clear(&self) {
        self.set(None);
    }

    fn headers(&self) -> &[(String, String)] {
        let (ptr, len) = self.headers.get();
        // SAFETY: set from a live slice for the length of one call (`set`
        // before it, `clear` after), read only during that call.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    fn body(&self) -> &[u8] {
        let (ptr, len) = self.body.get();
        // SAFETY: as `headers`.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

fn engine(budget: &Rc<Budget>) -> rquickjs::Result<(Runtime, Context)> {
    let rt = Runtime::new_with_alloc(Counting(budget.clone()))?;
    rt.set_max_stack_size(MAX_STACK);
    let b = budget.clone();
    rt.set_interrupt_handler(Some(Box::new(move || b.out_of_time())));
    let context = Context::full(&rt)?;
    Ok((rt, context))
}

/// The script file as a module, evaluated; its namespace.
fn load_module<'js>(ctx: &Ctx<'js>, file: &ScriptFile) -> Result<Object<'js>, String> {
    let located = |e: rquickjs::Error| located(ctx, e, &file.name, true).to_string();
    let module =
        Module::declare(ctx.clone(), file.name.clone(), file.source.clone()).map_err(located)?;
    let (module, promise) = module.eval().map_err(located)?;
    promise.finish::<()>().map_err(located)?;
    module.namespace().map_err(located)
}

/// The dispatcher: keeps one `ctx` per engine and calls code `i` with it
/// for the user in `slot`. Returns `[flow, truthy, failure]`.
const DISPATCH: &str = r#"(function (fns, users, native, data) {
  let flow = 0, failure;
  let body, headers;
  // Each user's variables are seen by scripts through a proxy that notes
  // what they set or delete: only that crosses back to Rust, and reads go
  // straight to the object. `users[slot]` is the object (Rust reads it),
  // `proxies[slot]` what `ctx.vars` is; `objects[slot]` the names holding
  // an object or array, which may change in place (always sent back).
  const proxies = [], objects = [];
  let changed = null;
  const noting = {
    set(target, k, v) {
      if (target[k] !== v || typeof v === "object") { target[k] = v; (changed ??= []).push(k); }
      return true;
    },
    deleteProperty(target, k) { delete target[k]; (changed ??= []).push(k); return true; },
  };
  let status = 0;
  const response = {
    get status() { return status; },
    get headers() { return headers === undefined ? (headers = native.headers()) : headers; },
    get body() { return body === undefined ? (body = native.body()) : body; },
    json() { return JSON.parse(this.body); },
  };
  const ctx = {
    vars: undefined, request: undefined, response, data,
    endIteration() { flow = 1; },
    endUser() { flow = 2; },
    fail(message) { failure = String(message); },
  };
  Object.freeze(response);
  // mode: 0 a step or before hook, 1 an after hook (false fails), 2 a
  // condition (reads only). incoming: [name, value or null, ...] from Rust.
  // The answer: a number (flow * 2 + truthy) when nothing else is to
  // say, else [flow, truthy, failure, changed].
  // flags: the response's status * 8 + mode * 2 + (1 when the user is
  // fresh): rquickjs passes at most seven arguments.
  return function (i, slot, request, flags, incoming, user, iteration) {
    flow = 0; failure = undefined; body = undefined; headers = undefined; changed = null;
    ctx.user = user; ctx.iteration = iteration;
    status = flags >> 3;
    const mode = (flags >> 1) & 3, fresh = (flags & 1) === 1;
    if (fresh) {
      users[slot] = {};
      proxies[slot] = new Proxy(users[slot], noting);
      objects[slot] = [];
    }
    const vars = users[slot];
    if (incoming !== null) {
      for (let j = 0; j < incoming.length; j += 2) {
        const k = incoming[j], v = incoming[j + 1];
        if (v === null) delete vars[k]; else vars[k] = v;
      }
    }
    ctx.vars = proxies[slot];
    ctx.request = request;
    const value = fns[i](ctx);
    if (value === false && mode === 1 && failure === undefined) failure = "returned false";
    if (mode === 2) return failure === undefined ? flow * 2 + (value ? 1 : 0) : [flow, !!value, failure, null];
    const held = objects[slot];
    if (held.length > 0) {
      for (let j = 0; j < held.length; j++) (changed ??= []).push(held[j]);
      held.length = 0;
    }
    if (changed !== null) {
      for (let j = 0; j < changed.length; j++) {
        const v = vars[changed[j]];
        if (typeof v === "object" && v !== null && !held.includes(changed[j])) held.push(changed[j]);
      }
    }
    if (changed === null && failure === undefined) return flow * 2 + (value ? 1 : 0);
    return [flow, !!value, failure, changed];
  };
})"#;

impl Worker {
    /// An engine with `program` loaded; `data`: `setup()`'s result as
    /// JSON, frozen into `ctx.data`. Each problem located.
    pub fn new(program: &Program, data: Option<&str>, seed: u64) -> Result<Worker, Vec<String>> {
        let one = |e: rquickjs::Error| vec![e.to_string()];
        let budget = Budget::new();
        let (runtime, context) = engine(&budget).map_err(one)?;
        let view = Rc::new(ViewCell::default());
        let (dispatch, users, namespace) =
            context.with(|ctx| load(&ctx, program, data, seed, &view))?;
        Ok(Worker {
            dispatch,
            users,
            namespace,
            view,
            context,
            _runtime: runtime,
            budget,
            limits: program.limits,
            labels: unique_labels(&program.code),
            conditions: program
                .code
                .iter()
                .map(|c| {
                    matches!(
                        c,
                        Code::Inline {
                            expression: true,
                            ..
                        }
                    )
                })
                .collect(),
            origins: program
                .code
                .iter()
                .map(|c| match c {
                    Code::Export(name) => name.clone(),
                    Code::Inline { origin, .. } => origin.clone(),
                })
                .collect(),
            free: Rc::default(),
            next_slot: std::cell::Cell::new(0),
        })
    }

    /// The name each code's calls are counted under.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// A new user's variables object.
    pub fn user(&self) -> User {
        let slot = self.free.borrow_mut().pop().unwrap_or_else(|| {
            let slot = self.next_slot.get();
            self.next_slot.set(slot + 1);
            slot
        });
        let mut user = User {
            slot,
            free: self.free.clone(),
            synced: Vars::default(),
            id: 0,
            iteration: 0,
        };
        user.reset();
        user
    }

    /// Runs code `code` for `user`: its variables synced both ways with
    /// `vars`, `response` readable, `request` (a `before` hook) changeable.
    pub fn call(
        &self,
        code: usize,
        user: &mut User,
        vars: &mut Vars,
        response: Option<Response<'_>>,
        request: Option<&mut Request>,
    ) -> Result<Called, ScriptError> {
        self.call_as(code, user, vars, (response, request), false)
    }

    /// [`Worker::call`] for an `after` hook (`judging`): a `false` it
    /// returns is a failure.
    pub fn call_as(
        &self,
        code: usize,
        user: &mut User,
        vars: &mut Vars,
        (response, request): (Option<Response<'_>>, Option<&mut Request>),
        judging: bool,
    ) -> Result<Called, ScriptError> {
        let started = Instant::now();
        self.view.set(response);
        self.budget
            .begin(self.limits.call_time, self.limits.call_memory);
        let result = self
            .context
            .with(|ctx| self.run(&ctx, (code, judging), user, vars, request));
        self.budget.end();
        self.view.clear();
        // The call runs on this thread start to end, nothing else between:
        // its wall time is its CPU time, read from the vDSO clock (the
        // thread CPU clock is a system call, a third of a trivial call).
        let cpu_ns = started.elapsed().as_nanos() as u64;
        match result {
            Ok(mut called) => {
                called.cpu_ns = cpu_ns;
                Ok(called)
            }
            Err((at, message)) => Err(ScriptError {
                at: at.unwrap_or_else(|| self.origins[code].clone()),
                message,
                cpu_ns,
            }),
        }
    }

    fn run(
        &self,
        ctx: &Ctx<'_>,
        (code, judging): (usize, bool),
        user: &mut User,
        vars: &mut Vars,
        request: Option<&mut Request>,
    ) -> Result<Called, (Option<String>, String)> {
        let internal = |e: rquickjs::Error| (None, format!("headroom's script engine: {e}"));
        let fresh = user.synced.remove("").is_some();
        let incoming = incoming(ctx, &mut user.synced, vars).map_err(internal)?;
        let js_request = match &request {
            Some(r) => Some(request_in(ctx, r).map_err(internal)?),
            None => None,
        };
        let mode: u32 = match (judging, self.conditions[code]) {
            (_, true) => 2,
            (true, false) => 1,
            (false, false) => 0,
        };
        let dispatch = self.dispatch.clone().restore(ctx).map_err(internal)?;
        let status = self.view.status.get();
        let args = (
            code,
            user.slot,
            js_request.clone(),
            (u32::from(status) << 3) | (mode << 1) | u32::from(fresh),
            incoming,
            user.id,
            user.iteration,
        );
        let answer = match dispatch.call::<_, Value>(args) {
            Ok(a) => a,
            Err(e) => return Err(self.thrown(ctx, e)),
        };
        let flow_of = |n: i32| match n {
            1 => Flow::EndIteration,
            2 => Flow::EndUser,
            _ => Flow::Continue,
        };
        if let Some(n) = answer.as_int() {
            // The common case: nothing changed, nothing failed.
            if let (Some(r), Some(js)) = (request, js_request) {
                request_out(&js, r).map_err(|e| (None, format!("ctx.request: {e}")))?;
            }
            return Ok(Called {
                flow: flow_of(n / 2),
                truthy: n % 2 == 1,
                failed: None,
                cpu_ns: 0,
            });
        }
        let answer = answer
            .into_array()
            .ok_or_else(|| (None, "headroom's script engine: no answer".to_string()))?;
        if let Some(changed) = answer.get::<Option<Vec<String>>>(3).map_err(internal)? {
            let users = self.users.clone().restore(ctx).map_err(internal)?;
            let object: Object = users.get(user.slot as usize).map_err(internal)?;
            outgoing(ctx, &object, &changed, &mut user.synced, vars).map_err(internal)?;
        }
        if let (Some(r), Some(js)) = (request, js_request) {
            request_out(&js, r).map_err(|e| (None, format!("ctx.request: {e}")))?;
        }
        let flow: i32 = answer.get(0).map_err(internal)?;
        Ok(Called {
            flow: flow_of(flow),
            truthy: answer.get(1).map_err(internal)?,
            failed: answer.get(2).map_err(internal)?,
            cpu_ns: 0,
        })
    }

    /// Calls the file's exported `name` (`setup`, `teardown`) with `arg`
    /// (JSON) under the same budgets; what it returned, as JSON.
    pub fn run_export(&self, name: &str, arg: Option<&str>) -> Result<Option<String>, ScriptError> {
        self.budget
            .begin(self.limits.call_time, self.limits.call_memory);
        let result = self
            .context
            .with(|ctx| -> Result<Option<String>, (Option<String>, String)> {
                let internal =
                    |e: rquickjs::Error| (None, format!("headroom's script engine: {e}"));
                let Some(namespace) = &self.namespace else {
                    return Ok(None);
                };
                let namespace = namespace.clone().restore(&ctx).map_err(internal)?;
                let Ok(f) = namespace.get::<_, Function>(name) else {
                    return Ok(None);
                };
                let arg = match arg {
                    Some(json) => ctx.json_parse(json).map_err(internal)?,
                    None => Value::new_undefined(ctx.clone()),
                };
                let value: Value = f.call((arg,)).map_err(|e| self.thrown(&ctx, e))?;
                let json = ctx
                    .json_stringify(value)
                    .map_err(|e| self.thrown(&ctx, e))?;
                json.map(|s| s.to_string()).transpose().map_err(internal)
            });
        self.budget.end();
        result.map_err(|(at, message)| ScriptError {
            at: at.unwrap_or_else(|| name.to_string()),
            message,
            cpu_ns: 0,
        })
    }

    /// What a throw, an interrupt or a refused allocation was, and where.
    fn thrown(&self, ctx: &Ctx<'_>, e: rquickjs::Error) -> (Option<String>, String) {
        let caught = CaughtError::from_error(ctx, e);
        let (at, message) = describe(&caught);
        if self.budget.interrupted.get() {
            let limit = self.limits.call_time;
            return (
                at,
                format!("stopped: ran past its time budget of {limit:?}"),
            );
        }
        if self.budget.refused.get() {
            let mib = self.limits.call_memory >> 20;
            return (
                at,
                format!("stopped: allocated past its memory budget of {mib} MiB"),
            );
        }
        (at, message)
    }
}

/// The prelude, the module, each inline piece compiled to a function, and
/// the dispatcher over them.
type Loaded = (
    Persistent<Function<'static>>,
    Persistent<Array<'static>>,
    Option<Persistent<Object<'static>>>,
);

fn load(
    ctx: &Ctx<'_>,
    program: &Program,
    data: Option<&str>,
    seed: u64,
    view: &Rc<ViewCell>,
) -> Result<Loaded, Vec<String>> {
    let one = |e: rquickjs::Error| vec![e.to_string()];
    stdlib::install(ctx, seed).map_err(one)?;
    let namespace = match &program.file {
        Some(file) => Some(load_module(ctx, file).map_err(|e| vec![e])?),
        None => None,
    };
    let fns = Array::new(ctx.clone()).map_err(one)?;
    let mut problems = Vec::new();
    for (i, code) in program.code.iter().enumerate() {
        match compile(ctx, code, namespace.as_ref(), program.file.as_ref()) {
            Ok(f) => fns.set(i, f).map_err(one)?,
            Err(problem) => problems.push(problem),
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let data: Value = match data {
        Some(json) => {
            let v = ctx.json_parse(json).map_err(one)?;
            let freeze: Function = ctx
                .eval("(function f(o) { if (o && typeof o === 'object') { Object.values(o).forEach(f); Object.freeze(o); } return o; })")
                .map_err(one)?;
            freeze.call((v,)).map_err(one)?
        }
        None => Value::new_undefined(ctx.clone()),
    };
    let users = Array::new(ctx.clone()).map_err(one)?;
    let native = natives(ctx, view).map_err(one)?;
    let make: Function = ctx.eval(DISPATCH).map_err(one)?;
    let dispatch: Function = make.call((fns, users.clone(), native, data)).map_err(one)?;
    Ok((
        Persistent::save(ctx, dispatch),
        Persistent::save(ctx, users),
        namespace.map(|n| Persistent::save(ctx, n)),
    ))
}

/// A piece of code as a function of `ctx`.
fn compile<'js>(
    ctx: &Ctx<'js>,
    code: &Code,
    namespace: Option<&Object<'js>>,
    file: Option<&ScriptFile>,
) -> Result<Function<'js>, String> {
    match code {
        Code::Export(name) => {
            let file_name = file.map_or("the scenario", |f| f.name.as_str());
            let found: Option<Value> = namespace.and_then(|n| n.get(name.as_str()).ok());
            found
                .and_then(|v| v.into_function())
                .ok_or_else(|| format!("{file_name} exports no function `{name}`"))
        }
        Code::Inline {
            code,
            expression,
            origin,
        } => {
            let body = if *expression {
                format!("return ({code}\n);")
            } else {
                code.clone()
            };
            // One line before the code's first: its lines keep their numbers.
            let source = format!(
                "(function (ctx) {{ const vars = ctx.vars, response = ctx.response, request = ctx.request, data = ctx.data; {body}\n}})"
            );
            let mut options = EvalOptions::default();
            options.global = true;
            options.strict = false;
            options.filename = Some(origin.clone());
            ctx.eval_with_options(source, options)
                .map_err(|e| located(ctx, e, origin, true))
        }
    }
}

/// `native.headers()` and `.body()`: the response of the call under way
/// (its status is passed with each call).
fn natives<'js>(ctx: &Ctx<'js>, view: &Rc<ViewCell>) -> rquickjs::Result<Object<'js>> {
    let native = Object::new(ctx.clone())?;
    let v = view.clone();
    let headers = move |ctx: Ctx<'js>| -> rquickjs::Result<Object<'js>> {
        let out = Object::new(ctx)?;
        for (k, value) in v.headers() {
            let key = k.to_ascii_lowercase();
            // Repeated headers join as a fetch() Headers object does.
            let joined = match out.get::<_, Option<String>>(key.as_str())? {
                Some(before) => format!("{before}, {value}"),
                None => value.clone(),
            };
            out.set(key, joined)?;
        }
        Ok(out)
    };
    native.set("headers", Function::new(ctx.clone(), headers)?)?;
    let v = view.clone();
    let body = move || String::from_utf8_lossy(v.body()).into_owned();
    native.set("body", Function::new(ctx.clone(), body)?)?;
    Ok(native)
}

/// Rust's changes to the user's variables since the engine last saw them
/// (an extraction, a feeder row), as `[name, value or null, ...]`; `null`
/// when there are none (the common case: nothing crosses).
fn incoming<'js>(ctx: &Ctx<'js>, synced: &mut Vars, vars: &Vars) -> rquickjs::Result<Value<'js>> {
    let mut pairs: Vec<(String, Option<String>)> = Vec::new();
    for (k, v) in vars {
        if synced.get(k) != Some(v) {
            synced.insert(k.clone(), v.clone());
            pairs.push((k.clone(), Some(v.clone())));
        }
    }
    if synced.len() > vars.len() || !pairs.is_empty() {
        let gone: Vec<String> = synced
            .keys()
            .filter(|k| !vars.contains_key(*k))
            .cloned()
            .collect();
        for k in gone {
            synced.remove(&k);
            pairs.push((k, None));
        }
    }
    if pairs.is_empty() {
        return Ok(Value::new_null(ctx.clone()));
    }
    let array = Array::new(ctx.clone())?;
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        array.set(2 * i, k)?;
        match v {
            Some(v) => array.set(2 * i + 1, v)?,
            None => array.set(2 * i + 1, Value::new_null(ctx.clone()))?,
        }
    }
    Ok(array.into_value())
}

/// The variables a call changed (`changed`, found by the dispatcher) back
/// into the user's: strings as they are, other values as JSON (numbers
/// and booleans as JavaScript prints them); `undefined`, `null` or a
/// deleted one removes it.
fn outgoing<'js>(
    ctx: &Ctx<'js>,
    object: &Object<'js>,
    changed: &[String],
    synced: &mut Vars,
    vars: &mut Vars,
) -> rquickjs::Result<()> {
    for k in changed {
        let v: Value = object.get(k.as_str())?;
        let text = if let Some(s) = v.as_string() {
            Some(s.to_string()?)
        } else if v.is_undefined() || v.is_null() {
            None
        } else {
            ctx.json_stringify(v)?.map(|s| s.to_string()).transpose()?
        };
        match text {
            Some(text) => {
                if synced.get(k) != Some(&text) {
                    synced.insert(k.clone(), text.clone());
                    vars.insert(k.clone(), text);
                }
            }
            None => {
                synced.remove(k);
                vars.remove(k);
            }
        }
    }
    Ok(())
}

fn request_in<'js>(ctx: &Ctx<'js>, r: &Request) -> rquickjs::Result<Object<'js>> {
    let o = Object::new(ctx.clone())?;
    o.set("method", r.method.as_str())?;
    o.set("url", r.url.as_str())?;
    let headers = Object::new(ctx.clone())?;
    for (k, v) in &r.headers {
        headers.set(k.as_str(), v.as_str())?;
    }
    o.set("headers", headers)?;
    o.set("body", r.body.as_str())?;
    Ok(o)
}

fn request_out(o: &Object<'_>, r: &mut Request) -> rquickjs::Result<()> {
    r.method = o.get::<_, rquickjs::Coerced<String>>("method")?.0;
    r.url = o.get::<_, rquickjs::Coerced<String>>("url")?.0;
    r.body = o.get::<_, rquickjs::Coerced<String>>("body")?.0;
    let headers: Object = o.get("headers")?;
    r.headers.clear();
    for prop in headers.props::<String, rquickjs::Coerced<String>>() {
        let (k, v) = prop?;
        r.headers.push((k, v.0));
    }
    Ok(())
}

/// `(file:line, message)` of a caught error, from its stack's first frame.
fn describe(caught: &CaughtError<'_>) -> (Option<String>, String) {
    match caught {
        CaughtError::Exception(e) => {
            let message = e.message().unwrap_or_default();
            let name: String = e.get("name").unwrap_or_else(|_| "Error".into());
            let at = e.stack().as_deref().and_then(|s| first_frame(s, false));
            (at, format!("{name}: {message}"))
        }
        CaughtError::Value(v) => {
            let text = v
                .as_string()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_else(|| format!("{v:?}"));
            (None, format!("threw {text}"))
        }
        CaughtError::Error(e) => (None, e.to_string()),
    }
}

/// `file:line` (with `:column` when asked) of a stack's first frame:
/// `    at f (shop.js:5:20)` or `    at shop.js:5:20`.
fn first_frame(stack: &str, column: bool) -> Option<String> {
    stack.lines().find_map(|line| {
        let line = line.trim().strip_prefix("at ")?;
        let place = match line.rfind('(') {
            Some(open) => line[open + 1..].trim_end_matches(')'),
            None => line,
        };
        let mut parts = place.rsplitn(3, ':');
        let col = parts.next()?;
        let row = parts.next()?;
        let file = parts.next()?;
        if file == "native" || row.parse::<u32>().is_err() {
            return None;
        }
        Some(if column {
            format!("{file}:{row}:{col}")
        } else {
            format!("{file}:{row}")
        })
    })
}

/// An error from compiling or loading `name`, as `file:line:column: message`.
fn located(ctx: &Ctx<'_>, e: rquickjs::Error, name: &str, column: bool) -> String {
    let caught = CaughtError::from_error(ctx, e);
    if let CaughtError::Exception(ex) = &caught {
        let at = ex
            .stack()
            .as_deref()
            .and_then(|s| first_frame(s, column))
            .unwrap_or_else(|| name.to_string());
        let kind: String = ex.get("name").unwrap_or_else(|_| "Error".into());
        return format!("{at}: {kind}: {}", ex.message().unwrap_or_default());
    }
    format!("{name}: {}", describe(&caught).1)
}

#[cfg(test)]
mod tests;
