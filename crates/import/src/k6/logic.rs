//! A k6 script's logic carried over as headroom script code: what the
//! scenario file cannot say becomes `js` steps, `if` and `while` steps,
//! and `before` / `after` hooks, while k6's requests, checks and sleeps —
//! wherever they sit in that logic — stay the session's own steps.
//!
//! A local of the default function (or of `setup`, or of a helper whose
//! steps are put in place) is the user's variable `vars.NAME`, so it lives
//! across steps as a k6 local lives across statements; a response bound
//! to a name that code reads is kept by its request's `after` hook as k6's
//! response object (`status`, `body`, `headers`, `json()`); top-level
//! constants are written in as their values (`${ENV}` left for the
//! scenario to expand); helper functions without requests are copied into
//! the module beside the scenario, with a prelude (`prelude.js`).

use super::scan::{names_bound, scan, Reference, Scan, VisitNode};
use super::{Binding, K6};
use headroom_scenario::raw::RawStep;
use oxc_ast::ast::*;
use oxc_span::{GetSpan, Span};

/// Most rounds of a loop carried over from k6 (k6 bounds none; a step's
/// loop must have a bound).
pub(super) const LOOP_MAX: u32 = 10_000;

/// Whose statements are being read: a `return` means something else in
/// each.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) enum Place {
    /// The default function: `return` ends the iteration.
    #[default]
    Default,
    /// `setup()` or a helper put in place: only a last `return` is read.
    Function,
}

/// Source text as it goes into the scenario file: `${` written `$${`, so
/// the scenario's `${VAR}` expansion leaves JavaScript's own alone.
pub(super) fn literal(text: &str) -> String {
    text.replace("${", "$${")
}

/// A `js` step of inline code.
pub(super) fn js_step(code: String) -> RawStep {
    RawStep {
        js: Some(code),
        ..RawStep::default()
    }
}

/// Adjacent `js` steps as one (one call instead of several).
fn merged(steps: Vec<RawStep>) -> Vec<RawStep> {
    let mut out: Vec<RawStep> = Vec::with_capacity(steps.len());
    for step in steps {
        let only_js =
            |s: &RawStep| s.js.is_some() && *s == js_step(s.js.clone().unwrap_or_default());
        match out.last_mut() {
            Some(last) if only_js(last) && only_js(&step) => {
                let code = last.js.as_mut().expect("a js step");
                code.push('\n');
                code.push_str(step.js.as_deref().unwrap_or_default());
            }
            _ => out.push(step),
        }
    }
    out
}

impl<'a> K6<'_, 'a> {
    /// Whether `call` is a step's: a request, check, sleep or group, or a
    /// helper that makes one.
    pub(super) fn is_effect(&self, call: &CallExpression) -> bool {
        match &call.callee {
            Expression::StaticMemberExpression(m) => matches!(&m.object,
                Expression::Identifier(h) if self.is(&h.name, "http")
                    || self.grpc_clients.contains(h.name.as_str())),
            Expression::Identifier(f) => {
                ["check", "sleep", "group"]
                    .iter()
                    .any(|k| self.is(&f.name, k))
                    || self.effectful.contains(f.name.as_str())
            }
            _ => false,
        }
    }

    pub(super) fn scan_expression(&self, e: &Expression<'a>) -> Scan {
        scan(&|c| self.is_effect(c), |v: &mut dyn VisitNode<'a>| {
            v.expression(e)
        })
    }

    pub(super) fn scan_statement(&self, s: &Statement<'a>) -> Scan {
        scan(&|c| self.is_effect(c), |v: &mut dyn VisitNode<'a>| {
            v.statement(s)
        })
    }

    /// The helpers that make steps, to a fixed point (calling one makes
    /// steps too).
    pub(super) fn find_effectful(&mut self) {
        loop {
            let found: Vec<String> = self
                .functions
                .iter()
                .filter(|(name, f)| {
                    !self.effectful.contains(name.as_str())
                        && f.body.as_ref().is_some_and(|b| {
                            b.statements.iter().any(|s| self.scan_statement(s).effects)
                        })
                })
                .map(|(name, _)| name.clone())
                .collect();
            if found.is_empty() {
                return;
            }
            self.effectful.extend(found);
        }
    }

    /// `span`'s source as scenario code, its names rewritten.
    pub(super) fn code(&mut self, span: Span, scan: Scan) -> Result<String, String> {
        if let Some(jump) = scan.jumps.first() {
            let text = &self.text[jump.start as usize..jump.end as usize];
            return Err(format!("`{text}` out of a loop that sends requests"));
        }
        let mut edits: Vec<(Span, String)> = Vec::new();
        for r in &scan.returns {
            if self.place != Place::Default {
                return Err("`return` inside code of a function".into());
            }
            edits.push((*r, "return ctx.endIteration();".into()));
        }
        for r in &scan.references {
            if let Some(edit) = self.replacement(r)? {
                edits.push(edit);
            }
        }
        edits.sort_by_key(|(s, _)| s.start);
        let mut out = String::new();
        let mut at = span.start;
        for (s, text) in edits {
            out.push_str(&literal(&self.text[at as usize..s.start as usize]));
            out.push_str(&text);
            at = s.end;
        }
        out.push_str(&literal(&self.text[at as usize..span.end as usize]));
        self.scripted = true;
        Ok(out)
    }

    pub(super) fn expression_code(&mut self, e: &Expression<'a>) -> Result<String, String> {
        let scan = self.scan_expression(e);
        self.code(e.span(), scan)
    }

    /// What a name the code reads becomes; `None`: it stays (JavaScript's
    /// own, a helper or constant of the module).
    fn replacement(&mut self, r: &Reference) -> Result<Option<(Span, String)>, String> {
        let name = r.name.as_str();
        let var = |with: String| {
            let with = if r.shorthand {
                format!("{name}: {with}")
            } else {
                with
            };
            Ok(Some((r.span, with)))
        };
        if let Some(&request) = self.responses.get(name) {
            self.kept.insert((request, name.to_string()));
            return var(format!("vars.{name}"));
        }
        if self.rows.contains_key(name) {
            return match &r.member {
                Some((span, field)) => Ok(Some((*span, format!("vars.{field}")))),
                None => Err(format!(
                    "the row `{name}` as a whole in code (its fields are variables)"
                )),
            };
        }
        if self.value_code.contains_key(name) {
            self.code_values.insert(name.to_string());
            return var(format!("vars.{name}"));
        }
        if self.locals.contains(name) {
            return var(format!("vars.{name}"));
        }
        if self.data_param.as_deref() == Some(name) {
            return var("data".to_string());
        }
        match self.bindings.get(name) {
            Some(Binding::Text(t)) => {
                return var(serde_json::to_string(t).expect("a string is JSON"));
            }
            Some(Binding::Data(_)) => {
                return Err(format!(
                    "the data file `{name}` read in code (headroom feeds its rows)"
                ))
            }
            Some(Binding::Options) => return Err("`options` read in code".into()),
            Some(Binding::Js) | None => {}
        }
        match name {
            "__ENV" => match &r.member {
                Some((span, variable)) => Ok(Some((*span, format!("\"${{{variable}:-}}\"")))),
                None => Err("`__ENV` as a whole in code".into()),
            },
            // k6 numbers its users from 1, headroom from 0.
            "__VU" => var("(ctx.user + 1)".to_string()),
            "__ITER" => var("ctx.iteration".to_string()),
            _ if self.modules.contains_key(name) => Err(format!("`{name}` used in code")),
            _ => Ok(None),
        }
    }

    /// The statements of a block, or one statement, as steps.
    pub(super) fn body(&mut self, s: &'a Statement<'a>) -> Vec<RawStep> {
        match s {
            Statement::BlockStatement(b) => self.block(&b.body),
            other => self.block(std::slice::from_ref(other)),
        }
    }

    /// The statements of a function body or block, as steps.
    pub(super) fn block(&mut self, statements: &'a [Statement<'a>]) -> Vec<RawStep> {
        let mut steps = Vec::new();
        for s in statements {
            self.statement(s, &mut steps);
        }
        merged(steps)
    }

    /// A statement with no step in it, as a `js` step.
    pub(super) fn logic(&mut self, s: &'a Statement<'a>, steps: &mut Vec<RawStep>) {
        let scan = self.scan_statement(s);
        match self.code(s.span(), scan) {
            Ok(code) => steps.push(js_step(code)),
            Err(why) => self.leave(s.span(), &why),
        }
    }

    /// `name = init` where `init` makes no step: a variable a `js` step
    /// sets.
    pub(super) fn assign(
        &mut self,
        name: &str,
        init: Option<&Expression<'a>>,
        span: Span,
        steps: &mut Vec<RawStep>,
    ) {
        let value = match init {
            Some(e) => self.expression_code(e),
            None => Ok("undefined".to_string()),
        };
        match value {
            Ok(v) => {
                steps.push(js_step(format!("vars.{name} = {v};")));
                self.locals.insert(name.to_string());
            }
            Err(why) => self.leave(span, &why),
        }
    }

    /// `const { a, b } = init` without steps: each name a variable.
    pub(super) fn destructure(&mut self, d: &'a VariableDeclarator<'a>, steps: &mut Vec<RawStep>) {
        let Some(init) = &d.init else { return };
        if self.scan_expression(init).effects {
            self.leave(d.span, "destructuring of what a request returns");
            return;
        }
        let names = names_bound(&d.id);
        let pattern = literal(&self.text[d.id.span().start as usize..d.id.span().end as usize]);
        match self.expression_code(init) {
            Ok(value) => {
                let sets: Vec<String> = names.iter().map(|n| format!("vars.{n} = {n};")).collect();
                steps.push(js_step(format!(
                    "{{ const {pattern} = {value}; {} }}",
                    sets.join(" ")
                )));
                self.locals.extend(names);
            }
            Err(why) => self.leave(d.span, &why),
        }
    }

    /// `if` around steps: an `if` step.
    pub(super) fn if_step(&mut self, i: &'a IfStatement<'a>, steps: &mut Vec<RawStep>) {
        let condition = match self.expression_code(&i.test) {
            Ok(c) => c,
            Err(why) => return self.leave(i.span, &why),
        };
        let then = self.body(&i.consequent);
        let otherwise = i.alternate.as_ref().map(|a| self.body(a));
        steps.push(RawStep {
            if_: Some(condition),
            steps: Some(then),
            else_: otherwise,
            ..RawStep::default()
        });
    }

    /// `for (init; test; update)` around steps: its init, then a `while`
    /// step whose last step is the update.
    pub(super) fn for_step(&mut self, f: &'a ForStatement<'a>, steps: &mut Vec<RawStep>) {
        match &f.init {
            Some(ForStatementInit::VariableDeclaration(v)) => {
                for d in &v.declarations {
                    self.declarator(d, steps);
                }
            }
            Some(init) => match init.as_expression().map(|e| self.expression_code(e)) {
                Some(Ok(code)) => steps.push(js_step(format!("{code};"))),
                Some(Err(why)) => return self.leave(f.span, &why),
                None => {}
            },
            None => {}
        }
        let condition = match &f.test {
            Some(t) => match self.expression_code(t) {
                Ok(c) => c,
                Err(why) => return self.leave(f.span, &why),
            },
            None => "true".to_string(),
        };
        self.loops += 1;
        let mut inner = self.body(&f.body);
        self.loops -= 1;
        if let Some(update) = &f.update {
            match self.expression_code(update) {
                Ok(code) => inner.push(js_step(format!("{code};"))),
                Err(why) => return self.leave(f.span, &why),
            }
        }
        steps.push(self.while_of(condition, merged(inner)));
    }

    fn while_of(&self, condition: String, steps: Vec<RawStep>) -> RawStep {
        RawStep {
            while_: Some(condition),
            max: Some(LOOP_MAX),
            steps: Some(steps),
            ..RawStep::default()
        }
    }

    /// `while (test)` around steps: a `while` step.
    pub(super) fn while_step(&mut self, w: &'a WhileStatement<'a>, steps: &mut Vec<RawStep>) {
        let condition = match self.expression_code(&w.test) {
            Ok(c) => c,
            Err(why) => return self.leave(w.span, &why),
        };
        self.loops += 1;
        let inner = self.body(&w.body);
        self.loops -= 1;
        steps.push(self.while_of(condition, inner));
    }

    /// `for (const item of items)` around steps.
    pub(super) fn for_of_step(&mut self, f: &'a ForOfStatement<'a>, steps: &mut Vec<RawStep>) {
        let name = match &f.left {
            ForStatementLeft::VariableDeclaration(v) => match v.declarations.first().map(|d| &d.id)
            {
                Some(BindingPattern::BindingIdentifier(id)) => id.name.to_string(),
                _ => return self.leave(f.span, "`for … of` over a pattern"),
            },
            _ => return self.leave(f.span, "`for … of` over an outer name"),
        };
        self.each(&name, &f.right, f.span, |k6| k6.body(&f.body), steps);
    }

    /// `items.forEach((item) => { … })` around steps.
    pub(super) fn for_each(
        &mut self,
        call: &'a CallExpression<'a>,
        steps: &mut Vec<RawStep>,
    ) -> bool {
        let Expression::StaticMemberExpression(m) = &call.callee else {
            return false;
        };
        let callback = call.arguments.first().and_then(|a| a.as_expression());
        let (params, body) = match callback.map(|c| c.get_inner_expression()) {
            Some(Expression::ArrowFunctionExpression(f)) => match f.get_function_body() {
                Some(b) => (&f.params, &b.statements),
                None => return false,
            },
            Some(Expression::FunctionExpression(f)) => match &f.body {
                Some(b) => (&f.params, &b.statements),
                None => return false,
            },
            _ => return false,
        };
        let Some(BindingPattern::BindingIdentifier(id)) = params.items.first().map(|p| &p.pattern)
        else {
            return false;
        };
        if m.property.name != "forEach" || params.items.len() > 1 {
            return false;
        }
        self.each(&id.name, &m.object, call.span, |k6| k6.block(body), steps);
        true
    }

    /// A loop over `items`' values, each `name` in turn, around steps.
    fn each(
        &mut self,
        name: &str,
        items: &Expression<'a>,
        span: Span,
        body: impl FnOnce(&mut Self) -> Vec<RawStep>,
        steps: &mut Vec<RawStep>,
    ) {
        let list = match self.expression_code(items) {
            Ok(l) => l,
            Err(why) => return self.leave(span, &why),
        };
        let (all, at) = (format!("__{name}_list"), format!("__{name}_at"));
        steps.push(js_step(format!(
            "vars.{all} = Array.from({list}); vars.{at} = 0;"
        )));
        self.locals.insert(name.to_string());
        self.loops += 1;
        let mut inner = vec![js_step(format!("vars.{name} = vars.{all}[vars.{at}++];"))];
        inner.extend(body(self));
        self.loops -= 1;
        steps.push(self.while_of(format!("vars.{at} < vars.{all}.length"), merged(inner)));
    }

    /// A function's body in place (`setup()`, a helper that makes steps):
    /// its statements as steps, its last `return`'s value into `bound`.
    pub(super) fn in_place(
        &mut self,
        body: &'a [Statement<'a>],
        bound: Option<&str>,
        steps: &mut Vec<RawStep>,
    ) {
        let (last, rest) = match body.split_last() {
            Some((Statement::ReturnStatement(r), rest)) => (r.argument.as_ref(), rest),
            _ => (None, body),
        };
        let place = std::mem::replace(&mut self.place, Place::Function);
        steps.extend(self.block(rest));
        if let Some(value) = last {
            if self.scan_expression(value).effects {
                self.expression(value, bound, steps);
            } else if let Some(name) = bound {
                self.assign(name, Some(value), value.span(), steps);
            }
        }
        self.place = place;
    }

    /// `helper(a, b)` of a helper that makes steps: its parameters set as
    /// variables, then its body in place.
    pub(super) fn inline(
        &mut self,
        f: &'a Function<'a>,
        call: &'a CallExpression<'a>,
        bound: Option<&str>,
        steps: &mut Vec<RawStep>,
    ) {
        if self.inlined >= 8 {
            return self.leave(
                call.span,
                "a function that sends requests, called within itself",
            );
        }
        for (i, param) in f.params.items.iter().enumerate() {
            let BindingPattern::BindingIdentifier(id) = &param.pattern else {
                return self.leave(call.span, "a call of a function with a pattern parameter");
            };
            let arg = call.arguments.get(i).and_then(|a| a.as_expression());
            self.assign(&id.name, arg, call.span, steps);
        }
        self.inlined += 1;
        if let Some(b) = &f.body {
            self.in_place(&b.statements, bound, steps);
        }
        self.inlined -= 1;
    }

    /// A check of `request`'s response headroom's checks cannot say: a
    /// line of its `after` hook.
    pub(super) fn check_code(&mut self, request: usize, name: &str, predicate: &Expression<'a>) {
        match self.expression_code(predicate) {
            Ok(code) => {
                let name = serde_json::to_string(name).expect("a string is JSON");
                self.after
                    .entry(request)
                    .or_default()
                    .push(format!("if (!({code})(__r)) ctx.fail({name});"));
            }
            Err(why) => self.leave(predicate.span(), &why),
        }
    }

    /// The `after` hooks: responses code reads kept as k6's response,
    /// values code reads taken by script (as JavaScript values, not
    /// strings), and checks only code can say.
    pub(super) fn after_hooks(&mut self) {
        let mut lines = std::mem::take(&mut self.after);
        for (request, name) in std::mem::take(&mut self.kept) {
            lines
                .entry(request)
                .or_default()
                .insert(0, format!("vars.{name} = __r;"));
        }
        for name in std::mem::take(&mut self.code_values) {
            let (request, code) = self.value_code[&name].clone();
            self.requests[request].extracts.retain(|x| x.name != name);
            lines
                .entry(request)
                .or_default()
                .insert(0, format!("vars.{name} = {code};"));
        }
        for (request, lines) in lines {
            self.requests[request].after = Some(format!(
                "const __r = k6response(response);\n{}",
                lines.join("\n")
            ));
        }
    }

    /// The module beside the scenario: the prelude, k6's names the script
    /// imported, its constants and helpers, `setup` and `teardown`.
    pub(super) fn module(&self) -> String {
        let mut out = include_str!("prelude.js").to_string();
        let mut globals = vec![
            "console",
            "__ENV",
            "k6response",
            "k6path",
            "k6body",
            "k6utils",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        out.push_str("\n// From the k6 script.\n");
        for (name, line) in &self.module_lines {
            out.push_str(line);
            out.push('\n');
            globals.extend(name.clone());
        }
        out.push_str(&format!(
            "\n// What the scenario's code reads.\nObject.assign(globalThis, {{ {} }});\n",
            globals.join(", ")
        ));
        out
    }
}
