//! The layers of walrelay: the top-level modules of walrelay-core
//! (`core/src/`) and of the main crate (`src/`) form one ordered stack,
//! written once in the table of `docs/architecture.md` between
//! `<!-- layers:begin -->` and `<!-- layers:end -->`, and production code of
//! a module may refer only to modules of strictly lower layers. This test
//! parses every production source file with `syn`, following the `mod`
//! declarations from each crate's `lib.rs` (`#[cfg(test)]` code does not
//! count; comments and strings are not code to a parser), collects each
//! reference of one top-level module to another (`use` trees, paths anywhere
//! in code, in attributes and in macro input, `super::` chains that climb to
//! the crate root, names re-exported at a crate root, a core module named
//! through its crate or through the main crate's re-export of it), and fails
//! on every edge that does not go down the layers, on every import cycle and
//! on every module missing from the table, all listed at once with
//! `file:line`. That walrelay-core never names the main crate, and never a
//! network crate, the compiler enforces; that its manifest stays that way,
//! `core_depends_on_no_network_crate` below.
//!
//! It must never compile, run or modify the code it reads, and never name a
//! module itself: the order lives in the table alone, so that moving a
//! module is one edit of the documentation. A source file it cannot parse is
//! reported as a problem, never skipped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::Path;

use proc_macro2::{Spacing, Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Attribute, Expr, ForeignItem, Ident, ImplItem, Item, Meta, Token, TraitItem, UseTree};

/// Where the layer order lives, relative to the workspace root.
const TABLE: &str = "docs/architecture.md";
const BEGIN: &str = "<!-- layers:begin -->";
const END: &str = "<!-- layers:end -->";

/// The crates whose modules the table orders: the name other crates use for
/// it, and where its `lib.rs` is.
const CRATES: &[(&str, &str)] = &[("walrelay_core", "core/src"), ("walrelay", "src")];

// ---------------------------------------------------------------------------
// `#[cfg(test)]` code
// ---------------------------------------------------------------------------

/// Whether an attribute (outer or inner) is a `cfg` that holds only in
/// tests: `cfg(test)`, or `cfg(all(.., test, ..))`.
fn is_cfg_test(attr: &Attribute) -> bool {
    fn holds_only_in_tests(meta: &Meta) -> bool {
        match meta {
            Meta::Path(p) => p.is_ident("test"),
            Meta::List(l) if l.path.is_ident("all") => l
                .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .is_ok_and(|all| all.iter().any(holds_only_in_tests)),
            _ => false,
        }
    }
    attr.path().is_ident("cfg")
        && attr
            .parse_args::<Meta>()
            .is_ok_and(|m| holds_only_in_tests(&m))
}

fn test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(is_cfg_test)
}

/// The attributes of a node of an enum whose variants all carry `attrs`.
macro_rules! attrs_of {
    ($node:expr, $ty:ident: $($variant:ident),*) => {
        match $node {
            $($ty::$variant(x) => x.attrs.as_slice(),)*
            _ => &[],
        }
    };
}

fn item_attrs(i: &Item) -> &[Attribute] {
    attrs_of!(i, Item: Const, Enum, ExternCrate, Fn, ForeignMod, Impl, Macro, Mod, Static,
        Struct, Trait, TraitAlias, Type, Union, Use)
}

fn expr_attrs(e: &Expr) -> &[Attribute] {
    attrs_of!(e, Expr: Array, Assign, Async, Await, Binary, Block, Break, Call, Cast, Closure,
        Const, Continue, Field, ForLoop, Group, If, Index, Infer, Let, Lit, Loop, Macro, Match,
        MethodCall, Paren, Path, Range, RawAddr, Reference, Repeat, Return, Struct, Try,
        TryBlock, Tuple, Unary, Unsafe, While, Yield)
}

// ---------------------------------------------------------------------------
// Walking the crates
// ---------------------------------------------------------------------------

/// One segment of a path, with the line it is written on.
type Segment = (String, usize);

fn line(span: Span) -> usize {
    span.start().line
}

fn segment(ident: &Ident) -> Segment {
    (ident.unraw().to_string(), line(ident.span()))
}

/// What the walk found: the top-level modules, the edges between them with
/// every place each occurs, and source that could not be read.
#[derive(Debug, Default)]
struct Scan {
    /// Each crate's `lib.rs`, for messages.
    roots: Vec<String>,
    /// Each top-level module of every crate and the file its code starts in.
    modules: BTreeMap<String, String>,
    /// (from, to) -> every `(file, line)` where `from` refers to `to`.
    edges: BTreeMap<(String, String), BTreeSet<(String, usize)>>,
    problems: Vec<String>,
}

/// Reads the crates of `crates` (name, source root; paths relative to the
/// workspace root, as `read` takes them) from their `lib.rs` down and
/// returns their module graph.
fn scan(crates: &[(&str, &str)], read: &dyn Fn(&str) -> Option<String>) -> Scan {
    let mut w = Walker {
        read,
        names: crates.iter().map(|(name, _)| name.to_string()).collect(),
        modules: vec![BTreeMap::new(); crates.len()],
        root_uses: vec![BTreeMap::new(); crates.len()],
        refs: Vec::new(),
        problems: Vec::new(),
        krate: 0,
        file: String::new(),
        modpath: Vec::new(),
        dir: String::new(),
    };
    for (krate, (_, dir)) in crates.iter().enumerate() {
        (w.krate, w.dir) = (krate, dir.to_string());
        let path = format!("{dir}/lib.rs");
        match read(&path) {
            Some(text) => w.file(&path, &text),
            None => w.problems.push(format!("{path} cannot be read")),
        }
    }
    w.finish(crates)
}

/// A reference of top-level module `from` to the name `name` at the root of
/// crate number `krate`.
struct Ref {
    from: String,
    krate: usize,
    name: Segment,
    file: String,
}

/// Collects what `Scan` holds, file after file: a visitor of the production
/// code of `file`, which is the module `modpath` of crate number `krate`.
struct Walker<'r> {
    read: &'r dyn Fn(&str) -> Option<String>,
    /// The crates' names, by number.
    names: Vec<String>,
    /// Per crate: its top-level modules and the file each starts in.
    modules: Vec<BTreeMap<String, String>>,
    /// Per crate: each name its root's `use` items bring in, and its path.
    root_uses: Vec<BTreeMap<String, Vec<String>>>,
    refs: Vec<Ref>,
    problems: Vec<String>,
    krate: usize,
    file: String,
    /// The module path of the code: `["a", "b"]` for `src/a/b.rs`.
    modpath: Vec<String>,
    /// Where the files of `mod x;` declared here live: `src/a/b` for
    /// `src/a/b.rs` and for an inline `mod b { }` in `src/a.rs`.
    dir: String,
}

impl Walker<'_> {
    /// Parses one file and reads it as the current module.
    fn file(&mut self, path: &str, text: &str) {
        match syn::parse_file(text) {
            Ok(file) if test_only(&file.attrs) => {}
            Ok(file) => {
                let outer = std::mem::replace(&mut self.file, path.to_string());
                file.items.iter().for_each(|item| self.visit_item(item));
                self.file = outer;
            }
            Err(e) => self
                .problems
                .push(format!("{path}:{}: {e}", line(e.span()))),
        }
    }

    /// `mod name;` (read its file) or `mod name { .. }` (read its body).
    fn module(&mut self, m: &syn::ItemMod) {
        let (name, at) = segment(&m.ident);
        let top = self.modpath.is_empty();
        let dir = format!("{}/{name}", self.dir);
        let (flat, nested) = (format!("{}/{name}.rs", self.dir), format!("{dir}/mod.rs"));
        let outer = std::mem::replace(&mut self.dir, dir);
        self.modpath.push(name.clone());
        if let Some((_, items)) = &m.content {
            if top {
                self.modules[self.krate].insert(name, self.file.clone());
            }
            items.iter().for_each(|item| self.visit_item(item));
        } else {
            let here = format!("{}:{at}: module `{name}`", self.file);
            match [&flat, &nested].map(|p| (self.read)(p).map(|text| (p.clone(), text))) {
                [Some((path, text)), None] | [None, Some((path, text))] => {
                    if top {
                        self.modules[self.krate].insert(name, path.clone());
                    }
                    self.file(&path, &text);
                }
                [Some(_), Some(_)] => self
                    .problems
                    .push(format!("{here} has two files, {flat} and {nested}")),
                [None, None] => self
                    .problems
                    .push(format!("{here} has no file ({flat} or {nested})")),
            }
        }
        self.modpath.pop();
        self.dir = outer;
    }

    /// A `use` item: references, or at a crate root the names it brings in.
    fn use_item(&mut self, u: &syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&u.tree, Vec::new(), &mut leaves);
        for (segments, alias) in leaves {
            if !self.modpath.is_empty() {
                self.reference(u.leading_colon.is_some(), &segments);
                continue;
            }
            let mut path: Vec<String> = segments.into_iter().map(|(s, _)| s).collect();
            if path.last().is_some_and(|l| l == "self") {
                path.pop();
            }
            if let Some(last) = path.last().filter(|l| *l != "*") {
                let visible = alias.unwrap_or_else(|| last.clone());
                self.root_uses[self.krate].insert(visible, path);
            }
        }
    }

    /// Records a path written here if it leads to a crate root. Code of a
    /// crate root itself belongs to no layer.
    fn reference(&mut self, leading_colon: bool, segments: &[Segment]) {
        let Some(from) = self.modpath.first().cloned() else {
            return;
        };
        let Some((krate, name)) = self.resolve(leading_colon, segments) else {
            return;
        };
        if name.0 == "*" && krate == self.krate {
            self.problems.push(format!(
                "{}:{}: a glob import of the crate root hides which modules `{from}` uses; \
                 name them",
                self.file, name.1
            ));
        }
        let file = self.file.clone();
        self.refs.push(Ref {
            from,
            krate,
            name,
            file,
        });
    }

    /// Where a path written here lands: the crate and the name after
    /// `crate::`, after the `super::`s that climb out of the top-level
    /// module, or after the name of a crate of the scan. `None` for paths
    /// that stay inside the module or go elsewhere.
    fn resolve(&self, leading_colon: bool, segments: &[Segment]) -> Option<(usize, Segment)> {
        let names: Vec<&str> = segments.iter().map(|(s, _)| s.as_str()).collect();
        let after = |k: usize| segments.get(k).filter(|(s, _)| s != "self").cloned();
        let first = names.first().copied();
        if let Some(other) = self.names.iter().position(|n| Some(n.as_str()) == first) {
            return after(1).map(|s| (other, s));
        }
        let start = usize::from(first == Some("self"));
        let climbs = names[start..].iter().take_while(|n| **n == "super").count();
        let k = match first {
            _ if leading_colon => return None,
            Some("crate") => 1,
            _ if climbs > 0 && climbs == self.modpath.len() => start + climbs,
            _ => return None,
        };
        after(k).map(|s| (self.krate, s))
    }

    /// Paths inside macro input or an attribute's arguments, which are
    /// tokens rather than syntax: every chain `a::b::c` not preceded by `::`.
    fn tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let is_sep = |i: usize| {
            matches!((tts.get(i), tts.get(i + 1)),
                (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                    if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
        };
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if !(i >= 2 && is_sep(i - 2)) => {
                    let mut segments = vec![segment(id)];
                    while let (true, Some(TokenTree::Ident(next))) = (is_sep(i + 1), tts.get(i + 3))
                    {
                        segments.push(segment(next));
                        i += 3;
                    }
                    self.reference(false, &segments);
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The module a name at the root of crate `krate` stands for: a module
    /// of it, or the module of another crate or its own that its root
    /// re-exports under that name. Anything else at a root (an item of
    /// `lib.rs`, an external crate re-exported there) is no layer.
    fn module_at(&self, krate: usize, name: &str) -> Option<&str> {
        let own = |k: usize, n: &str| self.modules[k].get_key_value(n).map(|(m, _)| m.as_str());
        if let Some(m) = own(krate, name) {
            return Some(m);
        }
        let path = self.root_uses[krate].get(name)?;
        let path = match path.first().map(String::as_str) {
            Some("crate" | "self") => &path[1..],
            _ => &path[..],
        };
        let first = path.first()?;
        own(krate, first).or_else(|| {
            let other = self.names.iter().position(|n| n == first)?;
            own(other, path.get(1)?)
        })
    }

    /// Turns the references into edges between top-level modules.
    fn finish(mut self, crates: &[(&str, &str)]) -> Scan {
        let mut modules = BTreeMap::new();
        for (name, file) in self.modules.iter().flatten() {
            if let Some(first) = modules.insert(name.clone(), file.clone()) {
                let p = format!("module `{name}` is in two crates: {first} and {file}");
                self.problems.push(p);
            }
        }
        let mut edges: BTreeMap<(String, String), BTreeSet<(String, usize)>> = BTreeMap::new();
        for r in &self.refs {
            if let Some(to) = self
                .module_at(r.krate, &r.name.0)
                .filter(|to| *to != r.from)
            {
                let places = edges.entry((r.from.clone(), to.to_string())).or_default();
                places.insert((r.file.clone(), r.name.1));
            }
        }
        Scan {
            roots: crates.iter().map(|(_, d)| format!("{d}/lib.rs")).collect(),
            modules,
            edges,
            problems: self.problems,
        }
    }
}

/// Each leaf of a use tree (`a::b::{c, d::*}`, `x as y`, `{self, z}`) as
/// its whole path, with its alias.
fn use_leaves(
    tree: &UseTree,
    mut path: Vec<Segment>,
    out: &mut Vec<(Vec<Segment>, Option<String>)>,
) {
    match tree {
        UseTree::Path(p) => {
            path.push(segment(&p.ident));
            use_leaves(&p.tree, path, out);
        }
        UseTree::Name(n) => {
            path.push(segment(&n.ident));
            out.push((path, None));
        }
        UseTree::Rename(r) => {
            path.push(segment(&r.ident));
            out.push((path, Some(r.rename.unraw().to_string())));
        }
        UseTree::Glob(g) => {
            path.push(("*".to_string(), line(g.star_token.span)));
            out.push((path, None));
        }
        UseTree::Group(g) => g
            .items
            .iter()
            .for_each(|t| use_leaves(t, path.clone(), out)),
    }
}

/// Visitor methods that skip a node gated by `#[cfg(test)]`.
macro_rules! skip_test_only {
    ($lt:lifetime; $($method:ident($node:ident: $ty:ty) => $attrs:expr;)*) => {$(
        fn $method(&mut self, $node: &$lt $ty) {
            if !test_only($attrs) {
                visit::$method(self, $node);
            }
        }
    )*};
}

impl<'ast> Visit<'ast> for Walker<'_> {
    skip_test_only! { 'ast;
        visit_expr(e: Expr) => expr_attrs(e);
        visit_impl_item(i: ImplItem) => attrs_of!(i, ImplItem: Const, Fn, Type, Macro);
        visit_trait_item(i: TraitItem) => attrs_of!(i, TraitItem: Const, Fn, Type, Macro);
        visit_foreign_item(i: ForeignItem) => attrs_of!(i, ForeignItem: Fn, Static, Type, Macro);
        visit_field(f: syn::Field) => &f.attrs;
        visit_variant(v: syn::Variant) => &v.attrs;
        visit_arm(a: syn::Arm) => &a.attrs;
        visit_field_value(f: syn::FieldValue) => &f.attrs;
        visit_local(l: syn::Local) => &l.attrs;
        visit_stmt_macro(s: syn::StmtMacro) => &s.attrs;
    }

    fn visit_item(&mut self, i: &'ast Item) {
        match i {
            _ if test_only(item_attrs(i)) => {}
            Item::Mod(m) => {
                m.attrs.iter().for_each(|a| self.visit_attribute(a));
                self.module(m);
            }
            Item::Use(u) => self.use_item(u),
            _ => visit::visit_item(self, i),
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<Segment> = p.segments.iter().map(|s| segment(&s.ident)).collect();
        self.reference(p.leading_colon.is_some(), &segments);
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone());
    }

    fn visit_attribute(&mut self, a: &'ast Attribute) {
        self.visit_path(a.path());
        match &a.meta {
            Meta::Path(_) => {}
            Meta::List(l) => self.tokens(l.tokens.clone()),
            Meta::NameValue(nv) => self.visit_expr(&nv.value),
        }
    }
}

// ---------------------------------------------------------------------------
// The layer table
// ---------------------------------------------------------------------------

/// One row of the table.
#[derive(Debug, PartialEq)]
struct Layer {
    number: u32,
    name: String,
    modules: Vec<String>,
}

/// The first three cells of a table row: the text between its first four
/// unescaped pipes. The fourth column is prose and is never read, so pipes
/// there (escaped or in code spans) cannot matter.
fn first_cells(row: &str) -> Option<[&str; 3]> {
    let mut pipes = Vec::new();
    let mut escaped = false;
    for (i, c) in row.char_indices() {
        if c == '|' && !escaped {
            pipes.push(i);
            if pipes.len() == 4 {
                break;
            }
        }
        escaped = c == '\\' && !escaped;
    }
    if pipes.len() < 4 || !row[..pipes[0]].trim().is_empty() {
        return None;
    }
    Some([
        &row[pipes[0] + 1..pipes[1]],
        &row[pipes[1] + 1..pipes[2]],
        &row[pipes[2] + 1..pipes[3]],
    ])
}

/// Parses the table between the markers of `docs/architecture.md`: the
/// layers bottom first, and every problem with the table.
fn parse_layers(text: &str) -> (Vec<Layer>, Vec<String>) {
    let mut layers: Vec<Layer> = Vec::new();
    let mut problems = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let begin = lines.iter().position(|l| l.trim() == BEGIN);
    let end = lines.iter().position(|l| l.trim() == END);
    let (Some(begin), Some(end)) = (begin, end) else {
        problems.push(format!("{TABLE} has no `{BEGIN}` ... `{END}` block"));
        return (layers, problems);
    };
    if end < begin {
        problems.push(format!(
            "{TABLE}:{}: `{END}` comes before `{BEGIN}`",
            end + 1
        ));
        return (layers, problems);
    }
    let rows: Vec<(usize, &str)> = (begin + 1..end)
        .map(|n| (n + 1, lines[n].trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let is_separator =
        |l: &str| l.starts_with('|') && l.contains('-') && l.chars().all(|c| "|-: ".contains(c));
    if !rows.get(1).is_some_and(|(_, sep)| is_separator(sep)) {
        problems.push(format!(
            "{TABLE}:{}: the layer table needs a header line and a `|---|` line",
            begin + 1
        ));
        return (layers, problems);
    }
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for &(n, row) in &rows[2..] {
        let Some([number, name, modules]) = first_cells(row) else {
            problems.push(format!("{TABLE}:{n}: a layer row needs at least 3 cells"));
            continue;
        };
        let Ok(number) = number.trim().parse::<u32>() else {
            let number = number.trim();
            problems.push(format!(
                "{TABLE}:{n}: layer number `{number}` is not a number"
            ));
            continue;
        };
        let expected = match layers.last() {
            None if number != 1 => Some("1".to_string()),
            Some(prev) if number <= prev.number => Some(format!("above {}", prev.number)),
            _ => None,
        };
        if let Some(expected) = expected {
            problems.push(format!(
                "{TABLE}:{n}: layer {number} is out of order (expected {expected}; rows go \
                 bottom layer first)"
            ));
        }
        let mut names = Vec::new();
        for cell in modules.split(',').map(str::trim) {
            let bare = cell
                .strip_prefix('`')
                .and_then(|c| c.strip_suffix('`'))
                .filter(|c| !c.is_empty() && c.chars().all(|c| c == '_' || c.is_alphanumeric()));
            match bare {
                Some(m) => match seen.insert(m.to_string(), number) {
                    Some(first) => problems.push(format!(
                        "{TABLE}:{n}: module `{m}` is listed twice (layers {first} and {number})"
                    )),
                    None => names.push(m.to_string()),
                },
                None if modules.trim().is_empty() => {
                    problems.push(format!("{TABLE}:{n}: layer {number} lists no module"));
                }
                None => problems.push(format!(
                    "{TABLE}:{n}: `{cell}` is not a backticked module name"
                )),
            }
        }
        layers.push(Layer {
            number,
            name: name.trim().to_string(),
            modules: names,
        });
    }
    if layers.is_empty() && problems.is_empty() {
        problems.push(format!(
            "{TABLE}:{}: the layer table has no rows",
            begin + 1
        ));
    }
    (layers, problems)
}

// ---------------------------------------------------------------------------
// Judging the graph
// ---------------------------------------------------------------------------

/// Every problem found, by kind; empty when the architecture holds.
#[derive(Debug, Default)]
struct Findings {
    /// `a -> b -> a`, and which modules reach each other.
    cycles: Vec<String>,
    /// `a (layer n) -> b (layer m): file:line, ...`.
    edges: Vec<String>,
    /// Modules missing from the table or unknown to the crates, and
    /// malformed rows.
    table: Vec<String>,
    /// Source that could not be read or is ambiguous.
    source: Vec<String>,
}

impl Findings {
    fn is_empty(&self) -> bool {
        self.cycles.is_empty()
            && self.edges.is_empty()
            && self.table.is_empty()
            && self.source.is_empty()
    }
}

impl fmt::Display for Findings {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            out,
            "the architecture check failed. The layer order lives in {TABLE}, in the table \
             between `{BEGIN}` and `{END}`; production code of a module may use only modules \
             of strictly lower layers."
        )?;
        let sections = [
            ("import cycles between top-level modules", &self.cycles),
            ("edges that do not go down the layers", &self.edges),
            ("the layer table and the crates' modules", &self.table),
            ("source the check could not follow", &self.source),
        ];
        for (title, items) in sections {
            if !items.is_empty() {
                writeln!(out, "\n{title} ({}):", items.len())?;
                for item in items {
                    writeln!(out, "  {item}")?;
                }
            }
        }
        Ok(())
    }
}

/// Judges the module graph of `scan` against the layer table in `table`
/// (the text of `docs/architecture.md`, or why it cannot be read).
fn judge(scan: &Scan, table: Result<&str, String>) -> Findings {
    let mut found = Findings {
        source: scan.problems.clone(),
        ..Findings::default()
    };
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in scan.edges.keys() {
        graph.entry(from).or_default().insert(to);
    }
    for (members, cycles) in cycles(&graph) {
        found.cycles.push(format!(
            "{} modules reach each other: {}",
            members.len(),
            members.join(", ")
        ));
        found.cycles.extend(cycles.iter().map(|c| c.join(" -> ")));
    }
    let layers = match table {
        Ok(text) => {
            let (layers, problems) = parse_layers(text);
            found.table = problems;
            layers
        }
        Err(e) => {
            found.table.push(e);
            Vec::new()
        }
    };
    let layer_of: BTreeMap<&str, u32> = layers
        .iter()
        .flat_map(|l| l.modules.iter().map(move |m| (m.as_str(), l.number)))
        .collect();
    for (module, file) in &scan.modules {
        if !layer_of.contains_key(module.as_str()) {
            let problem = format!("module `{module}` ({file}) is in no layer");
            found.table.push(problem);
        }
    }
    for module in layer_of.keys().filter(|m| !scan.modules.contains_key(**m)) {
        found.table.push(format!(
            "`{module}` is in the table but is no module of {}",
            scan.roots.join(" or ")
        ));
    }
    for ((from, to), places) in &scan.edges {
        let (Some(&a), Some(&b)) = (layer_of.get(from.as_str()), layer_of.get(to.as_str())) else {
            continue; // reported above as a module in no layer
        };
        if b >= a {
            let places: Vec<String> = places.iter().map(|(f, l)| format!("{f}:{l}")).collect();
            let places = places.join(", ");
            found
                .edges
                .push(format!("{from} (layer {a}) -> {to} (layer {b}): {places}"));
        }
    }
    found
}

/// The cycles of `graph`: for each group of modules that reach each other,
/// its members and, for each edge inside it, one shortest cycle through that
/// edge (`[a, b, c, a]`, starting at its smallest module), without repeats.
/// Listing every elementary cycle could mean thousands; these cover every
/// edge that takes part in a cycle.
fn cycles<'g>(
    graph: &BTreeMap<&'g str, BTreeSet<&'g str>>,
) -> Vec<(Vec<&'g str>, Vec<Vec<&'g str>>)> {
    let succ = |n: &str| graph.get(n).into_iter().flatten().copied();
    let reach = |from: &'g str| -> BTreeSet<&'g str> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&'g str> = succ(from).collect();
        while let Some(n) = todo.pop() {
            if seen.insert(n) {
                todo.extend(succ(n));
            }
        }
        seen
    };
    let nodes: BTreeSet<&'g str> = graph
        .iter()
        .flat_map(|(n, s)| std::iter::once(*n).chain(s.iter().copied()))
        .collect();
    let reaches: BTreeMap<&'g str, BTreeSet<&'g str>> =
        nodes.iter().map(|&n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &n in &nodes {
        if done.contains(n) || !reaches[n].contains(n) {
            continue;
        }
        let members: Vec<&str> = reaches[n]
            .iter()
            .copied()
            .filter(|m| reaches[m].contains(n))
            .collect();
        done.extend(members.iter().copied());
        let mut found: BTreeSet<(usize, Vec<&str>)> = BTreeSet::new();
        for &u in &members {
            for v in succ(u).filter(|v| members.contains(v)) {
                let mut path = shortest_path(graph, v, u);
                path.insert(0, u);
                // Rotate so that equal cycles compare equal.
                path.pop();
                let least = (0..path.len()).min_by_key(|&k| path[k]).unwrap_or(0);
                path.rotate_left(least);
                path.push(path[0]);
                found.insert((path.len(), path));
            }
        }
        out.push((members, found.into_iter().map(|(_, c)| c).collect()));
    }
    out
}

/// A shortest path `from -> ... -> to` in `graph` (breadth first, so ties go
/// to the alphabetically first), which the caller knows exists.
fn shortest_path<'g>(
    graph: &BTreeMap<&'g str, BTreeSet<&'g str>>,
    from: &'g str,
    to: &'g str,
) -> Vec<&'g str> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(n) = queue.pop_front() {
        if n == to {
            break;
        }
        for &m in graph.get(n).into_iter().flatten() {
            if m != from && !came_from.contains_key(m) {
                came_from.insert(m, n);
                queue.push_back(m);
            }
        }
    }
    let mut path = vec![to];
    let mut n = to;
    while n != from {
        n = came_from[n];
        path.push(n);
    }
    path.reverse();
    path
}

// ---------------------------------------------------------------------------
// The checks of the real tree
// ---------------------------------------------------------------------------

#[test]
fn top_level_modules_follow_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scan = scan(CRATES, &|path: &str| {
        std::fs::read_to_string(root.join(path)).ok()
    });
    let table = std::fs::read_to_string(root.join(TABLE))
        .map_err(|e| format!("{TABLE} cannot be read: {e}"));
    let found = judge(&scan, table.as_deref().map_err(Clone::clone));
    assert!(found.is_empty(), "{found}");
}

/// walrelay-core exists so that the compiler keeps its layers off the
/// network: its manifest may name only crates that never open a socket,
/// and tokio only with features that cannot (in a workspace build tokio has
/// `net` through walrelay, so `cargo check -p walrelay-core` is what would
/// catch a use of it; this keeps the manifest from asking for it).
#[test]
fn core_depends_on_no_network_crate() {
    const ALLOWED: &[&str] = &[
        "walrelay-proto",
        "bytes",
        "thiserror",
        "serde",
        "serde_json",
        "regex",
        "rand",
        "tracing",
        "tempfile",
        "tokio",
    ];
    const TOKIO_FEATURES: &[&str] = &["sync", "time"];
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| -> toml::Table {
        let text = std::fs::read_to_string(root.join(path)).expect("manifest is readable");
        text.parse().expect("manifest is TOML")
    };
    let (core, workspace) = (read("core/Cargo.toml"), read("Cargo.toml"));
    let table = |t: &toml::Table, key: &str| t.get(key).and_then(|v| v.as_table()).cloned();
    let deps = table(&core, "dependencies").expect("core has [dependencies]");
    let shared = table(&workspace, "workspace")
        .and_then(|w| table(&w, "dependencies"))
        .expect("the workspace has [workspace.dependencies]");
    let mut bad = Vec::new();
    for (name, spec) in &deps {
        if !ALLOWED.contains(&name.as_str()) {
            bad.push(format!(
                "{name} is not among the crates core may use: {ALLOWED:?}"
            ));
        }
        // Features come from the member's entry and, for `workspace = true`,
        // from the shared one too.
        let inherits = spec.get("workspace").and_then(toml::Value::as_bool) == Some(true);
        let entries = [Some(spec), shared.get(name).filter(|_| inherits)];
        let features = entries
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("features")?.as_array())
            .flatten()
            .filter_map(|f| f.as_str());
        for feature in features.filter(|f| name == "tokio" && !TOKIO_FEATURES.contains(f)) {
            bad.push(format!(
                "tokio feature `{feature}`: core may ask only for {TOKIO_FEATURES:?}"
            ));
        }
    }
    assert!(bad.is_empty(), "core/Cargo.toml:\n  {}", bad.join("\n  "));
}

// ---------------------------------------------------------------------------
// Tests of the checker itself
// ---------------------------------------------------------------------------

/// Scans an in-memory workspace of `(path, text)` files holding one crate
/// in `src/`.
fn scan_of<P: AsRef<str>, T: AsRef<str>>(files: &[(P, T)]) -> Scan {
    scan_crates_of(&[("one", "src")], files)
}

fn scan_crates_of<P: AsRef<str>, T: AsRef<str>>(crates: &[(&str, &str)], files: &[(P, T)]) -> Scan {
    let files: BTreeMap<&str, &str> = files
        .iter()
        .map(|(p, t)| (p.as_ref(), t.as_ref()))
        .collect();
    scan(crates, &|path: &str| {
        files.get(path).map(std::string::ToString::to_string)
    })
}

/// The edges of a scan as `from -> to @ file:line` lines, after checking
/// that it had no source problems.
fn edges(scan: Scan) -> Vec<String> {
    assert_eq!(scan.problems, Vec::<String>::new());
    scan.edges
        .iter()
        .flat_map(|((from, to), places)| {
            places
                .iter()
                .map(move |(f, l)| format!("{from} -> {to} @ {f}:{l}"))
        })
        .collect()
}

/// A crate of modules `a` to `z`: `src/a.rs` holds `a_rs`, the others are
/// empty, so that a test can point at up to 25 distinct targets.
fn crate_with_a(a_rs: &str) -> Vec<(String, String)> {
    let names: Vec<char> = ('a'..='z').collect();
    let lib: String = names.iter().map(|n| format!("pub mod {n};\n")).collect();
    let mut files = vec![("src/lib.rs".to_string(), lib)];
    for n in names {
        let text = if n == 'a' { a_rs } else { "" };
        files.push((format!("src/{n}.rs"), text.to_string()));
    }
    files
}

fn edges_of_a(a_rs: &str) -> Vec<String> {
    edges(scan_of(&crate_with_a(a_rs)))
}

#[test]
fn use_trees_give_the_line_of_each_module() {
    let edges = edges_of_a(
        "use crate::{b::X, c::{Y, z::{Z as W, self}}, d, e::*};\nuse std::fmt;\n\
         pub use crate::{\n    f::X,\n    g::{\n        Y,\n    },\n};\n\
         pub(crate) use crate::h;\npub(super) use crate::i::I as _;\nuse self::own::Thing;\n",
    );
    assert_eq!(
        edges,
        [
            "a -> b @ src/a.rs:1",
            "a -> c @ src/a.rs:1",
            "a -> d @ src/a.rs:1",
            "a -> e @ src/a.rs:1",
            "a -> f @ src/a.rs:4",
            "a -> g @ src/a.rs:5",
            "a -> h @ src/a.rs:9",
            "a -> i @ src/a.rs:10",
        ]
    );
}

#[test]
fn paths_count_anywhere_in_code_attributes_and_macros() {
    let edges = edges_of_a(
        "pub fn f(x: crate::b::T) -> crate::c::U {\n\
         let s = crate::d::S { x: 1 };\n\
         println!(\"{}\", crate::e::NAME);\n\
         <crate::f::G as Tr>::go();\n\
         crate::g::h::<u8>()\n\
         }\n\
         #[derive(crate::h::Derive)]\n\
         struct T;\n\
         macro_rules! m { () => { $crate::i::x() }; }\n\
         pub fn own() { crate::a::inner(); self::inner(); m!(r#mod helper;); r#use(crate::j::X); }\n\
         #[doc = crate::k::DOC]\nfn documented() {}\n",
    );
    assert_eq!(
        edges,
        [
            "a -> b @ src/a.rs:1",
            "a -> c @ src/a.rs:1",
            "a -> d @ src/a.rs:2",
            "a -> e @ src/a.rs:3",
            "a -> f @ src/a.rs:4",
            "a -> g @ src/a.rs:5",
            "a -> h @ src/a.rs:7",
            "a -> i @ src/a.rs:9",
            "a -> j @ src/a.rs:10",
            "a -> k @ src/a.rs:11",
        ]
    );
}

#[test]
fn super_chains_that_reach_the_crate_root() {
    let edges = edges(scan_of(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        (
            "src/a/mod.rs",
            "mod inner;\nuse super::d::Top;\nfn f() { self::super::c::x() }\n",
        ),
        (
            // `super::c` and `self::super::d` are a::c and a::d: the names
            // of top-level modules, so that climbing one level too far shows.
            "src/a/inner.rs",
            "use super::super::b::X;\nuse super::c::Sibling;\n\
             fn f() { super::super::c::g(); self::super::d::helper(); }\n",
        ),
        (
            "src/b.rs",
            "mod deep {\n    mod deeper {\n        fn f() { super::super::super::c::go() }\n\
                 fn g() { super::super::c::stays_in_b() }\n    }\n}\n",
        ),
        ("src/c.rs", ""),
        ("src/d.rs", ""),
    ]));
    assert_eq!(
        edges,
        [
            "a -> b @ src/a/inner.rs:1",
            "a -> c @ src/a/inner.rs:3",
            "a -> c @ src/a/mod.rs:3",
            "a -> d @ src/a/mod.rs:2",
            "b -> c @ src/b.rs:3",
        ]
    );
}

#[test]
fn comments_and_strings_are_not_edges() {
    let edges = edges_of_a(
        "//! Uses [`crate::b`] in prose.\n\
         /// See [`crate::c::X`].\n\
         // use crate::d;\n\
         /* crate::e /* nested crate::e */ still a comment crate::e */\n\
         const S: &str = \"crate::f \\\" crate::f\";\n\
         const R: &str = r#\"crate::g \" crate::g\"#;\n\
         const Q: char = '\"'; fn real() { crate::i::x() }\n\
         fn life<'a>(x: &'a str) -> &'a str { crate::j::f(x) }\n\
         fn quoted() { println!(\"crate::h {}\", crate::k::X) }\n",
    );
    assert_eq!(
        edges,
        [
            "a -> i @ src/a.rs:7",
            "a -> j @ src/a.rs:8",
            "a -> k @ src/a.rs:9"
        ]
    );
}

#[test]
fn cfg_test_code_is_not_production() {
    // Each gated piece is followed at once by production code, which a skip
    // that runs too far would swallow.
    let edges = edges_of_a(
        "#[cfg(test)]\nuse crate::b;\nuse crate::n::One;\n\
         #[cfg(test)]\n#[allow(dead_code)]\npub(crate) fn helper() -> [u8; 2] { crate::c::f() }\n\
         fn prod() { crate::o::p() }\n\
         #[cfg(all(unix, test))]\nimpl X { fn f() { crate::d::g(); } }\n\
         #[cfg(test)]\nmod tests {\n    use crate::g::X;\n}\nconst U: u8 = crate::p::U;\n\
         #[cfg(test)]\nextern \"C\" { fn probe(x: crate::q::T); }\nfn after() { crate::r::x() }\n\
         struct S {\n    #[cfg(test)]\n    probe: crate::h::Probe,\n    real: crate::i::Real,\n}\n\
         fn body(x: u8) {\n    #[cfg(test)]\n    crate::j::only_in_tests();\n    crate::k::always();\n\
         #[cfg(test)]\n    { crate::s::block(); }\n    crate::t::after_block();\n\
         #[cfg(test)]\n    check! { crate::u::x }\n    crate::v::after_macro();\n\
         match x {\n        #[cfg(test)]\n        0 => { crate::w::arm() }\n\
         _ => crate::x::other(),\n    }\n}\n\
         #[cfg(not(test))]\nuse crate::e;\n\
         #[cfg(any(test, feature = \"x\"))]\nuse crate::f;\n\
         mod m {\n    #![cfg(test)]\n    use crate::l;\n}\n\
         fn gated() {\n    #![cfg(test)]\n    crate::m::x();\n}\n",
    );
    assert_eq!(
        edges,
        [
            "a -> e @ src/a.rs:40",
            "a -> f @ src/a.rs:42",
            "a -> i @ src/a.rs:21",
            "a -> k @ src/a.rs:26",
            "a -> n @ src/a.rs:3",
            "a -> o @ src/a.rs:7",
            "a -> p @ src/a.rs:14",
            "a -> r @ src/a.rs:17",
            "a -> t @ src/a.rs:29",
            "a -> v @ src/a.rs:32",
            "a -> x @ src/a.rs:36",
        ]
    );
}

#[test]
fn cfg_test_files_are_skipped() {
    for tests_file in ["src/r/tests.rs", "src/r/tests/mod.rs"] {
        let lib = (
            "src/lib.rs",
            "pub mod r;\npub mod x;\npub mod y;\npub mod z;\n",
        );
        let (x, y) = (("src/x.rs", ""), ("src/y.rs", ""));
        let z = ("src/z.rs", "#![cfg(test)]\nuse crate::x;\n");
        let tests = (tests_file, "use crate::x;\n");
        let gated = ("src/r/mod.rs", "#[cfg(test)]\nmod tests;\nuse crate::y;\n");
        assert_eq!(
            edges(scan_of(&[lib, x, y, z, tests, gated])),
            ["r -> y @ src/r/mod.rs:3"],
            "{tests_file}"
        );
        // The same file without the gate is production code, and is read.
        let plain = ("src/r/mod.rs", "mod tests;\nuse crate::y;\n");
        assert_eq!(
            edges(scan_of(&[lib, x, y, z, tests, plain])),
            [
                format!("r -> x @ {tests_file}:1"),
                "r -> y @ src/r/mod.rs:2".to_string()
            ],
            "{tests_file}"
        );
    }
}

#[test]
fn names_re_exported_at_the_crate_root_point_to_their_module() {
    let edges = edges(scan_of(&[
        (
            "src/lib.rs",
            "pub mod a;\npub mod b;\npub mod c;\npub use b::Thing;\n\
             pub use crate::c::{Other as Renamed};\npub use std::fmt as proto;\n",
        ),
        (
            "src/a.rs",
            "use crate::Thing;\nfn f() { crate::Renamed::new(); crate::proto::x(); }\n",
        ),
        ("src/b.rs", ""),
        ("src/c.rs", ""),
    ]));
    assert_eq!(edges, ["a -> b @ src/a.rs:1", "a -> c @ src/a.rs:2"]);
}

#[test]
fn modules_of_the_core_crate_are_seen_from_the_main_crate() {
    let crates = [("lower", "core/src"), ("upper", "src")];
    let files = [
        ("core/src/lib.rs", "pub mod base;\npub mod model;\n"),
        ("core/src/base.rs", "pub struct B;\n"),
        ("core/src/model.rs", "use crate::base::B;\n"),
        (
            "src/lib.rs",
            "pub use lower::{base, model as connect_model};\npub use lower::model::Model;\n\
             pub mod app;\n",
        ),
        (
            "src/app.rs",
            "use crate::base::B;\nuse lower::model;\nfn f() { crate::connect_model::x(); }\n\
             fn g() -> crate::Model { ::lower::base::y(); m!(lower::base::z) }\n",
        ),
    ];
    assert_eq!(
        edges(scan_crates_of(&crates, &files)),
        [
            "app -> base @ src/app.rs:1",
            "app -> base @ src/app.rs:4",
            "app -> model @ src/app.rs:2",
            "app -> model @ src/app.rs:3",
            "app -> model @ src/app.rs:4",
            "model -> base @ core/src/model.rs:1",
        ]
    );
    let mut twice = files.to_vec();
    twice[3].1 = "pub mod base;\n";
    twice.push(("src/base.rs", ""));
    assert_eq!(
        scan_crates_of(&crates, &twice).problems,
        ["module `base` is in two crates: core/src/base.rs and src/base.rs"]
    );
}

#[test]
fn glob_of_the_crate_root_and_bad_source_are_reported() {
    let scan = scan_of(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod gone;\nmod two;\n"),
        ("src/a.rs", "use super::*;\n"),
        ("src/b.rs", "fn f() {\n    \"open\n"),
        ("src/two.rs", ""),
        ("src/two/mod.rs", ""),
    ]);
    assert_eq!(
        scan.problems,
        [
            "src/a.rs:1: a glob import of the crate root hides which modules `a` uses; name them",
            "src/b.rs:2: cannot parse string into token stream",
            "src/lib.rs:3: module `gone` has no file (src/gone.rs or src/gone/mod.rs)",
            "src/lib.rs:4: module `two` has two files, src/two.rs and src/two/mod.rs",
        ]
    );
}

const SAMPLE: &str = "# Architecture\n\nSome prose with `a | b`.\n\n\
    <!-- layers:begin -->\n\
    | layer | name | modules | owns |\n\
    |---|---|:--|---|\n\
    | 1 | base | `x`, `y` | clocks, `a | b` in code, an escaped \\| pipe, `z` |\n\
    \n\
    | 2 | middle | `z` | the \\| middle, with, commas |\n\
    | 3 | top | `w` |\n\
    <!-- layers:end -->\n\nMore prose.\n";

#[test]
fn table_rows_parse_with_prose_in_the_fourth_column() {
    let (layers, problems) = parse_layers(SAMPLE);
    assert_eq!(problems, Vec::<String>::new());
    let layer = |number: u32, name: &str, modules: &[&str]| Layer {
        number,
        name: name.to_string(),
        modules: modules
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
    };
    assert_eq!(
        layers,
        [
            layer(1, "base", &["x", "y"]),
            layer(2, "middle", &["z"]),
            layer(3, "top", &["w"]),
        ]
    );
    // An escaped pipe in the first three cells does not split them.
    assert_eq!(
        first_cells(r"| 1 | a \| b | `m` | x |"),
        Some([" 1 ", r" a \| b ", " `m` "])
    );
}

#[test]
fn malformed_tables_are_reported() {
    let table =
        |rows: &str| format!("{BEGIN}\n| layer | name | modules |\n|---|---|---|\n{rows}{END}\n");
    let problems = |rows: &str| parse_layers(&table(rows)).1;
    assert_eq!(
        problems("| 2 | a | `x` |\n"),
        ["docs/architecture.md:4: layer 2 is out of order (expected 1; rows go bottom layer first)"]
    );
    assert_eq!(
        problems("| 1 | a | `x` |\n| 1 | b | `y` |\n"),
        ["docs/architecture.md:5: layer 1 is out of order (expected above 1; rows go bottom layer first)"]
    );
    assert_eq!(
        problems("| 1 | a | `x`, `y` |\n| 2 | b | `x` |\n"),
        ["docs/architecture.md:5: module `x` is listed twice (layers 1 and 2)"]
    );
    assert_eq!(
        problems("| 1 | a | x, `y` |\n| one | b | `z` |\n| 2 | c |  |\n"),
        [
            "docs/architecture.md:4: `x` is not a backticked module name",
            "docs/architecture.md:5: layer number `one` is not a number",
            "docs/architecture.md:6: layer 2 lists no module",
        ]
    );
    assert_eq!(
        parse_layers("| 1 | a | `x` |\n").1,
        ["docs/architecture.md has no `<!-- layers:begin -->` ... `<!-- layers:end -->` block"]
    );
    assert_eq!(
        parse_layers(&format!("{BEGIN}\n| 1 | a | `x` |\n{END}\n")).1,
        ["docs/architecture.md:1: the layer table needs a header line and a `|---|` line"]
    );
}

#[test]
fn cycles_are_found_and_reported_as_paths() {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in [
        ("b", "c"),
        ("c", "a"),
        ("a", "b"),
        ("c", "d"),
        ("d", "e"),
        ("e", "d"),
        ("e", "f"),
        ("f", "g"),
    ] {
        graph.entry(from).or_default().insert(to);
    }
    assert_eq!(
        cycles(&graph),
        [
            (vec!["a", "b", "c"], vec![vec!["a", "b", "c", "a"]]),
            (vec!["d", "e"], vec![vec!["d", "e", "d"]]),
        ]
    );
    for (from, to) in [("c", "a"), ("e", "d")] {
        graph.entry(from).or_default().remove(to);
    }
    assert_eq!(cycles(&graph), []);
}

#[test]
fn every_edge_of_a_tangle_is_in_some_reported_cycle() {
    let mut graph: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    // b -> c and c -> b are each the second edge of their module, and the
    // only edges of the cycle b -> c -> b: it is found only if every edge
    // of the group is tried.
    for (from, to) in [("a", "b"), ("b", "a"), ("b", "c"), ("c", "a"), ("c", "b")] {
        graph.entry(from).or_default().insert(to);
    }
    assert_eq!(
        cycles(&graph),
        [(
            vec!["a", "b", "c"],
            vec![
                vec!["a", "b", "a"],
                vec!["b", "c", "b"],
                vec!["a", "b", "c", "a"]
            ]
        )]
    );
}

#[test]
fn upward_and_same_layer_edges_are_refused() {
    let scan = scan_of(&[
        (
            "src/lib.rs",
            "mod low;\nmod mid;\nmod peer;\nmod high;\nmod lost;\n",
        ),
        ("src/low.rs", "use crate::mid;\n"),
        (
            "src/mid.rs",
            "use crate::low;\nuse crate::peer;\nfn f() { crate::peer::g() }\n",
        ),
        ("src/peer.rs", "use crate::low;\n"),
        (
            "src/high.rs",
            "use crate::{low, mid, peer};\nuse crate::lost;\n",
        ),
        ("src/lost.rs", ""),
    ]);
    let table = format!(
        "{BEGIN}\n| layer | name | modules |\n|---|---|---|\n\
         | 1 | bottom | `low` |\n| 2 | middle | `mid`, `peer` |\n| 3 | top | `high`, `ghost` |\n{END}\n"
    );
    let found = judge(&scan, Ok(&table));
    assert_eq!(
        found.edges,
        [
            "low (layer 1) -> mid (layer 2): src/low.rs:1",
            "mid (layer 2) -> peer (layer 2): src/mid.rs:2, src/mid.rs:3",
        ]
    );
    assert_eq!(
        found.table,
        [
            "module `lost` (src/lost.rs) is in no layer",
            "`ghost` is in the table but is no module of src/lib.rs",
        ]
    );
    assert_eq!(
        found.cycles,
        [
            "3 modules reach each other: low, mid, peer",
            "low -> mid -> low",
            "low -> mid -> peer -> low",
        ]
    );
    let message = found.to_string();
    assert!(message.contains("docs/architecture.md"), "{message}");
    assert!(
        message.contains("low (layer 1) -> mid (layer 2): src/low.rs:1"),
        "{message}"
    );
}

#[test]
fn a_crate_that_follows_its_layers_passes() {
    let scan = scan_of(&[
        ("src/lib.rs", "pub mod low;\npub mod high;\n"),
        ("src/low.rs", "pub fn f() {}\n"),
        (
            "src/high.rs",
            "use crate::low;\nfn g() { crate::low::f() }\n",
        ),
    ]);
    let table =
        format!("{BEGIN}\n| layer | name | modules |\n|---|---|---|\n| 1 | a | `low` |\n| 2 | b | `high` |\n{END}\n");
    let found = judge(&scan, Ok(&table));
    assert!(found.is_empty(), "{found}");
    assert!(!judge(&scan, Err("gone".to_string())).is_empty());
}
