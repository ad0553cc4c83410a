//! `docs/migration.md`'s `## Every key` held to the translation: every key
//! of `tests/data/debezium-keys.txt` (Debezium's, Kafka Connect's and
//! Debezium Server's) and every key the translation code names has a row,
//! and each fixture key, set in a minimal valid configuration, is treated
//! as its row says: honoured (translated, not warned about), ignored
//! (warned about), refused (the translation fails naming it), or honoured
//! or ignored at some values and refused at others.
//!
//! Owns nothing but this check. The code's keys come from its const tables
//! and from scanning its source text (the keys passed to `take*` and
//! friends), so a key added to the translation without a row fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::connector::{DEFAULT_ONLY_CONNECTOR_KEYS, IGNORED_CONNECTOR_KEYS};
use super::errors::{IGNORED_ERRORS_KEYS, IGNORED_ERRORS_PREFIXES};
use super::producer::{PRODUCER_DEFAULT_ONLY, PRODUCER_IGNORED, PRODUCER_RENAMED, PRODUCER_SAME};
use super::tests::data_props;
use super::{from_connect, Translation, IGNORED_WORKER_PREFIXES};
use crate::chain::DisplayChain;
use crate::config::debezium_server::from_server_text;
use crate::config::ConfigError;

const DOC: &str = include_str!("../../../docs/migration.md");
const FIXTURE: &str = include_str!("../../../tests/data/debezium-keys.txt");
const SERVER_BASE: &str = include_str!("../../../tests/data/debezium/application.properties");

/// The translation's source files, each with the prefixes its keys carry
/// in the rows (a producer key `acks` is the row `producer.acks`).
const SOURCES: &[(&str, &str, &[&str])] = &[
    ("mod.rs", include_str!("mod.rs"), &[""]),
    (
        "connector.rs",
        include_str!("connector.rs"),
        &["", "debezium.source."],
    ),
    (
        "errors.rs",
        include_str!("errors.rs"),
        &["", "debezium.source."],
    ),
    (
        "exactly_once.rs",
        include_str!("exactly_once.rs"),
        &["", "producer.", "producer.override.", "debezium.source."],
    ),
    ("producer.rs", include_str!("producer.rs"), &["producer."]),
    ("keystores.rs", include_str!("keystores.rs"), &["producer."]),
    (
        "converters.rs",
        include_str!("converters.rs"),
        &[
            "",
            "key.converter.",
            "value.converter.",
            "header.converter.",
        ],
    ),
    (
        "transforms.rs",
        include_str!("transforms.rs"),
        &[
            "",
            "transforms.<router>.",
            "transforms.<decode>.",
            "transforms.<before>.",
        ],
    ),
    (
        "event_router.rs",
        include_str!("event_router.rs"),
        &["transforms.<router>."],
    ),
    ("providers.rs", include_str!("providers.rs"), &[""]),
    (
        "debezium_server.rs",
        include_str!("../debezium_server.rs"),
        &[
            "",
            "debezium.",
            "debezium.format.",
            "debezium.source.",
            "debezium.sink.kafka.producer.",
            "transforms.<router>.",
        ],
    ),
    (
        "router/config.rs",
        include_str!("../../../core/src/router/config.rs"),
        &["transforms.<router>."],
    ),
];

/// Literals the scan of `SOURCES` finds that are not configuration keys:
/// (file, literal, what it is).
const NOT_KEYS: &[(&str, &str, &str)] = &[
    ("producer.rs", "username", "an option of the JAAS line"),
    ("producer.rs", "password", "an option of the JAAS line"),
    (
        "producer.rs",
        "sasl",
        "the start of a security.protocol value",
    ),
    (
        "keystores.rs",
        "ssl.ca.pem",
        "a librdkafka property walrelay sets",
    ),
];

/// What a row says walrelay does with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Treatment {
    Honoured,
    Ignored,
    Refused,
    /// Honoured (or at its default) at the values the row names, refused
    /// at others.
    HonouredAt,
    /// Ignored at the values the row names, refused at others.
    IgnoredAt,
}

impl Treatment {
    fn parse(cell: &str) -> Option<Self> {
        let text = cell.replace(['*', '`'], "").trim().to_ascii_lowercase();
        [
            ("honoured at", Treatment::HonouredAt),
            ("ignored at", Treatment::IgnoredAt),
            ("honoured", Treatment::Honoured),
            ("ignored", Treatment::Ignored),
            ("refused", Treatment::Refused),
        ]
        .into_iter()
        .find(|(word, _)| text.starts_with(word))
        .map(|(_, t)| t)
    }
}

/// One row of `## Every key`.
#[derive(Debug)]
struct Row {
    treatment: Treatment,
    line: usize,
}

/// The rows of `## Every key`, by key (a row may name several keys).
fn doc_rows() -> BTreeMap<String, Row> {
    let start = DOC
        .find("\n## Every key\n")
        .expect("docs/migration.md has a `## Every key` section");
    let mut rows = BTreeMap::new();
    let first_line = DOC[..start].lines().count() + 1;
    for (i, line) in DOC[start + 1..].lines().enumerate().skip(1) {
        let line_no = first_line + i;
        if line.starts_with("## ") {
            break;
        }
        let Some(inner) = line.trim().strip_prefix('|') else {
            continue;
        };
        let cells: Vec<&str> = inner.split('|').map(str::trim).collect();
        if cells.len() < 3 || cells[0] == "Key" || cells[0].starts_with("---") {
            continue;
        }
        let treatment = Treatment::parse(cells[1]).unwrap_or_else(|| {
            panic!(
                "docs/migration.md:{line_no}: the treatment {:?} is none of honoured, ignored, \
                 refused, honoured at ..., ignored at ...",
                cells[1]
            )
        });
        let keys: Vec<&str> = cells[0].split('`').skip(1).step_by(2).collect();
        assert!(
            !keys.is_empty(),
            "docs/migration.md:{line_no}: no `key` in the first cell"
        );
        for key in keys {
            let old = rows.insert(
                key.to_owned(),
                Row {
                    treatment,
                    line: line_no,
                },
            );
            if let Some(old) = old {
                panic!(
                    "docs/migration.md:{line_no}: {key} already has a row (line {})",
                    old.line
                );
            }
        }
    }
    rows
}

/// Which file a fixture key goes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum File {
    Connector,
    Worker,
    Server,
}

/// One line of the fixture.
#[derive(Debug)]
struct Entry {
    key: String,
    file: File,
    exactly_once: bool,
    /// The value tried (for a family: `concrete.key=value`).
    tried: String,
    refused: Option<String>,
    setup: Vec<(String, String)>,
    line: usize,
}

fn split_pair(text: &str) -> (String, String) {
    match text.split_once('=') {
        Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
        None => (text.trim().to_owned(), String::new()),
    }
}

fn fixture() -> Vec<Entry> {
    let mut entries = Vec::new();
    let (mut file, mut exactly_once) = (None, false);
    for (i, raw) in FIXTURE.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let mut parts = section.split(',').map(str::trim);
            file = Some(match parts.next() {
                Some("connector") => File::Connector,
                Some("worker") => File::Worker,
                Some("server") => File::Server,
                other => panic!("debezium-keys.txt:{}: unknown section {other:?}", i + 1),
            });
            exactly_once = parts.next() == Some("exactly-once");
            continue;
        }
        let file = file.unwrap_or_else(|| panic!("debezium-keys.txt:{}: no section", i + 1));
        let (key, sample) = match line.split_once(" = ") {
            Some((k, s)) => (k.trim(), Some(s)),
            None => (line, None),
        };
        let mut fields = sample.unwrap_or("1").split('|').map(str::trim);
        let tried = fields.next().unwrap_or_default().to_owned();
        let refused = fields.next().filter(|r| !r.is_empty()).map(str::to_owned);
        let setup = fields
            .next()
            .map(|s| s.split(", ").map(split_pair).collect())
            .unwrap_or_default();
        entries.push(Entry {
            key: key.to_owned(),
            file,
            exactly_once,
            tried,
            refused,
            setup,
            line: i + 1,
        });
    }
    entries
}

/// The fixture's stand-ins for the names a user chooses.
fn concrete(text: &str) -> String {
    let named = text
        .replace("<router>", "outbox")
        .replace("<decode>", "decode")
        .replace("<provider>", "file")
        .replace("<profile>", "dev");
    // Any other `<alias>` (a transform after the router) is its own name.
    named.replace(['<', '>'], "")
}

/// The key and value a fixture entry sets for `value`.
fn setting(entry: &Entry, value: &str) -> (String, String) {
    if entry.key.ends_with('*') {
        split_pair(value)
    } else {
        (entry.key.clone(), value.to_owned())
    }
}

/// Translates the minimal configuration of `tests/data/debezium` with the
/// entry's setup and `key=value` added.
fn translate(entry: &Entry, key: &str, value: &str) -> Result<Translation, ConfigError> {
    let key = concrete(key);
    let mut settings: Vec<(String, String)> = entry
        .setup
        .iter()
        .map(|(k, v)| (concrete(k), v.clone()))
        .collect();
    if entry.file == File::Connector && key.starts_with("transforms.decode.") {
        settings.insert(0, ("transforms".into(), "decode,outbox".into()));
        settings.insert(
            1,
            (
                "transforms.decode.type".into(),
                "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent"
                    .into(),
            ),
        );
    }
    settings.push((key, value.to_owned()));
    match entry.file {
        File::Server => {
            let mut text = SERVER_BASE.to_owned();
            for (k, v) in settings {
                text.push_str(&format!("\n{k}={v}"));
            }
            let env = |name: &str| (name == "PG_HOST").then(|| "db.internal".to_owned());
            from_server_text(&text, Path::new("application.properties"), &env)
        }
        File::Connector | File::Worker => {
            let mut worker = data_props("connect-standalone.properties");
            let mut connector = data_props("outbox-connector.properties");
            if entry.exactly_once {
                worker.insert("exactly.once.source.support".into(), "enabled".into());
            }
            let map = if entry.file == File::Worker {
                &mut worker
            } else {
                &mut connector
            };
            map.extend(settings);
            from_connect(worker, connector, Path::new("w"), Path::new("c"))
        }
    }
}

/// Whether an error's text names `key`: whole, or, for a transform's
/// option, as the transform's key and the option's name.
fn names(text: &str, key: &str) -> bool {
    if text.contains(key) {
        return true;
    }
    let Some(rest) = key
        .strip_prefix("debezium.transforms.")
        .or_else(|| key.strip_prefix("transforms."))
    else {
        return false;
    };
    let Some((name, option)) = rest.split_once('.') else {
        return false;
    };
    let transform = &key[..key.len() - rest.len() + name.len()];
    text.contains(&format!("{transform}: {option} "))
}

/// Why translating `key=value` does not come out as `expected` (`None`
/// when it does).
fn mismatch(entry: &Entry, value: &str, expected: Treatment) -> Option<String> {
    let (key, value) = setting(entry, value);
    let shown = concrete(&key);
    let outcome = translate(entry, &key, &value);
    let got = match &outcome {
        Ok(t) if t.ignored(&shown) => "ignored".to_owned(),
        Ok(_) => "honoured".to_owned(),
        Err(e) => {
            let text = DisplayChain(e).to_string();
            if names(&text, &shown) {
                "refused".to_owned()
            } else {
                format!("refused without naming the key ({text})")
            }
        }
    };
    let ok = match expected {
        Treatment::Honoured => got == "honoured",
        Treatment::Ignored => got == "ignored",
        Treatment::Refused => got == "refused",
        Treatment::HonouredAt => got == "honoured" || got == "ignored",
        Treatment::IgnoredAt => unreachable!("split into ignored and refused"),
    };
    (!ok).then(|| format!("{shown}={value:?}: expected {expected:?}, got {got}"))
}

/// Every way the entry's row disagrees with the translation.
fn behaviour(entry: &Entry, row: &Row) -> Vec<String> {
    let mut problems = Vec::new();
    let accepted = match row.treatment {
        Treatment::IgnoredAt => Treatment::Ignored,
        t => t,
    };
    problems.extend(mismatch(entry, &entry.tried, accepted));
    match (&entry.refused, row.treatment) {
        (Some(refused), _) => problems.extend(mismatch(entry, refused, Treatment::Refused)),
        (None, Treatment::HonouredAt | Treatment::IgnoredAt) => problems.push(
            "the row names values it refuses, but the fixture gives no refused value to try"
                .to_owned(),
        ),
        (None, _) => {}
    }
    problems
}

#[test]
fn every_fixture_key_has_a_row_that_says_what_the_translation_does() {
    let rows = doc_rows();
    let entries = fixture();
    let mut problems = Vec::new();
    // Each entry translates one to three configurations; spread them over
    // threads.
    let found: Vec<Vec<String>> = std::thread::scope(|scope| {
        let chunk = entries.len().div_ceil(4);
        let handles: Vec<_> = entries
            .chunks(chunk)
            .map(|part| {
                let rows = &rows;
                scope.spawn(move || {
                    part.iter()
                        .map(|e| {
                            rows.get(&e.key)
                                .map(|r| behaviour(e, r))
                                .unwrap_or_default()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a behaviour check panicked"))
            .collect()
    });
    for (entry, found) in entries.iter().zip(found) {
        let at = format!("debezium-keys.txt:{} {}", entry.line, entry.key);
        let Some(row) = rows.get(&entry.key) else {
            problems.push(format!(
                "{at}: no row in docs/migration.md's `## Every key`"
            ));
            continue;
        };
        for p in found {
            problems.push(format!("{at} (docs/migration.md:{}): {p}", row.line));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// The first string literal of each line of the const table `name` in
/// `src` (`("key", ...)` tuples or plain `"key",` entries).
fn table_keys(src: &str, name: &str) -> Vec<String> {
    let start = src
        .find(&format!("const {name}: "))
        .unwrap_or_else(|| panic!("no const {name}"));
    let body = &src[start..];
    let end = body
        .find("\n];")
        .unwrap_or_else(|| panic!("{name} is not a table"));
    body[..end]
        .lines()
        .skip(1)
        .filter_map(|line| {
            let line = line.trim().trim_start_matches('(');
            let rest = line.strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_owned())
        })
        .collect()
}

/// Whether `s` is spelled like a configuration key or key prefix.
fn looks_like_key(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !s.starts_with("io.")
        && !s.starts_with("org.")
}

/// The string literals of `src` passed to the calls that read a key, in
/// `for _ in [...]` lists, and the one-line `&str` consts holding a dotted
/// key.
fn scanned_keys(src: &str) -> BTreeSet<String> {
    // The unit tests' literals are values, not keys the translation reads.
    let src = src.split("\n#[cfg(test)]\nmod tests").next().unwrap_or(src);
    let mut keys = BTreeSet::new();
    let literal_after = |text: &str| -> Option<String> {
        let rest = text.strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_owned())
    };
    for call in [
        "take(",
        "take_raw(",
        "take_required(",
        "take_bool(",
        "take_u64(",
        "take_prefixed(",
        "remove(",
        "contains_key(",
        "name(",
        "starts_with(",
        "key == ",
        "bool_of(&mut f, ",
    ] {
        for (i, _) in src.match_indices(call) {
            keys.extend(literal_after(src[i + call.len()..].trim_start()));
        }
    }
    for (i, _) in src.match_indices(" in [") {
        let list = &src[i + 5..];
        let mut depth = 1;
        let end = list
            .char_indices()
            .find(|(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(list.len(), |(j, _)| j);
        keys.extend(list[..end].split('"').skip(1).step_by(2).map(str::to_owned));
    }
    for line in src.lines() {
        let line = line.trim();
        if let Some(rest) = line
            .strip_prefix("const ")
            .or_else(|| line.strip_prefix("pub const "))
        {
            if let Some((_, value)) = rest.split_once(": &str = ") {
                if let Some(v) = literal_after(value) {
                    if v.contains('.') && value.ends_with("\";") {
                        keys.insert(v);
                    }
                }
            }
        }
    }
    keys.retain(|k| looks_like_key(k));
    keys
}

#[test]
fn every_key_the_translation_names_has_a_row() {
    let rows = doc_rows();
    let connector_src = include_str!("connector.rs");
    let server_src = include_str!("../debezium_server.rs");
    let mut named: Vec<(String, &[&str], &str)> = Vec::new();
    let connector: &[&str] = &["", "debezium.source."];
    let producer: &[&str] = &["producer."];
    for (k, _) in IGNORED_CONNECTOR_KEYS.iter().chain(IGNORED_ERRORS_KEYS) {
        named.push(((*k).into(), connector, "IGNORED_CONNECTOR_KEYS"));
    }
    for (k, _, _) in DEFAULT_ONLY_CONNECTOR_KEYS {
        named.push(((*k).into(), connector, "DEFAULT_ONLY_CONNECTOR_KEYS"));
    }
    for (k, _) in IGNORED_ERRORS_PREFIXES {
        named.push(((*k).into(), connector, "IGNORED_ERRORS_PREFIXES"));
    }
    for table in ["IGNORED_CONNECTOR_PREFIXES", "REFUSED_CONNECTOR_PREFIXES"] {
        for k in table_keys(connector_src, table) {
            named.push((k, connector, "connector.rs"));
        }
    }
    for (k, _) in IGNORED_WORKER_PREFIXES {
        named.push(((*k).into(), &[""], "IGNORED_WORKER_PREFIXES"));
    }
    for k in PRODUCER_SAME
        .iter()
        .copied()
        .chain(PRODUCER_RENAMED.iter().map(|(k, _)| *k))
        .chain(PRODUCER_IGNORED.iter().map(|(k, _)| *k))
        .chain(PRODUCER_DEFAULT_ONLY.iter().map(|(k, _, _)| *k))
    {
        named.push((k.into(), producer, "producer.rs"));
    }
    for (table, prefixes) in [
        ("ENV_SOURCE_KEYS", connector),
        ("ENV_PRODUCER_KEYS", producer),
        ("ENV_OTHER_KEYS", &[""][..]),
        ("ENV_ROUTER_KEYS", &["transforms.<router>."][..]),
    ] {
        for k in table_keys(server_src, table) {
            named.push((k, prefixes, "debezium_server.rs"));
        }
    }
    for (file, src, prefixes) in SOURCES {
        let scanned = scanned_keys(src);
        for (f, k, _) in NOT_KEYS.iter().filter(|(f, _, _)| f == file) {
            assert!(
                scanned.contains(*k),
                "NOT_KEYS: the scan no longer finds {k} in {f}"
            );
        }
        for k in scanned {
            if !NOT_KEYS.iter().any(|(f, n, _)| f == file && *n == k) {
                named.push((k, prefixes, file));
            }
        }
    }
    let mut missing = BTreeSet::new();
    for (key, prefixes, source) in &named {
        let covered = prefixes.iter().any(|p| {
            let full = format!("{p}{key}");
            rows.contains_key(&full) || rows.contains_key(&format!("{full}*"))
        });
        if !covered {
            missing.insert(format!(
                "{key} ({source}; a row spelled {})",
                prefixes
                    .iter()
                    .map(|p| format!("`{p}{key}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "keys the translation names without a row in docs/migration.md's `## Every key`:\n{}",
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn the_fixture_parses_and_lists_each_key_once_per_file() {
    let entries = fixture();
    assert!(entries.len() > 300, "{} keys", entries.len());
    let mut seen = BTreeSet::new();
    for e in &entries {
        assert!(
            seen.insert((e.file as u8, e.key.as_str())),
            "debezium-keys.txt:{}: {} is listed twice for the same file",
            e.line,
            e.key
        );
        if e.key.ends_with('*') {
            let (k, _) = split_pair(&e.tried);
            let prefix = e.key.trim_end_matches('*');
            assert!(
                concrete(&k).starts_with(&concrete(prefix)),
                "debezium-keys.txt:{}: {k} is not in {}",
                e.line,
                e.key
            );
        }
    }
    // The scan finds keys where they are read.
    let scanned = scanned_keys(include_str!("connector.rs"));
    for key in [
        "database.hostname",
        "slot.failover",
        "database.sslhostnameverifier",
    ] {
        assert!(scanned.contains(key), "{key} not found in connector.rs");
    }
}
