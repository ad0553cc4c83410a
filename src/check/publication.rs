//! The publication rows of a table outbox: the publication as walrelay
//! would find it at start (created, altered in mode `filtered`, or read as
//! it is), the privileges that setup and the stream need on each outbox
//! table, and for an existing publication the operations it publishes
//! (with a suggestion when it sends deletes walrelay drops). It must never
//! create or alter the publication: it says what walrelay would do.

use std::time::Duration;

use tokio_postgres::Client;

use super::report::{CheckReport, OUTBOX_PRIVILEGES, PUBLICATION, PUBLISHED_OPERATIONS};
use super::step::read;
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog;
use crate::postgres::catalog::preflight::{self, OutboxTable, PublicationState};
use crate::postgres::config::PublicationMode;
use crate::postgres::replication::quote_ident;
use crate::txn::config::OutboxTableSpec;

/// What walrelay would do about the publication at start.
enum PublicationAction {
    /// Nothing: it exists and fits.
    None,
    /// `CREATE PUBLICATION ...` (the statement, for messages).
    Create { statement: String, all_tables: bool },
    /// `ALTER PUBLICATION ... SET TABLE` (mode `filtered`).
    Alter { owner_ok: bool },
}

/// The publication rows of a table outbox, in their order: one `outbox
/// privileges` row per table (what the publication's setup needs of the
/// role included), then `publication`, then `published operations` when
/// walrelay would read an existing publication as it is.
pub(super) async fn check_publication_rows(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    tables: &[OutboxTableSpec],
    facts: &[Option<OutboxTable>],
    superuser: bool,
) {
    let (action, state) = check_publication(report, config, client, timeout, tables).await;
    let publication_row = report
        .rows
        .iter()
        .rposition(|r| r.name == PUBLICATION)
        .map(|i| report.rows.remove(i));
    for (spec, facts) in tables.iter().zip(facts) {
        check_privileges(
            report,
            facts.as_ref(),
            action.as_ref(),
            superuser,
            &config.postgres.user,
            &spec.qualified(),
        );
    }
    // Keep the table order stable: privileges right after the tables.
    report.rows.extend(publication_row);
    if let Some(state) = state {
        check_published_operations(report, config, &state);
    }
}

/// Checks the publication as `catalog::prepare_publication` would find it
/// for the outbox `tables`, without creating or altering anything. Returns
/// what walrelay would do, and the publication's state when it exists and
/// walrelay would read it as it is.
async fn check_publication(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    tables: &[OutboxTableSpec],
) -> (Option<PublicationAction>, Option<PublicationState>) {
    let Some((state, unlisted)) = read_publication(report, config, client, timeout, tables).await
    else {
        return (None, None);
    };
    match state {
        None => (missing_publication(report, config, tables), None),
        Some(row) => existing_publication(report, config, tables, row, &unlisted),
    }
}

/// The publication's own facts (`None`: it does not exist) and the outbox
/// tables it does not include; `None` after a failed row.
async fn read_publication<'t>(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
    tables: &'t [OutboxTableSpec],
) -> Option<(Option<PublicationState>, Vec<&'t OutboxTableSpec>)> {
    let publication = &config.replication.publication;
    let mut state = None;
    let mut unlisted = Vec::new();
    for t in tables {
        let row = read(
            "the publication",
            timeout,
            preflight::publication_state(client, publication, &t.schema, &t.table),
        )
        .await;
        match row {
            Ok(Some(row)) => {
                if !row.includes_table {
                    unlisted.push(t);
                }
                state = Some(row);
            }
            Ok(None) => {
                state = None;
                break;
            }
            Err(e) => {
                report.fail(
                    PUBLICATION,
                    DisplayChain(&e).to_string(),
                    "make sure the role can read pg_publication",
                );
                return None;
            }
        }
    }
    Some((state, unlisted))
}

/// The tables as SQL names, for statements.
fn quoted<'a>(tables: impl IntoIterator<Item = &'a OutboxTableSpec>) -> String {
    tables
        .into_iter()
        .map(|t| format!("{}.{}", quote_ident(&t.schema), quote_ident(&t.table)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tables as a person reads them.
fn shown<'a>(tables: impl IntoIterator<Item = &'a OutboxTableSpec>) -> String {
    tables
        .into_iter()
        .map(OutboxTableSpec::qualified)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A publication that does not exist: the statement walrelay would run at
/// start, or a failed row when the configuration creates none.
fn missing_publication(
    report: &mut CheckReport,
    config: &Config,
    tables: &[OutboxTableSpec],
) -> Option<PublicationAction> {
    let plan = &config.replication;
    let publication = &plan.publication;
    let outbox = quoted(tables);
    let with = |default: Option<&str>| match plan.publish.as_deref().or(default) {
        Some(p) => format!(" WITH (publish = '{p}')"),
        None => String::new(),
    };
    let default_publish = catalog::table_publish(config.outbox.transaction_metadata);
    let create_fix = format!(
        "CREATE PUBLICATION {} FOR TABLE {outbox} WITH (publish = '{default_publish}')",
        quote_ident(publication)
    );
    let (statement, all_tables) = match plan.publication_mode {
        PublicationMode::Table if plan.create_publication => (
            format!("FOR TABLE {outbox}{}", with(Some(default_publish))),
            false,
        ),
        PublicationMode::Filtered => (format!("FOR TABLE {outbox}{}", with(None)), false),
        PublicationMode::AllTables => (format!("FOR ALL TABLES{}", with(None)), true),
        mode @ (PublicationMode::Table | PublicationMode::Disabled | PublicationMode::NoTables) => {
            report.fail(PUBLICATION, not_created(publication, mode), create_fix);
            return None;
        }
    };
    let statement = format!(
        "CREATE PUBLICATION {} {statement}",
        quote_ident(publication)
    );
    report.pass(
        PUBLICATION,
        format!("{publication} does not exist; walrelay will create it at start: {statement}"),
    );
    Some(PublicationAction::Create {
        statement,
        all_tables,
    })
}

/// Why a missing publication stays missing: mode `table` without
/// `replication.create_publication`, `disabled`, or `no_tables` (which
/// would create one without tables).
fn not_created(publication: &str, mode: PublicationMode) -> String {
    match mode {
        PublicationMode::Disabled => {
            format!("{publication} does not exist and publication.autocreate.mode is disabled")
        }
        PublicationMode::NoTables => format!(
            "{publication} does not exist; publication.autocreate.mode=no_tables would create it without tables and walrelay would stop"
        ),
        _ => format!("{publication} does not exist and replication.create_publication is false"),
    }
}

/// A publication that exists: it must publish inserts and include every
/// outbox table, unless mode `filtered` sets its tables at start.
fn existing_publication(
    report: &mut CheckReport,
    config: &Config,
    tables: &[OutboxTableSpec],
    row: PublicationState,
    unlisted: &[&OutboxTableSpec],
) -> (Option<PublicationAction>, Option<PublicationState>) {
    let plan = &config.replication;
    let publication = &plan.publication;
    let alter = format!("ALTER PUBLICATION {}", quote_ident(publication));
    if !row.publishes_inserts {
        let default_publish = catalog::table_publish(config.outbox.transaction_metadata);
        report.fail(
            PUBLICATION,
            format!("{publication} exists but does not publish inserts"),
            format!("{alter} SET (publish = '{default_publish}')"),
        );
        return (None, None);
    }
    if row.all_tables {
        return all_tables_publication(report, config, tables, row);
    }
    let qualified = shown(tables);
    let exact =
        unlisted.is_empty() && usize::try_from(row.table_count).is_ok_and(|n| n == tables.len());
    if plan.publication_mode == PublicationMode::Filtered && !exact {
        report.pass(
            PUBLICATION,
            format!("{publication} exists; walrelay will set its tables to {qualified} at start (mode filtered)"),
        );
        let owner_ok = row.owned;
        return (Some(PublicationAction::Alter { owner_ok }), Some(row));
    }
    if !unlisted.is_empty() {
        let missing = shown(unlisted.iter().copied());
        let add = quoted(unlisted.iter().copied());
        report.fail(
            PUBLICATION,
            format!("{publication} exists but does not include {missing}"),
            format!(
                "{alter} ADD TABLE {add}, or point replication.publication at another publication"
            ),
        );
        return (None, None);
    }
    report.pass(
        PUBLICATION,
        format!("{publication} exists and publishes inserts of {qualified}"),
    );
    (Some(PublicationAction::None), Some(row))
}

/// A publication FOR ALL TABLES: it works (but costs) unless mode
/// `filtered` needs to set its tables.
fn all_tables_publication(
    report: &mut CheckReport,
    config: &Config,
    tables: &[OutboxTableSpec],
    row: PublicationState,
) -> (Option<PublicationAction>, Option<PublicationState>) {
    let publication = &config.replication.publication;
    if config.replication.publication_mode == PublicationMode::Filtered {
        report.fail(
            PUBLICATION,
            format!("{publication} is FOR ALL TABLES, but publication.autocreate.mode=filtered needs a FOR TABLE publication"),
            format!("DROP PUBLICATION {} (walrelay recreates it), or use mode all_tables", quote_ident(publication)),
        );
        return (None, None);
    }
    report.warn(
        PUBLICATION,
        format!("{publication} exists and is FOR ALL TABLES: the walsender decodes and sends every table's changes"),
        format!("a publication FOR TABLE {} is cheaper", quoted(tables)),
    );
    (Some(PublicationAction::None), Some(row))
}

/// The `published operations` row for an existing publication a table
/// outbox reads as it is: a suggestion (a warning, never a failure) when it
/// publishes deletes or truncates walrelay would drop.
fn check_published_operations(report: &mut CheckReport, config: &Config, state: &PublicationState) {
    let advice = publish_advice(
        &config.replication.publication,
        state,
        config.outbox.transaction_metadata,
        config.replication.publication_mode != PublicationMode::Table,
    );
    match advice {
        PublishAdvice::Keep(detail) => report.pass(PUBLISHED_OPERATIONS, detail),
        PublishAdvice::Suggest { detail, fix } => report.warn(PUBLISHED_OPERATIONS, detail, fix),
    }
}

/// What `walrelay check` says about the operations an existing publication
/// of a table outbox publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PublishAdvice {
    /// Nothing to change; what it publishes and why that is right.
    Keep(String),
    /// Publish fewer operations: what it publishes, and the statement with
    /// why and what else it changes.
    Suggest {
        /// What the publication publishes and what that costs.
        detail: String,
        /// The `ALTER PUBLICATION` statement, its measured effect and who
        /// else it concerns.
        fix: String,
    },
}

/// The advice for publication `publication` in `state`, read by a table
/// outbox. Assembly drops every outbox delete (and truncate), so a
/// publication that publishes them makes the walsender encode and send each
/// one for nothing; the statement keeps inserts and, if published, updates
/// (`outbox.op_invalid_behavior` acts on those). With transaction metadata
/// on, Debezium's BEGIN and END records count deletes, and a transaction
/// that only deletes or truncates still gets its pair: nothing is
/// suggested. `debezium` (a Debezium form: a `publication.autocreate.mode`)
/// adds that Debezium reads the same publication without deletes and emits
/// the same records: its EventRouter drops deletes and their tombstones,
/// and walrelay refuses the chains where a tombstone would reach anything
/// else.
fn publish_advice(
    publication: &str,
    state: &PublicationState,
    transaction_metadata: bool,
    debezium: bool,
) -> PublishAdvice {
    let ops = [
        (state.publishes_inserts, "insert"),
        (state.publishes_updates, "update"),
        (state.publishes_deletes, "delete"),
        (state.publishes_truncates, "truncate"),
    ];
    let list = |kept: &[&str]| {
        ops.iter()
            .filter(|(on, op)| *on && kept.contains(op))
            .map(|(_, op)| *op)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let published = list(&["insert", "update", "delete", "truncate"]);
    let dropped = match (state.publishes_deletes, state.publishes_truncates) {
        (false, false) => {
            return PublishAdvice::Keep(format!(
                "{publication} publishes {published}: no deletes or truncates, which walrelay would drop"
            ))
        }
        (true, false) => "deletes",
        (false, true) => "truncates",
        (true, true) => "deletes and truncates",
    };
    if transaction_metadata {
        return PublishAdvice::Keep(format!(
            "{publication} publishes {published}; walrelay drops the {dropped}, but transaction \
             metadata (outbox.transaction_metadata, Debezium's provide.transaction.metadata) \
             needs them: Debezium's BEGIN and END records count deletes, and a transaction that \
             only deletes or truncates still gets its pair"
        ));
    }
    let fix = publish_fix(publication, state, &list(&["insert", "update"]), debezium);
    let which = if state.publishes_deletes {
        " (each outbox row deleted after its insert)"
    } else {
        ""
    };
    PublishAdvice::Suggest {
        detail: format!(
            "{publication} publishes {published}; walrelay drops the outbox's {dropped}, yet the \
             walsender encodes and sends every one{which}"
        ),
        fix,
    }
}

/// The statement that publishes only `target` (inserts, and updates if
/// published), with its measured effect and whom else it concerns.
fn publish_fix(
    publication: &str,
    state: &PublicationState,
    target: &str,
    debezium: bool,
) -> String {
    let mut fix = format!(
        "ALTER PUBLICATION {} SET (publish = '{target}'); measured effect, W1 (insert and delete \
         of an outbox row in one transaction): the walsender drained it 1.14-1.27x as fast, \
         walrelay 1.09-1.18x (docs/benchmarks.md, 'Levers, one by one (issue 19)'). It applies \
         to every reader of {publication}{}: run it only if no reader needs deletes",
        quote_ident(publication),
        if state.all_tables {
            " and to every table (FOR ALL TABLES)"
        } else {
            ""
        }
    );
    if debezium {
        fix.push_str(
            "; Debezium reads the same publication without deletes and emits the same records \
             (its EventRouter drops deletes and their tombstones)",
        );
    }
    fix
}

/// SELECT on the table, and what creating or altering the publication at
/// start needs of the role (ownership, CREATE on the database, a superuser
/// for FOR ALL TABLES).
fn check_privileges(
    report: &mut CheckReport,
    facts: Option<&OutboxTable>,
    action: Option<&PublicationAction>,
    superuser: bool,
    user: &str,
    qualified: &str,
) {
    let Some(facts) = facts else {
        report.skip(OUTBOX_PRIVILEGES, "the outbox table was not found");
        return;
    };
    let role = quote_ident(user);
    if !facts.can_select {
        report.fail(
            OUTBOX_PRIVILEGES,
            format!("{user} has no SELECT on {qualified}"),
            format!("GRANT SELECT ON {qualified} TO {role}"),
        );
        return;
    }
    match action {
        Some(PublicationAction::Create {
            statement,
            all_tables: true,
        }) if !superuser => report.fail(
            OUTBOX_PRIVILEGES,
            format!("walrelay would run {statement}, which needs a superuser"),
            "create the publication as a superuser before starting walrelay",
        ),
        Some(PublicationAction::Create {
            statement,
            all_tables: false,
        }) if !(facts.owns && facts.can_create_in_db) => {
            let missing = match (facts.owns, facts.can_create_in_db) {
                (false, false) => format!("does not own {qualified} and has no CREATE on the database"),
                (false, true) => format!("does not own {qualified}"),
                _ => "has no CREATE on the database".to_owned(),
            };
            report.fail(
                OUTBOX_PRIVILEGES,
                format!("walrelay would run {statement}, but {user} {missing}"),
                format!(
                    "create the publication as the table's owner before starting walrelay, or ALTER TABLE {qualified} OWNER TO {role} and GRANT CREATE ON DATABASE <db> TO {role}"
                ),
            );
        }
        Some(PublicationAction::Alter { owner_ok: false }) => report.fail(
            OUTBOX_PRIVILEGES,
            format!("walrelay would alter the publication's tables, but {user} does not own it"),
            "set the publication's tables to the outbox as its owner, or ALTER PUBLICATION ... OWNER TO the walrelay role",
        ),
        Some(PublicationAction::Create { .. } | PublicationAction::Alter { .. }) => {
            report.pass(
                OUTBOX_PRIVILEGES,
                format!("SELECT on {qualified}, and enough to set up the publication"),
            );
        }
        _ => report.pass(OUTBOX_PRIVILEGES, format!("SELECT on {qualified}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publication(update: bool, delete: bool, truncate: bool) -> preflight::PublicationState {
        preflight::PublicationState {
            publishes_inserts: true,
            publishes_updates: update,
            publishes_deletes: delete,
            publishes_truncates: truncate,
            all_tables: false,
            owned: true,
            includes_table: true,
            table_count: 1,
        }
    }

    #[test]
    fn a_publication_with_deletes_gets_the_statement_that_keeps_the_rest() {
        let PublishAdvice::Suggest { detail, fix } =
            publish_advice("p", &publication(true, true, true), false, false)
        else {
            panic!("no suggestion for a publication with deletes");
        };
        assert_eq!(
            detail,
            "p publishes insert, update, delete, truncate; walrelay drops the outbox's deletes and \
             truncates, yet the walsender encodes and sends every one (each outbox row deleted \
             after its insert)"
        );
        assert!(
            fix.starts_with("ALTER PUBLICATION \"p\" SET (publish = 'insert, update'); "),
            "{fix}"
        );
        assert!(
            fix.contains("docs/benchmarks.md, 'Levers, one by one (issue 19)'"),
            "{fix}"
        );
        assert!(fix.contains("every reader of p"), "{fix}");
        assert!(!fix.contains("Debezium"), "{fix}");
        // Updates stay as they were: none are added.
        let PublishAdvice::Suggest { fix, .. } =
            publish_advice("p", &publication(false, true, false), false, false)
        else {
            panic!("no suggestion for insert, delete");
        };
        assert!(
            fix.starts_with("ALTER PUBLICATION \"p\" SET (publish = 'insert'); "),
            "{fix}"
        );
        // Truncates alone are worth it too.
        let PublishAdvice::Suggest { detail, fix } =
            publish_advice("p", &publication(true, false, true), false, false)
        else {
            panic!("no suggestion for insert, update, truncate");
        };
        assert_eq!(
            detail,
            "p publishes insert, update, truncate; walrelay drops the outbox's truncates, yet the \
             walsender encodes and sends every one"
        );
        assert!(
            fix.starts_with("ALTER PUBLICATION \"p\" SET (publish = 'insert, update'); "),
            "{fix}"
        );
    }

    #[test]
    fn the_debezium_forms_hear_that_debezium_reads_it_the_same() {
        let mut all = publication(true, true, true);
        all.all_tables = true;
        let PublishAdvice::Suggest { fix, .. } =
            publish_advice("dbz_publication", &all, false, true)
        else {
            panic!("no suggestion for a Debezium publication with deletes");
        };
        assert!(
            fix.contains("every reader of dbz_publication and to every table (FOR ALL TABLES)")
                && fix.ends_with(
                    "Debezium reads the same publication without deletes and emits the same records \
                     (its EventRouter drops deletes and their tombstones)"
                ),
            "{fix}"
        );
    }

    #[test]
    fn nothing_is_suggested_without_deletes_or_with_transaction_metadata() {
        for (update, truncate) in [(true, false), (false, false)] {
            let advice = publish_advice("p", &publication(update, false, truncate), false, true);
            assert!(
                matches!(&advice, PublishAdvice::Keep(d) if d.contains("no deletes or truncates")),
                "{advice:?}"
            );
        }
        let advice = publish_advice("p", &publication(true, true, false), true, false);
        assert!(
            matches!(&advice, PublishAdvice::Keep(d) if d.contains("BEGIN and END records count deletes")),
            "{advice:?}"
        );
    }
}
