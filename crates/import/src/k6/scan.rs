//! What a piece of a k6 script refers to, found before it is carried over
//! as headroom script code: the names it reads and writes (each to become
//! a user's variable, a constant, or left as JavaScript's own), whether it
//! has an effect only a session step can have (a request, a check, a
//! sleep), and the `return`s, `break`s and `continue`s that would leave
//! the step it becomes.
//!
//! Names bound inside the piece itself (a nested function's parameters, a
//! block's `const`) are its own and never rewritten.

use oxc_ast::ast::*;
use oxc_ast_visit::{walk, Visit};
use oxc_span::Span;
use oxc_syntax::scope::ScopeFlags;
use std::collections::HashSet;

/// A name the piece reads or writes from outside itself.
#[derive(Debug)]
pub(super) struct Reference {
    pub span: Span,
    pub name: String,
    /// `name.field`: the whole member's span and the field.
    pub member: Option<(Span, String)>,
    /// `{ name }`: a property written short (its rewrite needs the key).
    pub shorthand: bool,
}

#[derive(Debug, Default)]
pub(super) struct Scan {
    pub references: Vec<Reference>,
    /// `return`s of the piece's own level (not a nested function's).
    pub returns: Vec<Span>,
    /// `break` / `continue` that leave the piece.
    pub jumps: Vec<Span>,
    /// It calls something only a step can do (a request, check, sleep).
    pub effects: bool,
}

/// Scans `visit`'s node, with `effect` saying which calls are steps.
pub(super) fn scan<'a>(
    effect: &dyn Fn(&CallExpression<'a>) -> bool,
    visit: impl Fn(&mut dyn VisitNode<'a>),
) -> Scan {
    let mut bound = Bindings::default();
    visit(&mut bound);
    let mut scanner = Scanner {
        effect,
        shadowed: vec![bound.0],
        functions: 0,
        loops: 0,
        scan: Scan::default(),
    };
    visit(&mut scanner);
    scanner.scan
}

/// A visitor a node can be handed to (the scan walks it twice).
pub(super) trait VisitNode<'a> {
    fn expression(&mut self, e: &Expression<'a>);
    fn statement(&mut self, s: &Statement<'a>);
}

impl<'a, V: Visit<'a>> VisitNode<'a> for V {
    fn expression(&mut self, e: &Expression<'a>) {
        self.visit_expression(e);
    }
    fn statement(&mut self, s: &Statement<'a>) {
        self.visit_statement(s);
    }
}

/// Every name bound anywhere in a node.
#[derive(Default)]
struct Bindings(HashSet<String>);

impl<'a> Visit<'a> for Bindings {
    fn visit_binding_identifier(&mut self, it: &BindingIdentifier<'a>) {
        self.0.insert(it.name.to_string());
    }
}

struct Scanner<'e, 'a> {
    effect: &'e dyn Fn(&CallExpression<'a>) -> bool,
    /// Names bound by the piece and the functions in it.
    shadowed: Vec<HashSet<String>>,
    functions: u32,
    loops: u32,
    scan: Scan,
}

impl Scanner<'_, '_> {
    fn own(&self, name: &str) -> bool {
        self.shadowed.iter().any(|s| s.contains(name))
    }

    fn reference(&mut self, id: &IdentifierReference, member: Option<(Span, String)>, short: bool) {
        self.scan.references.push(Reference {
            span: id.span,
            name: id.name.to_string(),
            member,
            shorthand: short,
        });
    }

    fn in_loop(&mut self, walk: impl FnOnce(&mut Self)) {
        self.loops += 1;
        walk(self);
        self.loops -= 1;
    }
}

impl<'a> Visit<'a> for Scanner<'_, 'a> {
    fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
        if !self.own(&it.name) {
            self.reference(it, None, false);
        }
    }

    fn visit_static_member_expression(&mut self, it: &StaticMemberExpression<'a>) {
        if let Expression::Identifier(object) = &it.object {
            if !self.own(&object.name) {
                let member = Some((it.span, it.property.name.to_string()));
                self.reference(object, member, false);
                return;
            }
        }
        walk::walk_static_member_expression(self, it);
    }

    fn visit_object_property(&mut self, it: &ObjectProperty<'a>) {
        if it.shorthand {
            if let Expression::Identifier(id) = &it.value {
                if !self.own(&id.name) {
                    self.reference(id, None, true);
                }
                return;
            }
        }
        walk::walk_object_property(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if (self.effect)(it) {
            self.scan.effects = true;
        }
        walk::walk_call_expression(self, it);
    }

    fn visit_function(&mut self, it: &Function<'a>, flags: ScopeFlags) {
        let mut bound = Bindings::default();
        bound.visit_function(it, flags);
        self.shadowed.push(bound.0);
        self.functions += 1;
        walk::walk_function(self, it, flags);
        self.functions -= 1;
        self.shadowed.pop();
    }

    fn visit_arrow_function_expression(&mut self, it: &ArrowFunctionExpression<'a>) {
        let mut bound = Bindings::default();
        bound.visit_arrow_function_expression(it);
        self.shadowed.push(bound.0);
        self.functions += 1;
        walk::walk_arrow_function_expression(self, it);
        self.functions -= 1;
        self.shadowed.pop();
    }

    fn visit_return_statement(&mut self, it: &ReturnStatement<'a>) {
        if self.functions == 0 {
            // The whole statement is rewritten: what it returns is not read.
            self.scan.returns.push(it.span);
        } else {
            walk::walk_return_statement(self, it);
        }
    }

    fn visit_for_statement(&mut self, it: &ForStatement<'a>) {
        self.in_loop(|s| walk::walk_for_statement(s, it));
    }
    fn visit_for_of_statement(&mut self, it: &ForOfStatement<'a>) {
        self.in_loop(|s| walk::walk_for_of_statement(s, it));
    }
    fn visit_for_in_statement(&mut self, it: &ForInStatement<'a>) {
        self.in_loop(|s| walk::walk_for_in_statement(s, it));
    }
    fn visit_while_statement(&mut self, it: &WhileStatement<'a>) {
        self.in_loop(|s| walk::walk_while_statement(s, it));
    }
    fn visit_do_while_statement(&mut self, it: &DoWhileStatement<'a>) {
        self.in_loop(|s| walk::walk_do_while_statement(s, it));
    }
    fn visit_switch_statement(&mut self, it: &SwitchStatement<'a>) {
        self.in_loop(|s| walk::walk_switch_statement(s, it));
    }

    fn visit_break_statement(&mut self, it: &BreakStatement<'a>) {
        if self.functions == 0 && (self.loops == 0 || it.label.is_some()) {
            self.scan.jumps.push(it.span);
        }
    }

    fn visit_continue_statement(&mut self, it: &ContinueStatement<'a>) {
        if self.functions == 0 && (self.loops == 0 || it.label.is_some()) {
            self.scan.jumps.push(it.span);
        }
    }
}

/// The names a pattern binds (`{ a, b: [c] }` → a, c), in order.
pub(super) fn names_bound(pattern: &BindingPattern) -> Vec<String> {
    let mut bound = Bindings::default();
    bound.visit_binding_pattern(pattern);
    let mut names: Vec<String> = bound.0.into_iter().collect();
    names.sort();
    names
}
