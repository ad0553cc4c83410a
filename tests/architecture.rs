//! The layers of `src/`: the top-level modules of the library form an ordered
//! stack, written once in the table of `docs/architecture.md` between
//! `<!-- layers:begin -->` and `<!-- layers:end -->`, and production code of
//! a module may refer only to modules of strictly lower layers. This test
//! follows the `mod` declarations from `src/lib.rs`, reads every production
//! source file with a small lexer of its own (comments, strings and
//! `#[cfg(test)]` items do not count), collects each reference of one
//! top-level module to another (`use crate::x`, grouped and nested `use`,
//! inline `crate::x::f()`, `super::` chains that climb to the crate root,
//! names re-exported at the crate root), and fails on every edge that does
//! not go down the layers and on every import cycle, all listed at once with
//! `file:line`.
//!
//! It must never compile, run or modify the code it reads, never depend on
//! anything but std, and never name a module itself: the order lives in the
//! table alone, so that moving a module is one edit of the documentation. A
//! source file it cannot lex is reported as a problem, never skipped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::Path;

/// Where the layer order lives, relative to the crate root.
const TABLE: &str = "docs/architecture.md";
const BEGIN: &str = "<!-- layers:begin -->";
const END: &str = "<!-- layers:end -->";

// ---------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------

/// One token of Rust source. Only what the rules need is kept: literals and
/// lifetimes are opaque, so nothing inside a string can look like a path.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// An identifier or keyword; `raw` for `r#name`, which is never a keyword.
    /// (`$crate` is `$` and `crate`, so `$crate::x` reads as `crate::x`.)
    Ident { name: String, raw: bool },
    /// `::`.
    PathSep,
    /// An opening delimiter: `(`, `[` or `{`.
    Open(char),
    /// A closing delimiter: `)`, `]` or `}`.
    Close(char),
    /// Any other punctuation character.
    Punct(char),
    /// A string, byte string, raw string, char, byte or number literal.
    Literal,
    /// A lifetime or a loop label.
    Lifetime,
}

/// A token and the line it starts on.
#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

/// Turns source text into tokens, dropping whitespace and every kind of
/// comment (`//`, `///`, `//!`, nested `/* */`).
struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: usize,
    toks: Vec<Token>,
}

/// Characters that may start an identifier.
fn ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

/// Characters that may continue an identifier.
fn ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl Lexer {
    /// Lexes `src`, or says at which line it cannot.
    fn run(src: &str) -> Result<Vec<Token>, String> {
        let mut lx = Lexer {
            chars: src.chars().collect(),
            pos: 0,
            line: 1,
            toks: Vec::new(),
        };
        while let Some(c) = lx.peek(0) {
            let line = lx.line;
            match c {
                _ if c.is_whitespace() => lx.bump(),
                '/' if lx.peek(1) == Some('/') => {
                    while lx.peek(0).is_some_and(|c| c != '\n') {
                        lx.bump();
                    }
                }
                '/' if lx.peek(1) == Some('*') => lx.block_comment()?,
                '"' => {
                    lx.quoted()?;
                    lx.push(Tok::Literal, line);
                }
                '\'' => lx.quote()?,
                _ if c.is_ascii_digit() => {
                    lx.number();
                    lx.push(Tok::Literal, line);
                }
                _ if ident_start(c) => lx.word()?,
                ':' if lx.peek(1) == Some(':') => {
                    lx.pos += 2;
                    lx.push(Tok::PathSep, line);
                }
                '(' | '[' | '{' => {
                    lx.bump();
                    lx.push(Tok::Open(c), line);
                }
                ')' | ']' | '}' => {
                    lx.bump();
                    lx.push(Tok::Close(c), line);
                }
                _ => {
                    lx.bump();
                    lx.push(Tok::Punct(c), line);
                }
            }
        }
        Ok(lx.toks)
    }

    /// The character `k` places ahead, if any.
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.pos + k).copied()
    }

    /// Steps over one character, counting lines.
    fn bump(&mut self) {
        if self.peek(0) == Some('\n') {
            self.line += 1;
        }
        self.pos += 1;
    }

    /// Adds a token that started on `line`.
    fn push(&mut self, tok: Tok, line: usize) {
        self.toks.push(Token { tok, line });
    }

    /// The identifier that starts `k` places ahead, or "" if none does.
    fn word_at(&self, k: usize) -> String {
        let mut end = self.pos + k;
        if !self.chars.get(end).copied().is_some_and(ident_start) {
            return String::new();
        }
        while self.chars.get(end).copied().is_some_and(ident_continue) {
            end += 1;
        }
        self.chars[self.pos + k..end].iter().collect()
    }

    /// Skips a block comment, which nests in Rust.
    fn block_comment(&mut self) -> Result<(), String> {
        let from = self.line;
        self.pos += 2;
        let mut depth = 1;
        while depth > 0 {
            match (self.peek(0), self.peek(1)) {
                (Some('/'), Some('*')) => {
                    depth += 1;
                    self.pos += 2;
                }
                (Some('*'), Some('/')) => {
                    depth -= 1;
                    self.pos += 2;
                }
                (Some(_), _) => self.bump(),
                (None, _) => return Err(format!("unterminated block comment from line {from}")),
            }
        }
        Ok(())
    }

    /// Skips a `"..."` literal with its escapes; the opening quote is next.
    fn quoted(&mut self) -> Result<(), String> {
        let from = self.line;
        self.bump();
        loop {
            match self.peek(0) {
                Some('\\') => {
                    self.bump();
                    self.bump();
                }
                Some('"') => {
                    self.bump();
                    return Ok(());
                }
                Some(_) => self.bump(),
                None => return Err(format!("unterminated string from line {from}")),
            }
        }
    }

    /// Skips a raw string: `#`s, a quote, and the text up to a quote followed
    /// by as many `#`s. The prefix (`r`, `br`, `cr`) is already consumed.
    fn raw_string(&mut self) -> Result<(), String> {
        let from = self.line;
        let mut hashes = 0;
        while self.peek(0) == Some('#') {
            hashes += 1;
            self.bump();
        }
        if self.peek(0) != Some('"') {
            return Err(format!("malformed raw string at line {from}"));
        }
        self.bump();
        loop {
            match self.peek(0) {
                Some('"') if (1..=hashes).all(|k| self.peek(k) == Some('#')) => {
                    self.pos += 1 + hashes;
                    return Ok(());
                }
                Some(_) => self.bump(),
                None => return Err(format!("unterminated raw string from line {from}")),
            }
        }
    }

    /// A quote starts a char literal (`'x'`, `'\n'`, `'"'`) or a lifetime
    /// (`'a`, `'static`, a label): a lifetime has no closing quote right
    /// after its first character, which is what tells them apart.
    fn quote(&mut self) -> Result<(), String> {
        let line = self.line;
        if self.peek(1) == Some('\\') {
            self.pos += 3; // the quote, the backslash and the escaped character
            while self.peek(0).is_some_and(|c| c != '\'' && c != '\n') {
                self.bump();
            }
            if self.peek(0) != Some('\'') {
                return Err(format!("unterminated char literal at line {line}"));
            }
            self.bump();
            self.push(Tok::Literal, line);
        } else if self.peek(2) == Some('\'') && self.peek(1).is_some() {
            self.pos += 3;
            self.push(Tok::Literal, line);
        } else {
            self.bump();
            while self.peek(0).is_some_and(ident_continue) {
                self.bump();
            }
            self.push(Tok::Lifetime, line);
        }
        Ok(())
    }

    /// Skips a number: digits, suffixes, and one fraction (`1.5e3f64`), but
    /// not the dots of a range (`0..n`) or of a method call.
    fn number(&mut self) {
        while self.peek(0).is_some_and(ident_continue) {
            self.bump();
        }
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
            while self.peek(0).is_some_and(ident_continue) {
                self.bump();
            }
        }
    }

    /// An identifier, a raw identifier, or a raw string (`r"..."`, `r#"..."#`,
    /// `br"..."`, `cr"..."`), whose backslashes escape nothing. Other
    /// prefixes (`b"..."`, `c"..."`, `b'x'`) need nothing special: the prefix
    /// lexes as a name, the rest as an ordinary literal.
    fn word(&mut self) -> Result<(), String> {
        let line = self.line;
        let word = self.word_at(0);
        self.pos += word.chars().count();
        let next = self.peek(0);
        match (word.as_str(), next) {
            ("r" | "br" | "cr", Some('"')) => {
                self.raw_string()?;
                self.push(Tok::Literal, line);
            }
            ("r" | "br" | "cr", Some('#')) if matches!(self.peek(1), Some('#' | '"')) => {
                self.raw_string()?;
                self.push(Tok::Literal, line);
            }
            ("r", Some('#')) if self.peek(1).is_some_and(ident_start) => {
                self.bump();
                let name = self.word_at(0);
                self.pos += name.chars().count();
                self.push(Tok::Ident { name, raw: true }, line);
            }
            _ => self.push(ident(&word), line),
        }
        Ok(())
    }
}

/// A plain (not raw) identifier token.
fn ident(name: &str) -> Tok {
    Tok::Ident {
        name: name.to_string(),
        raw: false,
    }
}

/// The tokens of one file, with every delimiter paired so that a group can
/// be skipped in one step.
struct Lexed {
    path: String,
    toks: Vec<Token>,
    /// For an opening delimiter, the index of its closing one.
    close: Vec<usize>,
    /// For any token, the index of the closing delimiter of the innermost
    /// group around it (`toks.len()` at the top of the file).
    enclosing: Vec<usize>,
}

impl Lexed {
    /// Lexes `text` and pairs its delimiters.
    fn new(path: &str, text: &str) -> Result<Lexed, String> {
        let toks = Lexer::run(text)?;
        let n = toks.len();
        let mut close = vec![n; n];
        let mut parent = vec![None; n];
        let mut stack: Vec<usize> = Vec::new();
        for (i, t) in toks.iter().enumerate() {
            parent[i] = stack.last().copied();
            match t.tok {
                Tok::Open(_) => stack.push(i),
                Tok::Close(c) => {
                    let Some(open) = stack.pop() else {
                        return Err(format!("unmatched `{c}` at line {}", t.line));
                    };
                    let want = match toks[open].tok {
                        Tok::Open('(') => ')',
                        Tok::Open('[') => ']',
                        _ => '}',
                    };
                    if c != want {
                        return Err(format!(
                            "`{c}` at line {} closes the group opened at line {}",
                            t.line, toks[open].line
                        ));
                    }
                    close[open] = i;
                }
                _ => {}
            }
        }
        if let Some(&open) = stack.last() {
            return Err(format!("unclosed delimiter from line {}", toks[open].line));
        }
        let enclosing = parent.iter().map(|p| p.map_or(n, |o| close[o])).collect();
        Ok(Lexed {
            path: path.to_string(),
            toks,
            close,
            enclosing,
        })
    }

    /// Token `i`, if the file has that many.
    fn tok(&self, i: usize) -> Option<&Tok> {
        self.toks.get(i).map(|t| &t.tok)
    }

    /// Whether token `i` is the keyword or plain identifier `name`.
    fn is_word(&self, i: usize, name: &str) -> bool {
        matches!(self.tok(i), Some(Tok::Ident { name: n, raw: false }) if n == name)
    }

    /// The identifier at `i` (raw or not), if it is one.
    fn word(&self, i: usize) -> Option<&str> {
        match self.tok(i) {
            Some(Tok::Ident { name, .. }) => Some(name),
            _ => None,
        }
    }

    /// Whether token `i` is the punctuation character `c`.
    fn is_punct(&self, i: usize, c: char) -> bool {
        self.tok(i) == Some(&Tok::Punct(c))
    }

    /// Whether token `i` opens a group with `c`.
    fn is_open(&self, i: usize, c: char) -> bool {
        self.tok(i) == Some(&Tok::Open(c))
    }

    /// Whether token `i` is `::`.
    fn is_sep(&self, i: usize) -> bool {
        self.tok(i) == Some(&Tok::PathSep)
    }

    /// The line token `i` is on.
    fn line(&self, i: usize) -> usize {
        self.toks.get(i).map_or(0, |t| t.line)
    }
}

// ---------------------------------------------------------------------------
// `#[cfg(test)]` items
// ---------------------------------------------------------------------------

/// Whether the tokens inside `#[...]` are a `cfg` that holds only in tests:
/// `cfg(test)`, or `cfg(all(.., test, ..))`.
fn cfg_is_test(f: &Lexed, from: usize, to: usize) -> bool {
    let open = from + 1;
    f.is_word(from, "cfg")
        && f.is_open(open, '(')
        && f.close[open] + 1 == to
        && predicate_is_test(f, open + 1, f.close[open])
}

/// Whether the cfg predicate in `from..to` implies `test`.
fn predicate_is_test(f: &Lexed, from: usize, to: usize) -> bool {
    if to == from + 1 {
        return f.is_word(from, "test");
    }
    if f.is_word(from, "all") && f.is_open(from + 1, '(') && f.close[from + 1] + 1 == to {
        let mut start = from + 2;
        let end = f.close[from + 1];
        let mut i = start;
        while i <= end {
            if i == end || f.is_punct(i, ',') {
                if i > start && predicate_is_test(f, start, i) {
                    return true;
                }
                start = i + 1;
            } else if matches!(f.tok(i), Some(Tok::Open(_))) {
                i = f.close[i];
            }
            i += 1;
        }
    }
    false
}

/// The index just past the item or statement that starts at `i`, right
/// after a `#[cfg(test)]`: up to its `;`, or to the end of its body.
fn item_end(f: &Lexed, mut i: usize) -> usize {
    // Further attributes belong to the same item.
    while f.is_punct(i, '#') && f.is_open(i + 1, '[') {
        i = f.close[i + 1] + 1;
    }
    let start = i;
    let mut j = i;
    if f.is_word(j, "pub") {
        j += 1;
        if f.is_open(j, '(') {
            j = f.close[j] + 1;
        }
    }
    loop {
        let qualifier = ["default", "unsafe", "async", "extern"]
            .iter()
            .any(|q| f.is_word(j, q))
            || (f.is_word(j, "const")
                && ["fn", "unsafe", "async", "extern"]
                    .iter()
                    .any(|q| f.is_word(j + 1, q)));
        if !qualifier {
            break;
        }
        j += 1;
        if f.tok(j) == Some(&Tok::Literal) {
            j += 1; // the ABI of `extern "C"`
        }
    }
    if f.is_open(j, '{') {
        return f.close[j] + 1; // a block, `unsafe { }` or `extern "C" { }`
    }
    // These may hold a `{ }` before their `;` (a use group, a struct
    // literal), so only the `;` ends them; the others end with their body.
    let to_semicolon = ["use", "static", "const", "type", "let"];
    let to_body = [
        "fn",
        "struct",
        "enum",
        "union",
        "trait",
        "impl",
        "mod",
        "macro_rules",
        "crate", // `extern crate x;`
    ];
    if to_semicolon.iter().any(|k| f.is_word(j, k)) {
        scan_to_end(f, j, false)
    } else if to_body.iter().any(|k| f.is_word(j, k)) {
        scan_to_end(f, j, true)
    } else {
        statement_end(f, start)
    }
}

/// Walks from `i` over whole groups to the `;` that ends an item (consumed),
/// or to the first `{ }` group when `body` is set, or to the close of the
/// enclosing group (not consumed).
fn scan_to_end(f: &Lexed, mut i: usize, body: bool) -> usize {
    while let Some(t) = f.tok(i) {
        match t {
            Tok::Open('{') if body => return f.close[i] + 1,
            Tok::Open(_) => i = f.close[i] + 1,
            Tok::Punct(';') => return i + 1,
            Tok::Close(_) => return i,
            _ => i += 1,
        }
    }
    i
}

/// The end of something that is not an item (a block is handled before):
/// a field or variant (up to its `,`), a statement (up to its `;`), a match
/// arm with a block, or a macro invocation with braces.
fn statement_end(f: &Lexed, start: usize) -> usize {
    let mut i = start;
    while let Some(t) = f.tok(i) {
        match t {
            Tok::Open('{') if i > start && f.is_punct(i - 1, '!') => return f.close[i] + 1,
            Tok::Open(_) => i = f.close[i] + 1,
            Tok::Punct(';' | ',') => return i + 1,
            Tok::Close(_) => return i,
            Tok::Punct('=') if f.is_punct(i + 1, '>') && f.is_open(i + 2, '{') => {
                let end = f.close[i + 2] + 1;
                return if f.is_punct(end, ',') { end + 1 } else { end };
            }
            _ => i += 1,
        }
    }
    i
}

// ---------------------------------------------------------------------------
// Walking the crate
// ---------------------------------------------------------------------------

/// One segment of a path, with the line it is written on.
type Segment = (String, usize);

/// A reference from production code of top-level module `from` to the name
/// `name` at the crate root (a module, a re-export, or `*`).
struct RootRef {
    from: String,
    name: String,
    file: String,
    line: usize,
}

/// Where a module's code is, as the walk goes down.
struct Ctx {
    /// The module path of the code: `["a", "b"]` for `src/a/b.rs`.
    modpath: Vec<String>,
    /// Where the files of `mod x;` declared here live: `src/a/b` for
    /// `src/a/b.rs` and for an inline `mod b { }` in `src/a.rs`.
    dir: String,
}

impl Ctx {
    /// The context of the module `name` declared here.
    fn child(&self, name: &str) -> Ctx {
        let mut modpath = self.modpath.clone();
        modpath.push(name.to_string());
        Ctx {
            modpath,
            dir: format!("{}/{name}", self.dir),
        }
    }
}

/// Reads the crate from `src/lib.rs` down, collecting what `Scan` holds.
struct Walker<'r> {
    read: &'r dyn Fn(&str) -> Option<String>,
    modules: BTreeMap<String, String>,
    refs: Vec<RootRef>,
    /// Names the crate root's own `use` items bring in: (name, first segment).
    root_uses: Vec<(String, String)>,
    problems: Vec<String>,
}

/// What the walk found: the top-level modules, the edges between them with
/// every place each occurs, and source that could not be read.
#[derive(Debug, Default)]
struct Scan {
    /// Each top-level module and the file its code starts in.
    modules: BTreeMap<String, String>,
    /// (from, to) -> every `(file, line)` where `from` refers to `to`.
    edges: BTreeMap<(String, String), BTreeSet<(String, usize)>>,
    problems: Vec<String>,
}

/// Reads the library from `src/lib.rs` (paths are relative to the crate
/// root, as `read` takes them) and returns its module graph.
fn scan_crate(read: &dyn Fn(&str) -> Option<String>) -> Scan {
    let mut w = Walker {
        read,
        modules: BTreeMap::new(),
        refs: Vec::new(),
        root_uses: Vec::new(),
        problems: Vec::new(),
    };
    let root = Ctx {
        modpath: Vec::new(),
        dir: "src".to_string(),
    };
    match read("src/lib.rs") {
        Some(text) => w.file("src/lib.rs", &text, &root),
        None => w.problems.push("src/lib.rs cannot be read".to_string()),
    }
    w.finish()
}

impl Walker<'_> {
    /// Lexes one file and reads it as the module `ctx`.
    fn file(&mut self, path: &str, text: &str, ctx: &Ctx) {
        match Lexed::new(path, text) {
            Ok(f) => self.items(&f, 0, f.toks.len(), ctx),
            Err(e) => self.problems.push(format!("{path}: {e}")),
        }
    }

    /// Reads the tokens `i..end` of `f`, which are code of module `ctx`.
    fn items(&mut self, f: &Lexed, mut i: usize, end: usize, ctx: &Ctx) {
        while i < end {
            if f.is_punct(i, '#') {
                let inner = f.is_punct(i + 1, '!');
                let open = i + 1 + usize::from(inner);
                if f.is_open(open, '[') && cfg_is_test(f, open + 1, f.close[open]) {
                    // `#![cfg(test)]` makes the rest of its module or block
                    // test-only; `#[cfg(test)]` the one item after it.
                    i = if inner {
                        f.enclosing[i]
                    } else {
                        item_end(f, f.close[open] + 1)
                    };
                    continue;
                }
                // Other attributes are read on: a path in a derive is a use.
                i += 1;
            } else if f.is_word(i, "mod") {
                i = self.module(f, i, ctx);
            } else if f.is_word(i, "use") {
                let mut leaves = Vec::new();
                i = use_tree(f, i + 1, Vec::new(), &mut leaves);
                for (segments, alias) in leaves {
                    if ctx.modpath.is_empty() {
                        self.root_use(&segments, alias);
                    } else {
                        self.reference(f, ctx, &segments);
                    }
                }
            } else if ["crate", "super", "self"].iter().any(|k| f.is_word(i, k)) && f.is_sep(i + 1)
            {
                let mut segments = vec![(f.word(i).unwrap_or("").to_string(), f.line(i))];
                let mut j = i + 1;
                while f.is_sep(j) {
                    let Some(name) = f.word(j + 1) else { break };
                    segments.push((name.to_string(), f.line(j + 1)));
                    j += 2;
                }
                self.reference(f, ctx, &segments);
                i = j;
            } else {
                i += 1;
            }
        }
    }

    /// `mod name;` (read its file) or `mod name { .. }` (read its body); `i`
    /// is at `mod`. Returns where to read on.
    fn module(&mut self, f: &Lexed, i: usize, ctx: &Ctx) -> usize {
        let Some(name) = f.word(i + 1).map(str::to_string) else {
            return i + 1;
        };
        let child = ctx.child(&name);
        if f.is_open(i + 2, '{') {
            if ctx.modpath.is_empty() {
                self.modules.insert(name, f.path.clone());
            }
            let close = f.close[i + 2];
            self.items(f, i + 3, close, &child);
            return close + 1;
        }
        if !f.is_punct(i + 2, ';') {
            return i + 1;
        }
        let flat = format!("{}/{name}.rs", ctx.dir);
        let nested = format!("{}/{name}/mod.rs", ctx.dir);
        let found = match ((self.read)(&flat), (self.read)(&nested)) {
            (Some(text), None) => Some((flat, text)),
            (None, Some(text)) => Some((nested, text)),
            (Some(_), Some(_)) => {
                self.problems.push(format!(
                    "{}:{}: module `{name}` has two files, {flat} and {nested}",
                    f.path,
                    f.line(i)
                ));
                None
            }
            (None, None) => {
                self.problems.push(format!(
                    "{}:{}: module `{name}` has no file ({flat} or {nested})",
                    f.path,
                    f.line(i)
                ));
                None
            }
        };
        if let Some((path, text)) = found {
            if ctx.modpath.is_empty() {
                self.modules.insert(name, path.clone());
            }
            self.file(&path, &text, &child);
        }
        i + 3
    }

    /// Records a path written in module `ctx`, if it names something at the
    /// crate root from inside a top-level module. Code of the crate root
    /// itself belongs to no layer.
    fn reference(&mut self, f: &Lexed, ctx: &Ctx, segments: &[Segment]) {
        let Some(from) = ctx.modpath.first() else {
            return;
        };
        if let Some((name, line)) = resolve(&ctx.modpath, segments) {
            self.refs.push(RootRef {
                from: from.clone(),
                name,
                file: f.path.clone(),
                line,
            });
        }
    }

    /// A `use` of the crate root: `use x::Y;` makes `crate::Y` mean module
    /// `x` to the rest of the crate.
    fn root_use(&mut self, segments: &[Segment], alias: Option<String>) {
        let mut names: Vec<&str> = segments.iter().map(|(s, _)| s.as_str()).collect();
        if matches!(names.first(), Some(&"crate" | &"self")) {
            names.remove(0);
        }
        if names.last() == Some(&"self") {
            names.pop();
        }
        let (Some(first), Some(last)) = (names.first(), names.last()) else {
            return;
        };
        if *last != "*" {
            let visible = alias.unwrap_or_else(|| last.to_string());
            self.root_uses.push((visible, first.to_string()));
        }
    }

    /// Turns the references into edges between top-level modules.
    fn finish(mut self) -> Scan {
        let mut edges: BTreeMap<(String, String), BTreeSet<(String, usize)>> = BTreeMap::new();
        let reexports: BTreeMap<&str, &str> = self
            .root_uses
            .iter()
            .filter(|(name, first)| {
                self.modules.contains_key(first) && !self.modules.contains_key(name)
            })
            .map(|(name, first)| (name.as_str(), first.as_str()))
            .collect();
        for r in &self.refs {
            let to = if self.modules.contains_key(&r.name) {
                r.name.as_str()
            } else if let Some(to) = reexports.get(r.name.as_str()) {
                to
            } else {
                if r.name == "*" {
                    self.problems.push(format!(
                        "{}:{}: a glob import of the crate root hides which modules `{}` uses; \
                         name them",
                        r.file, r.line, r.from
                    ));
                }
                // Anything else at the root (an item of lib.rs, an external
                // crate re-exported there) is no layer.
                continue;
            };
            if to != r.from {
                edges
                    .entry((r.from.clone(), to.to_string()))
                    .or_default()
                    .insert((r.file.clone(), r.line));
            }
        }
        Scan {
            modules: self.modules,
            edges,
            problems: self.problems,
        }
    }
}

/// Reads a use tree from `i` (`a::b::{c, d::*}`, `x as y`, `{self, z}`), adding
/// each leaf path, prefixed by `prefix`, with its alias to `out`. Returns the
/// index past the tree and its `;` if that follows.
fn use_tree(
    f: &Lexed,
    mut i: usize,
    mut prefix: Vec<Segment>,
    out: &mut Vec<(Vec<Segment>, Option<String>)>,
) -> usize {
    loop {
        match f.tok(i) {
            // A leading `::` names an external crate, never this one.
            Some(Tok::PathSep) => {
                prefix.push(("::".to_string(), f.line(i)));
                i += 1;
            }
            Some(Tok::Ident { name, .. }) => {
                prefix.push((name.clone(), f.line(i)));
                i += 1;
                if f.is_sep(i) {
                    i += 1;
                    continue;
                }
                let mut alias = None;
                if f.is_word(i, "as") {
                    alias = f.word(i + 1).map(str::to_string);
                    i += 2;
                }
                out.push((prefix, alias));
                break;
            }
            Some(Tok::Punct('*')) => {
                prefix.push(("*".to_string(), f.line(i)));
                out.push((prefix, None));
                i += 1;
                break;
            }
            Some(Tok::Open('{')) => {
                let close = f.close[i];
                let mut j = i + 1;
                while j < close {
                    let next = use_tree(f, j, prefix.clone(), out);
                    j = if f.is_punct(next, ',') {
                        next + 1
                    } else if next > j {
                        next
                    } else {
                        close // not a use tree; leave it to the item scan
                    };
                }
                i = close + 1;
                break;
            }
            _ => break,
        }
    }
    if f.is_punct(i, ';') {
        i + 1
    } else {
        i
    }
}

/// Where a path written in module `modpath` lands at the crate root: the
/// name right after `crate::`, or after the `super::`s that climb out of the
/// top-level module, with the line of that name. `None` for paths that stay
/// inside the module or leave the crate.
fn resolve(modpath: &[String], segments: &[Segment]) -> Option<(String, usize)> {
    let names: Vec<&str> = segments.iter().map(|(s, _)| s.as_str()).collect();
    let at = |k: usize| segments.get(k).map(|(s, l)| (s.clone(), *l));
    if names.first() == Some(&"crate") {
        return at(1).filter(|(s, _)| s != "self");
    }
    let mut k = usize::from(names.first() == Some(&"self"));
    let mut depth = modpath.len();
    let mut climbed = false;
    while names.get(k) == Some(&"super") {
        depth = depth.checked_sub(1)?;
        climbed = true;
        k += 1;
    }
    if climbed && depth == 0 {
        at(k).filter(|(s, _)| s != "self")
    } else {
        None
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
    match rows.get(1) {
        Some((_, sep)) if is_separator(sep) => {}
        _ => {
            problems.push(format!(
                "{TABLE}:{}: the layer table needs a header line and a `|---|` line",
                begin + 1
            ));
            return (layers, problems);
        }
    }
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for &(n, row) in &rows[2..] {
        let Some([number, name, modules]) = first_cells(row) else {
            problems.push(format!("{TABLE}:{n}: a layer row needs at least 3 cells"));
            continue;
        };
        let Ok(number) = number.trim().parse::<u32>() else {
            problems.push(format!(
                "{TABLE}:{n}: layer number `{}` is not a number",
                number.trim()
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
                .filter(|c| !c.is_empty() && c.chars().all(ident_continue));
            match bare {
                Some(m) => match seen.insert(m.to_string(), number) {
                    Some(first) => problems.push(format!(
                        "{TABLE}:{n}: module `{m}` is listed twice (layers {first} and {number})"
                    )),
                    None => names.push(m.to_string()),
                },
                None if cell.is_empty() && modules.trim().is_empty() => {
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
    /// Modules missing from the table or unknown to `src/lib.rs`, and
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
            ("the layer table and the modules of src/lib.rs", &self.table),
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
        for c in cycles {
            found.cycles.push(c.join(" -> "));
        }
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
            found
                .table
                .push(format!("module `{module}` ({file}) is in no layer"));
        }
    }
    for module in layer_of.keys() {
        if !scan.modules.contains_key(*module) {
            found.table.push(format!(
                "`{module}` is in the table but is no module of src/lib.rs"
            ));
        }
    }
    for ((from, to), places) in &scan.edges {
        let (Some(&a), Some(&b)) = (layer_of.get(from.as_str()), layer_of.get(to.as_str())) else {
            continue; // reported above as a module in no layer
        };
        if b >= a {
            let places: Vec<String> = places.iter().map(|(f, l)| format!("{f}:{l}")).collect();
            found.edges.push(format!(
                "{from} (layer {a}) -> {to} (layer {b}): {}",
                places.join(", ")
            ));
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
// The check of the real tree
// ---------------------------------------------------------------------------

#[test]
fn top_level_modules_follow_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scan = scan_crate(&|path: &str| std::fs::read_to_string(root.join(path)).ok());
    let table = std::fs::read_to_string(root.join(TABLE))
        .map_err(|e| format!("{TABLE} cannot be read: {e}"));
    let found = judge(&scan, table.as_deref().map_err(Clone::clone));
    assert!(found.is_empty(), "{found}");
}

// ---------------------------------------------------------------------------
// Tests of the checker itself
// ---------------------------------------------------------------------------

/// Scans an in-memory crate of `(path, text)` files.
fn scan_of<P: AsRef<str>, T: AsRef<str>>(files: &[(P, T)]) -> Scan {
    let files: BTreeMap<&str, &str> = files
        .iter()
        .map(|(p, t)| (p.as_ref(), t.as_ref()))
        .collect();
    scan_crate(&|path: &str| files.get(path).map(|t| t.to_string()))
}

/// The edges of an in-memory crate as `from -> to @ file:line` lines, after
/// checking that it had no source problems.
fn edges_of<P: AsRef<str>, T: AsRef<str>>(files: &[(P, T)]) -> Vec<String> {
    let scan = scan_of(files);
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

#[test]
fn grouped_and_nested_use() {
    let edges = edges_of(&crate_with_a(
        "use crate::{b::X, c::{Y, z::{Z as W, self}}, d, e::*};\nuse std::fmt;\n",
    ));
    assert_eq!(
        edges,
        [
            "a -> b @ src/a.rs:1",
            "a -> c @ src/a.rs:1",
            "a -> d @ src/a.rs:1",
            "a -> e @ src/a.rs:1",
        ]
    );
}

#[test]
fn multi_line_use_reports_the_line_of_each_module() {
    let edges = edges_of(&crate_with_a(
        "pub use crate::{\n    b::X,\n    c::{\n        Y,\n    },\n};\n\
         pub(crate) use crate::d;\npub(super) use crate::e::E as _;\n",
    ));
    assert_eq!(
        edges,
        [
            "a -> b @ src/a.rs:2",
            "a -> c @ src/a.rs:3",
            "a -> d @ src/a.rs:7",
            "a -> e @ src/a.rs:8",
        ]
    );
}

#[test]
fn inline_paths_count_anywhere_in_code() {
    let edges = edges_of(&crate_with_a(
        "pub fn f(x: crate::b::T) -> crate::c::U {\n\
         let s = crate::d::S { x: 1 };\n\
         println!(\"{}\", crate::e::NAME);\n\
         <crate::f::G as Tr>::go();\n\
         crate::g::h::<u8>()\n\
         }\n\
         #[derive(crate::h::Derive)]\n\
         struct T;\n\
         macro_rules! m { () => { $crate::i::x() }; }\n\
         pub fn own() { crate::a::inner(); self::inner(); }\n",
    ));
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
        ]
    );
}

#[test]
fn super_chains_that_reach_the_crate_root() {
    let edges = edges_of(&[
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
    ]);
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
fn comments_strings_and_doc_links_are_not_edges() {
    let edges = edges_of(&crate_with_a(
        "//! Uses [`crate::b`] in prose.\n\
         /// See [`crate::c::X`].\n\
         // use crate::d;\n\
         /* crate::e /* nested crate::e */ still a comment crate::e */\n\
         /** crate::e */\n\
         const S: &str = \"crate::f \\\" crate::f\";\n\
         const R: &str = r#\"crate::g \" crate::g\"#;\n\
         const B: &[u8] = b\"crate::h\";\n\
         const Q: char = '\"'; fn real() { crate::i::x() }\n\
         fn life<'a>(x: &'a str) -> &'a str { crate::j::f(x) }\n\
         const E: char = '\\''; const L: u8 = b'\\\\'; fn k() { crate::k::y() }\n\
         const BR: &[u8] = br##\"crate::h \"# crate::h\"##;\n\
         const P: &str = r\"C:\\\"; fn l() { crate::l::x() } const N: &str = \"crate::h\";\n\
         const DQ: char = '\\\"'; fn m() { crate::m::x() } const O: &str = \"crate::h\";\n",
    ));
    assert_eq!(
        edges,
        [
            "a -> i @ src/a.rs:9",
            "a -> j @ src/a.rs:10",
            "a -> k @ src/a.rs:11",
            "a -> l @ src/a.rs:13",
            "a -> m @ src/a.rs:14",
        ]
    );
}

#[test]
fn cfg_test_inline_module_is_not_production() {
    let edges = edges_of(&crate_with_a(
        "fn f() {}\n\
         #[cfg(test)]\n\
         mod tests {\n    use crate::b;\n    fn t() { crate::c::f(); { crate::d::g(); } }\n}\n\
         use crate::e;\n",
    ));
    assert_eq!(edges, ["a -> e @ src/a.rs:7"]);
}

#[test]
fn cfg_test_module_file_is_skipped() {
    for tests_file in ["src/r/tests.rs", "src/r/tests/mod.rs"] {
        let lib = ("src/lib.rs", "pub mod r;\npub mod x;\npub mod y;\n");
        let x = ("src/x.rs", "");
        let y = ("src/y.rs", "");
        let tests = (tests_file, "use crate::x;\n");
        let gated = ("src/r/mod.rs", "#[cfg(test)]\nmod tests;\nuse crate::y;\n");
        assert_eq!(
            edges_of(&[lib, x, y, tests, gated]),
            ["r -> y @ src/r/mod.rs:3"],
            "{tests_file}"
        );
        // The same file without the gate is production code, and is read.
        let plain = ("src/r/mod.rs", "mod tests;\nuse crate::y;\n");
        assert_eq!(
            edges_of(&[lib, x, y, tests, plain]),
            [
                format!("r -> x @ {tests_file}:1"),
                "r -> y @ src/r/mod.rs:2".to_string()
            ],
            "{tests_file}"
        );
    }
}

#[test]
fn cfg_test_single_items_are_skipped() {
    // Each gated item is followed at once by production code, which a skip
    // that runs too far would swallow.
    let edges = edges_of(&crate_with_a(
        "#[cfg(test)]\nuse crate::b;\nuse crate::n::One;\n\
         #[cfg(test)]\n#[allow(dead_code)]\npub(crate) fn helper() -> [u8; 2] { crate::c::f() }\n\
         fn prod() { crate::o::p() }\n\
         #[cfg(all(unix, test))]\nimpl X { fn f() { crate::d::g(); } }\n\
         #[cfg(test)]\nconst T: Foo = Foo { x: 1 }.with(crate::g::X);\nconst U: u8 = crate::p::U;\n\
         #[cfg(test)]\nextern \"C\" { fn probe(x: crate::q::T); }\nfn after() { crate::r::x() }\n\
         struct S {\n    #[cfg(test)]\n    probe: crate::h::Probe,\n    real: crate::i::Real,\n}\n\
         fn body(x: u8) {\n    #[cfg(test)]\n    crate::j::only_in_tests();\n    crate::k::always();\n\
         #[cfg(test)]\n    { crate::s::block(); }\n    crate::t::after_block();\n\
         #[cfg(test)]\n    check! { crate::u::x }\n    crate::v::after_macro();\n\
         match x {\n        #[cfg(test)]\n        0 => { crate::w::arm() }\n\
         _ => crate::x::other(),\n    }\n}\n\
         #[cfg(not(test))]\nuse crate::e;\n\
         #[cfg(any(test, feature = \"x\"))]\nuse crate::f;\n",
    ));
    assert_eq!(
        edges,
        [
            "a -> e @ src/a.rs:38",
            "a -> f @ src/a.rs:40",
            "a -> i @ src/a.rs:19",
            "a -> k @ src/a.rs:24",
            "a -> n @ src/a.rs:3",
            "a -> o @ src/a.rs:7",
            "a -> p @ src/a.rs:12",
            "a -> r @ src/a.rs:15",
            "a -> t @ src/a.rs:27",
            "a -> v @ src/a.rs:30",
            "a -> x @ src/a.rs:34",
        ]
    );
}

#[test]
fn inner_cfg_test_gates_its_file_module_or_block() {
    let edges = edges_of(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "#![cfg(test)]\nuse crate::b;\n"),
        (
            "src/b.rs",
            "mod m {\n    #![cfg(test)]\n    use crate::a;\n}\nuse crate::c;\n",
        ),
        (
            "src/c.rs",
            "fn f() {\n    #![cfg(test)]\n    crate::a::x();\n}\nuse crate::b;\n",
        ),
    ]);
    assert_eq!(edges, ["b -> c @ src/b.rs:5", "c -> b @ src/c.rs:5"]);
}

#[test]
fn names_re_exported_at_the_crate_root_point_to_their_module() {
    let edges = edges_of(&[
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
    ]);
    assert_eq!(edges, ["a -> b @ src/a.rs:1", "a -> c @ src/a.rs:2"]);
}

#[test]
fn glob_of_the_crate_root_and_bad_source_are_reported() {
    let scan = scan_of(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod gone;\n"),
        ("src/a.rs", "use super::*;\n"),
        ("src/b.rs", "fn f() { \"open\n"),
    ]);
    assert_eq!(
        scan.problems,
        [
            "src/b.rs: unterminated string from line 1",
            "src/lib.rs:3: module `gone` has no file (src/gone.rs or src/gone/mod.rs)",
            "src/a.rs:1: a glob import of the crate root hides which modules `a` uses; name them",
        ]
    );
}

#[test]
fn raw_identifiers_are_not_keywords() {
    // `r#mod` and `r#use` are names: were `r#mod` the keyword, the macro
    // input below would send the walk looking for `src/a/helper.rs`.
    let edges = edges_of(&crate_with_a(
        "fn f() { m!(r#mod helper;); r#use(crate::b::X); }\n",
    ));
    assert_eq!(edges, ["a -> b @ src/a.rs:1"]);
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
        modules: modules.iter().map(|m| m.to_string()).collect(),
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
