//! k6's `http` calls and `check`s: each call a request of the session,
//! its URL, body and params as written where they are constants or
//! templates, and as its `before` hook's code where computed at run
//! time; checks headroom can say as its checks, the others as code.

use super::*;

impl<'a> K6<'_, 'a> {
    /// `http.get(url, params)`, `http.post(url, body, params)`,
    /// `http.request(method, url, body, params)`: the request's index.
    pub(super) fn http_call(
        &mut self,
        method: &str,
        call: &'a CallExpression<'a>,
    ) -> Option<usize> {
        let args: Vec<&Expression> = call
            .arguments
            .iter()
            .filter_map(|a| a.as_expression())
            .collect();
        let (method, rest) = match method {
            "get" | "head" | "options" => (method.to_ascii_uppercase(), &args[..]),
            "post" | "put" | "patch" | "del" => (
                if method == "del" {
                    "DELETE".into()
                } else {
                    method.to_ascii_uppercase()
                },
                &args[..],
            ),
            "request" => {
                let m = args.first().and_then(|m| self.template(m));
                match m {
                    Some(m) => (m.to_ascii_uppercase(), &args[1..]),
                    None => {
                        self.leave(call.span, "`http.request` whose method is not a constant");
                        return None;
                    }
                }
            }
            other => {
                self.leave(call.span, &format!("`http.{other}`"));
                return None;
            }
        };
        let with_body = !matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS");
        let body = if with_body {
            rest.get(1).copied()
        } else {
            None
        };
        let params = if with_body { rest.get(2) } else { rest.get(1) }.copied();
        let Some(url) = rest.first().copied() else {
            self.leave(call.span, "request without a URL");
            return None;
        };
        let url = match self.template(url) {
            Some(text) => Url::Text(text),
            None => Url::Computed(url),
        };
        self.request(call.span, &method, url, body, params)
    }

    /// A request of the session: its URL, body and params as written
    /// where they are constants or templates, and as its `before` hook's
    /// code where they are computed at run time.
    fn request(
        &mut self,
        span: Span,
        method: &str,
        url: Url<'a>,
        body: Option<&'a Expression<'a>>,
        params: Option<&'a Expression<'a>>,
    ) -> Option<usize> {
        let mut before = Vec::new();
        let mut r = match url {
            Url::Text(url) => {
                let path = self.path_of(span, &url)?;
                request(&mut self.taken_names, method, &path)
            }
            Url::Computed(e) => {
                let code = match self.expression_code(e) {
                    Ok(code) => code,
                    Err(why) => {
                        self.leave(span, &why);
                        return None;
                    }
                };
                before.push(format!("request.url = k6path({code});"));
                let prefix = self.url_prefix(e);
                if prefix.starts_with("http") || prefix.starts_with("${") {
                    self.path_of(span, &prefix);
                }
                let written = &self.text[e.span().start as usize..e.span().end as usize];
                let shape: String = written
                    .replace("${", "{")
                    .replace('`', "")
                    .chars()
                    .take(80)
                    .collect();
                let mut r = request(&mut self.taken_names, method, &shape);
                r.path = Some("/".into());
                r
            }
        };
        if let Some(body) = body {
            self.body_of(body, &mut r, &mut before);
        }
        if let Some(params) = params {
            self.params(params, &mut r, &mut before);
        }
        if !before.is_empty() {
            r.before = Some(before.join("\n"));
        }
        self.requests.push(r);
        Some(self.requests.len() - 1)
    }

    /// A URL's path; its origin (a full URL's, or a leading `${VAR}`) is
    /// noted for the scenario's base URL.
    fn path_of(&mut self, span: Span, url: &str) -> Option<String> {
        if url.starts_with("http://") || url.starts_with("https://") {
            // The origin is checked as a URL; the path is kept as written
            // (a URL parser would escape its `{{templates}}`).
            let after_scheme = url.find("://").map_or(0, |i| i + 3);
            let cut = url[after_scheme..]
                .find('/')
                .map_or(url.len(), |i| after_scheme + i);
            if let Err(e) = split_url(&url[..cut]) {
                self.leave(span, &e);
                return None;
            }
            self.urls.push(url.to_string());
            Some(match &url[cut..] {
                "" => "/".to_string(),
                path => path.to_string(),
            })
        } else if url.starts_with("${") {
            let end = url.find('}').map_or(url.len(), |e| e + 1);
            self.urls.push(url[..end].to_string());
            Some(match &url[end..] {
                "" => "/".to_string(),
                path => path.to_string(),
            })
        } else {
            Some(url.to_string())
        }
    }

    /// The constant start of a URL computed at run time (its origin, as a
    /// rule).
    fn url_prefix(&self, e: &Expression) -> String {
        match e.get_inner_expression() {
            Expression::TemplateLiteral(t) => {
                let mut out = String::new();
                for (i, q) in t.quasis.iter().enumerate() {
                    out.push_str(cooked(q));
                    match t.expressions.get(i).map(|x| self.template(x)) {
                        Some(Some(text)) => out.push_str(&text),
                        _ => break,
                    }
                }
                out
            }
            Expression::BinaryExpression(b) if b.operator == BinaryOperator::Addition => {
                match self.template(&b.left) {
                    Some(left) => left + &self.url_prefix(&b.right),
                    None => self.url_prefix(&b.left),
                }
            }
            other => self.template(other).unwrap_or_default(),
        }
    }

    /// A request's body: JSON, a form or text where it is a template, the
    /// `before` hook's code where it is computed.
    fn body_of(&mut self, body: &'a Expression<'a>, r: &mut RawRequest, before: &mut Vec<String>) {
        let by_code = |k6: &mut Self, before: &mut Vec<String>| match k6.expression_code(body) {
            Ok(code) => before.push(format!("request.body = k6body({code}, request);")),
            Err(why) => k6.leave(body.span(), &why),
        };
        match body.get_inner_expression() {
            Expression::NullLiteral(_) => {}
            Expression::CallExpression(c)
                if c.callee.is_specific_member_access("JSON", "stringify") =>
            {
                match c
                    .arguments
                    .first()
                    .and_then(|a| a.as_expression())
                    .and_then(|o| self.json(o))
                {
                    Some(v) => r.json = Some(v),
                    None => by_code(self, before),
                }
            }
            Expression::ObjectExpression(_) => match self.json(body) {
                // k6 sends an object as a form.
                Some(Value::Object(form)) => {
                    let pairs: Vec<String> = form
                        .iter()
                        .map(|(k, v)| {
                            let v = v.as_str().map_or(v.to_string(), str::to_string);
                            format!("{}={}", form_encode(k), form_encode(&v))
                        })
                        .collect();
                    r.body = Some(pairs.join("&"));
                    r.headers.get_or_insert_with(BTreeMap::new).insert(
                        "Content-Type".into(),
                        "application/x-www-form-urlencoded".into(),
                    );
                }
                _ => by_code(self, before),
            },
            other => match self.template(other) {
                Some(text) => r.body = Some(text),
                None => by_code(self, before),
            },
        }
    }

    /// `{ headers: {...}, tags: { name }, timeout }`; headers computed at
    /// run time, or params that are a variable, by the `before` hook.
    fn params(&mut self, params: &'a Expression<'a>, r: &mut RawRequest, before: &mut Vec<String>) {
        let Expression::ObjectExpression(o) = params.get_inner_expression() else {
            if let Expression::Identifier(id) = params.get_inner_expression() {
                if let Some(init) = self.top_objects.get(id.name.as_str()).copied() {
                    return self.params(init, r, before);
                }
            }
            match self.expression_code(params) {
                Ok(code) => before.push(format!(
                    "{{ const __params = {code}; if (__params && __params.headers) Object.assign(request.headers, __params.headers); }}"
                )),
                Err(why) => self.leave(params.span(), &why),
            }
            return;
        };
        for p in &o.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                self.leave(o.span, "`...` in request params");
                continue;
            };
            let key = p
                .key
                .static_name()
                .map(|k| k.to_string())
                .unwrap_or_default();
            match key.as_str() {
                "headers" => match self.json(&p.value) {
                    Some(Value::Object(h)) => {
                        for (k, v) in h {
                            if managed_header(&k) {
                                continue;
                            }
                            let v = v.as_str().map_or(v.to_string(), str::to_string);
                            r.headers.get_or_insert_with(BTreeMap::new).insert(k, v);
                        }
                    }
                    _ => match self.expression_code(&p.value) {
                        Ok(code) => before.push(format!("Object.assign(request.headers, {code});")),
                        Err(why) => self.leave(p.span, &why),
                    },
                },
                "tags" => self.tag_name(p, r),
                "timeout" => match self.template(&p.value) {
                    Some(t) => r.timeout = Some(duration_of_k6(&t)),
                    None => self.leave(p.span, "timeout that is not a constant"),
                },
                other => self.leave(p.span, &format!("request param `{other}`")),
            }
        }
    }

    /// `tags: { name: 'x' }`: the request's name.
    fn tag_name(&mut self, p: &ObjectProperty, r: &mut RawRequest) {
        let name = match self.json(&p.value) {
            Some(Value::Object(t)) => t.get("name").and_then(|n| n.as_str()).map(str::to_string),
            _ => None,
        };
        match name {
            Some(n) => {
                let unique = self.taken_names.entry(n.clone()).or_insert(0);
                *unique += 1;
                r.name = if *unique == 1 {
                    n
                } else {
                    format!("{n} #{unique}")
                };
            }
            None => self.leave(p.span, "tags other than `name`"),
        }
    }

    /// `http.batch([...])`: the requests in order (k6 sends them at once).
    pub(super) fn batch(&mut self, call: &'a CallExpression<'a>, steps: &mut Vec<RawStep>) {
        let Some(Expression::ArrayExpression(list)) = call
            .arguments
            .first()
            .and_then(|a| a.as_expression())
            .map(|e| e.get_inner_expression())
        else {
            self.leave(call.span, "`http.batch` of something other than a list");
            return;
        };
        self.leave(
            call.span,
            "`http.batch` (its requests are sent one after the other, not at once)",
        );
        for el in &list.elements {
            let Some(e) = el.as_expression() else {
                continue;
            };
            let index = match e.get_inner_expression() {
                Expression::ArrayExpression(a) => {
                    let parts: Vec<&'a Expression<'a>> = a
                        .elements
                        .iter()
                        .filter_map(|x| x.as_expression())
                        .collect();
                    let method = parts.first().and_then(|m| self.template(m));
                    let url = parts.get(1).map(|u| match self.template(u) {
                        Some(text) => Url::Text(text),
                        None => Url::Computed(u),
                    });
                    match (method, url) {
                        (Some(m), Some(u)) => self.request(
                            a.span,
                            &m.to_ascii_uppercase(),
                            u,
                            parts.get(2).copied(),
                            parts.get(3).copied(),
                        ),
                        _ => {
                            self.leave(a.span, "batch entry headroom cannot read");
                            None
                        }
                    }
                }
                other => {
                    let url = match self.template(other) {
                        Some(text) => Url::Text(text),
                        None => Url::Computed(other),
                    };
                    self.request(other.span(), "GET", url, None, None)
                }
            };
            if let Some(i) = index {
                steps.push(RawStep {
                    request: Some(self.requests[i].name.clone()),
                    ..RawStep::default()
                });
            }
        }
    }

    /// `check(res, { 'name': (r) => r.status === 200, … })`.
    pub(super) fn check(&mut self, call: &'a CallExpression<'a>) {
        let args: Vec<&'a Expression<'a>> = call
            .arguments
            .iter()
            .filter_map(|a| a.as_expression())
            .collect();
        let (Some(Expression::Identifier(res)), Some(Expression::ObjectExpression(checks))) = (
            args.first().map(|e| e.get_inner_expression()),
            args.get(1).map(|e| e.get_inner_expression()),
        ) else {
            self.leave(
                call.span,
                "`check` of something other than a response and an object",
            );
            return;
        };
        let Some(&index) = self.responses.get(res.name.as_str()) else {
            self.leave(call.span, "`check` of a value that is not a response");
            return;
        };
        for p in &checks.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                continue;
            };
            let name = p.key.static_name().map(|k| k.to_string());
            let predicate = match &p.value {
                Expression::ArrowFunctionExpression(f) => f.get_expression().or_else(|| {
                    // `(r) => { return … }`
                    match f.get_function_body()?.statements.first() {
                        Some(Statement::ReturnStatement(r)) => r.argument.as_ref(),
                        _ => None,
                    }
                }),
                _ => None,
            };
            if predicate.is_some_and(|p| self.is_grpc_status_ok(p)) {
                // Every gRPC call's status is judged: OK or its class.
                continue;
            }
            match predicate.and_then(check_of) {
                Some(mut c) => {
                    c.name = name;
                    self.requests[index].checks.push(c);
                }
                // Said in code, by the request's `after` hook.
                None => {
                    let name = name.unwrap_or_else(|| "check".into());
                    self.check_code(index, &name, &p.value);
                }
            }
        }
    }
}

/// `res.json('a.b.0')` or `res.json().a.b[0]` (a gRPC answer's
/// `res.message.a.b[0]`): (the response's name, `$.a.b[0]`).
pub(super) fn json_path_of(e: &Expression) -> Option<(String, String)> {
    match e.get_inner_expression() {
        Expression::CallExpression(c) => {
            let Expression::StaticMemberExpression(m) = &c.callee else {
                return None;
            };
            let Expression::Identifier(res) = &m.object else {
                return None;
            };
            if m.property.name != "json" {
                return None;
            }
            let mut path = "$".to_string();
            if let Some(Expression::StringLiteral(s)) =
                c.arguments.first().and_then(|a| a.as_expression())
            {
                // k6's gjson paths: `a.b.0`.
                for part in s.value.split('.') {
                    if part.chars().all(|c| c.is_ascii_digit()) && !part.is_empty() {
                        path.push_str(&format!("[{part}]"));
                    } else {
                        path.push('.');
                        path.push_str(part);
                    }
                }
            } else if !c.arguments.is_empty() {
                return None;
            }
            Some((res.name.to_string(), path))
        }
        // A gRPC answer: `r.message` is its decoded message.
        Expression::StaticMemberExpression(m)
            if m.property.name == "message" && matches!(&m.object, Expression::Identifier(_)) =>
        {
            let Expression::Identifier(res) = &m.object else {
                return None;
            };
            Some((res.name.to_string(), "$".to_string()))
        }
        Expression::StaticMemberExpression(m) => {
            let (res, path) = json_path_of(&m.object)?;
            Some((res, format!("{path}.{}", m.property.name)))
        }
        Expression::ComputedMemberExpression(m) => {
            let (res, path) = json_path_of(&m.object)?;
            match m.expression.get_inner_expression() {
                Expression::NumericLiteral(n) => Some((res, format!("{path}[{}]", n.value))),
                Expression::StringLiteral(s) => Some((res, format!("{path}.{}", s.value))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A check's predicate: `r.status === 200`, `r.status == 200`,
/// `r.body.includes('x')`, `r.body.indexOf('x') !== -1`,
/// `r.json('a') === v`, `r.json().a !== undefined`.
fn check_of(e: &Expression) -> Option<RawCheck> {
    match e.get_inner_expression() {
        Expression::BinaryExpression(b) => {
            let equal = matches!(
                b.operator,
                BinaryOperator::StrictEquality | BinaryOperator::Equality
            );
            let unequal = matches!(
                b.operator,
                BinaryOperator::StrictInequality | BinaryOperator::Inequality
            );
            // `r.status === 200`
            if let Expression::StaticMemberExpression(m) = b.left.get_inner_expression() {
                if m.property.name == "status" && equal {
                    if let Expression::NumericLiteral(n) = b.right.get_inner_expression() {
                        return Some(RawCheck {
                            status: Some(RawStatus::One(n.value as u16)),
                            ..RawCheck::default()
                        });
                    }
                }
            }
            // `r.body.indexOf('x') !== -1`
            if let Expression::CallExpression(c) = b.left.get_inner_expression() {
                if let Some(s) = body_method(c, "indexOf") {
                    let minus_one = matches!(b.right.get_inner_expression(), Expression::UnaryExpression(u)
                        if u.operator == UnaryOperator::UnaryNegation
                        && matches!(&u.argument, Expression::NumericLiteral(n) if n.value == 1.0));
                    if unequal && minus_one {
                        return Some(RawCheck {
                            body_contains: Some(s),
                            ..RawCheck::default()
                        });
                    }
                }
            }
            // `r.json('a') === v`, `r.json().a !== undefined`
            let (_, path) = json_path_of(&b.left)?;
            let undefined = matches!(b.right.get_inner_expression(), Expression::Identifier(i) if i.name == "undefined");
            if undefined && unequal {
                return Some(RawCheck {
                    json_path: Some(path),
                    exists: Some(true),
                    ..RawCheck::default()
                });
            }
            let value = match b.right.get_inner_expression() {
                Expression::StringLiteral(s) => json!(s.value.as_str()),
                Expression::NumericLiteral(n) => json!(n.value),
                Expression::BooleanLiteral(v) => json!(v.value),
                _ => return None,
            };
            equal.then(|| RawCheck {
                json_path: Some(path),
                equals: Some(value),
                ..RawCheck::default()
            })
        }
        // `r.body.includes('x')`
        Expression::CallExpression(c) => body_method(c, "includes").map(|s| RawCheck {
            body_contains: Some(s),
            ..RawCheck::default()
        }),
        _ => None,
    }
}

/// `r.body.METHOD('text')`: the text.
fn body_method(c: &CallExpression, method: &str) -> Option<String> {
    let Expression::StaticMemberExpression(m) = &c.callee else {
        return None;
    };
    if m.property.name != method {
        return None;
    }
    let Expression::StaticMemberExpression(body) = &m.object else {
        return None;
    };
    if body.property.name != "body" {
        return None;
    }
    match c.arguments.first()?.as_expression()? {
        Expression::StringLiteral(s) => Some(s.value.to_string()),
        _ => None,
    }
}
