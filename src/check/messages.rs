//! The rows of logical decoding messages as events: which prefixes are
//! events and what that implies (whole transactions, non-transactional
//! messages), and the publication of a messages-only pipeline, which needs
//! to exist but no table. It must never judge a table: a pipeline that also
//! reads a table gets its publication row from `publication`.

use std::time::Duration;

use tokio_postgres::Client;

use super::report::{CheckReport, MESSAGES, PUBLICATION};
use super::step::read;
use crate::chain::DisplayChain;
use crate::config::Config;
use crate::postgres::catalog::preflight;
use crate::postgres::config::PublicationMode;
use crate::postgres::replication::quote_ident;
use crate::router::MessageForm;
use crate::txn::config::{NonTransactional, PrefixRule};

/// What the pipeline does with logical decoding messages, said plainly:
/// the prefixes that are events, that large transactions then arrive
/// whole, and what a non-transactional message becomes.
pub(super) fn check_messages(report: &mut CheckReport, config: &Config) {
    let Some(sel) = config.outbox.message_selection() else {
        return;
    };
    let prefixes = prefixes(&sel.rule);
    if config.debezium.message_form == MessageForm::Envelope {
        report.pass(
            MESSAGES,
            format!(
                "logical decoding messages with {prefixes} go to {}.message as Debezium's message \
                 records (no decode transform: the EventRouter passes them through), \
                 non-transactional ones too; large transactions arrive whole at their commit",
                config.debezium.topic_prefix
            ),
        );
        return;
    }
    native_form_row(report, config, sel.non_transactional, &prefixes);
}

/// The prefixes a [`PrefixRule`] selects, in words.
fn prefixes(rule: &PrefixRule) -> String {
    match rule {
        PrefixRule::Exact(list) => format!("prefix {}", list.join(", ")),
        PrefixRule::Include(res) => format!(
            "prefixes matching {} (message.prefix.include.list, case-insensitive)",
            res.iter()
                .map(regex::Regex::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PrefixRule::Exclude(res) => format!(
            "every prefix except those matching {} (message.prefix.exclude.list)",
            res.iter()
                .map(regex::Regex::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PrefixRule::All => "every prefix (no message.prefix.include.list)".to_owned(),
    }
}

/// The messages row when messages become events of the native form: what
/// a non-transactional message becomes decides pass or warn.
fn native_form_row(
    report: &mut CheckReport,
    config: &Config,
    non_transactional: NonTransactional,
    prefixes: &str,
) {
    let mut detail = format!(
        "events from pg_logical_emit_message(true, ...) with {prefixes}, besides {}; large \
         transactions arrive whole at their commit (pgoutput cannot tell a rolled-back \
         savepoint's messages apart while streaming)",
        if config.outbox.source.table() {
            "the outbox table's rows"
        } else {
            "no table"
        }
    );
    match non_transactional {
        NonTransactional::Error => {
            detail.push_str(
                "; a non-transactional message with such a prefix is refused as bad input ([errors] applies)",
            );
            report.pass(MESSAGES, detail);
        }
        NonTransactional::Skip => {
            detail.push_str("; a non-transactional message with such a prefix is dropped (outbox.non_transactional = \"skip\")");
            report.pass(MESSAGES, detail);
        }
        NonTransactional::Deliver => {
            detail.push_str(
                "; a non-transactional message (pg_logical_emit_message(false, ...)) is published \
                 even when its transaction rolls back, as Debezium publishes it",
            );
            report.warn(
                MESSAGES,
                detail,
                "write outbox events with pg_logical_emit_message(true, ...) only (the \
                 deploy/postgresql/outbox_emit.sql helper does), or narrow \
                 message.prefix.include.list to the prefixes your services write transactionally",
            );
        }
    }
}

/// The publication of a messages-only pipeline: it must exist (or be
/// creatable); tables in it only cost decoding.
pub(super) async fn check_message_publication(
    report: &mut CheckReport,
    config: &Config,
    client: &Client,
    timeout: Duration,
) {
    let publication = &config.replication.publication;
    let state = read(
        "the publication",
        timeout,
        preflight::publication_state(client, publication, "", ""),
    )
    .await
    .map(|state| state.map(|p| (p.all_tables, i64::from(p.table_count))));
    match state {
        Err(e) => report.fail(
            PUBLICATION,
            DisplayChain(&e).to_string(),
            "make sure the role can read pg_publication",
        ),
        Ok(None) => {
            let creatable = match config.replication.publication_mode {
                PublicationMode::Table => config.replication.create_publication,
                PublicationMode::NoTables
                | PublicationMode::AllTables => true,
                _ => false,
            };
            if creatable {
                report.pass(
                    PUBLICATION,
                    format!("{publication} does not exist yet; walrelay creates it without tables at start (messages need no table)"),
                );
            } else {
                report.fail(
                    PUBLICATION,
                    format!("{publication} does not exist, and the configuration does not let walrelay create it"),
                    format!("CREATE PUBLICATION {} (no tables: pgoutput sends messages whatever it publishes)", quote_ident(publication)),
                );
            }
        }
        Ok(Some((all, 0))) if !all => report.pass(
            PUBLICATION,
            format!("{publication} exists and publishes no table (messages need none)"),
        ),
        Ok(Some((all, tables))) => report.warn(
            PUBLICATION,
            if all {
                format!("{publication} is FOR ALL TABLES; this pipeline reads logical decoding messages only")
            } else {
                format!("{publication} publishes {tables} table(s); this pipeline reads logical decoding messages only")
            },
            "the walsender decodes and sends those tables' changes for nothing: use a publication without tables",
        ),
    }
}
