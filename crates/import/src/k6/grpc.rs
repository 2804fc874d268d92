//! k6's `k6/net/grpc`: `new grpc.Client()` at the top, its `load(paths,
//! ...files)` / `loadProtoset(file)` → `[grpc]`; in the default function
//! `client.connect(address, { plaintext })` → the base URL (`http://` for
//! plaintext, else `https://`), `client.invoke(method, message, params)`
//! → a `grpc` request (its `metadata` the headers, `timeout` its
//! deadline), `client.close()` → nothing (connections are the run's).
//! A check of `r.status === grpc.StatusOK` is what every call is judged
//! by already; `r.message.a.b` reads the answer as `$.a.b`.

use super::*;
use headroom_scenario::raw::RawGrpc;

impl<'a> K6<'_, 'a> {
    /// `const client = new grpc.Client()`: a client, by name.
    pub(super) fn grpc_client(&mut self, name: &str, init: &Expression) -> bool {
        let Expression::NewExpression(n) = init.get_inner_expression() else {
            return false;
        };
        let Expression::StaticMemberExpression(m) = &n.callee else {
            return false;
        };
        let from_grpc = matches!(&m.object, Expression::Identifier(g) if self.is(&g.name, "grpc"));
        if !from_grpc || m.property.name != "Client" {
            return false;
        }
        self.grpc_clients.insert(name.to_string());
        true
    }

    /// `client.load(['dir'], 'a.proto', …)` or `client.loadProtoset('x')`
    /// at the top of the script: the types `[grpc]` names.
    pub(super) fn grpc_load(&mut self, e: &Expression) -> bool {
        let Some((method, call)) = self.client_call(e) else {
            return false;
        };
        let args: Vec<&Expression> = call
            .arguments
            .iter()
            .filter_map(|a| a.as_expression())
            .collect();
        let grpc = self.grpc.get_or_insert_with(RawGrpc::default);
        match method {
            "load" => {
                if let Some(Expression::ArrayExpression(paths)) =
                    args.first().map(|a| a.get_inner_expression())
                {
                    for p in paths.elements.iter().filter_map(|p| p.as_expression()) {
                        if let Expression::StringLiteral(s) = p.get_inner_expression() {
                            grpc.import_path.push(s.value.to_string());
                        }
                    }
                }
                for f in args.iter().skip(1) {
                    if let Expression::StringLiteral(s) = f.get_inner_expression() {
                        grpc.proto.push(s.value.to_string());
                    }
                }
            }
            "loadProtoset" => {
                if let Some(Expression::StringLiteral(s)) =
                    args.first().map(|a| a.get_inner_expression())
                {
                    grpc.protoset = Some(s.value.to_string());
                }
            }
            _ => return false,
        }
        true
    }

    /// A call on a gRPC client in the default function: `connect`,
    /// `invoke` (its request's index), `close`. `None` when `call` is none.
    pub(super) fn grpc_call(&mut self, e: &'a Expression<'a>) -> Option<Option<usize>> {
        let (method, call) = self.client_call(e)?;
        let args: Vec<&'a Expression<'a>> = call
            .arguments
            .iter()
            .filter_map(|a| a.as_expression())
            .collect();
        match method {
            "connect" => {
                let Some(address) = args.first().and_then(|a| self.template(a)) else {
                    self.leave(call.span, "`connect` to an address that is not a constant");
                    return Some(None);
                };
                let plaintext = args.get(1).is_some_and(|p| self.plaintext(p));
                let scheme = if plaintext { "http" } else { "https" };
                self.urls.push(format!("{scheme}://{address}"));
                Some(None)
            }
            "invoke" => Some(self.grpc_invoke(call, &args)),
            "close" => Some(None),
            other => {
                self.leave(call.span, &format!("gRPC client `{other}`"));
                Some(None)
            }
        }
    }

    /// `client.invoke('pkg.Service/Method', message, params)`.
    fn grpc_invoke(&mut self, call: &CallExpression, args: &[&'a Expression<'a>]) -> Option<usize> {
        let Some(method) = args.first().and_then(|a| self.template(a)) else {
            self.leave(call.span, "`invoke` of a method that is not a constant");
            return None;
        };
        let mut r = request(&mut self.taken_names, "gRPC", &method);
        r.name = r.name.trim_start_matches("gRPC ").to_string();
        r.method = None;
        r.path = None;
        r.grpc = Some(method.trim_start_matches('/').to_string());
        match args.get(1).map(|m| self.json(m)) {
            Some(Some(message)) => r.json = Some(message),
            Some(None) => self.leave(call.span, "gRPC message that is not a constant or template"),
            None => {}
        }
        if let Some(Expression::ObjectExpression(params)) =
            args.get(2).map(|p| p.get_inner_expression())
        {
            for p in params.properties.iter() {
                let ObjectPropertyKind::ObjectProperty(p) = p else {
                    continue;
                };
                match p.key.static_name().as_deref() {
                    Some("metadata") => match self.json(&p.value) {
                        Some(Value::Object(m)) => {
                            let headers = r.headers.get_or_insert_with(BTreeMap::new);
                            for (k, v) in m {
                                headers.insert(k, v.as_str().map_or(v.to_string(), str::to_string));
                            }
                        }
                        _ => self.leave(p.span, "gRPC metadata that is not a constant object"),
                    },
                    Some("timeout") => match self.template(&p.value) {
                        Some(t) => r.timeout = Some(duration_of_k6(&t)),
                        None => self.leave(p.span, "timeout that is not a constant"),
                    },
                    _ => self.leave(p.span, "gRPC call param"),
                }
            }
        }
        self.requests.push(r);
        Some(self.requests.len() - 1)
    }

    /// `{ plaintext: true }` in `connect`'s params.
    fn plaintext(&self, params: &Expression) -> bool {
        let Expression::ObjectExpression(o) = params.get_inner_expression() else {
            return false;
        };
        o.properties.iter().any(|p| match p {
            ObjectPropertyKind::ObjectProperty(p) => {
                p.key.static_name().as_deref() == Some("plaintext")
                    && matches!(p.value.get_inner_expression(), Expression::BooleanLiteral(b) if b.value)
            }
            _ => false,
        })
    }

    /// `client.METHOD(…)` on a gRPC client: the method and the call.
    fn client_call<'e>(&self, e: &'e Expression<'e>) -> Option<(&'e str, &'e CallExpression<'e>)> {
        let Expression::CallExpression(call) = e.get_inner_expression() else {
            return None;
        };
        let Expression::StaticMemberExpression(m) = &call.callee else {
            return None;
        };
        let Expression::Identifier(client) = &m.object else {
            return None;
        };
        self.grpc_clients
            .contains(client.name.as_str())
            .then(|| (m.property.name.as_str(), &**call))
    }

    /// A check's predicate every gRPC call is judged by already:
    /// `r.status === grpc.StatusOK` (after `r &&`, as k6's examples write).
    pub(super) fn is_grpc_status_ok(&self, e: &Expression) -> bool {
        match e.get_inner_expression() {
            Expression::LogicalExpression(l) if l.operator == LogicalOperator::And => {
                matches!(l.left.get_inner_expression(), Expression::Identifier(_))
                    && self.is_grpc_status_ok(&l.right)
            }
            Expression::BinaryExpression(b) => {
                let status = matches!(b.left.get_inner_expression(),
                    Expression::StaticMemberExpression(m) if m.property.name == "status");
                let ok = matches!(b.right.get_inner_expression(),
                    Expression::StaticMemberExpression(m) if m.property.name == "StatusOK"
                        && matches!(&m.object, Expression::Identifier(g) if self.is(&g.name, "grpc")));
                status
                    && ok
                    && matches!(
                        b.operator,
                        BinaryOperator::StrictEquality | BinaryOperator::Equality
                    )
            }
            _ => false,
        }
    }
}
