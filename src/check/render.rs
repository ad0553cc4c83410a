//! The table `walrelay check` prints: a status, a name and a detail per
//! row, an indented `fix:` line under each row that has one, and a one-line
//! verdict. It owns the wording of the statuses and the layout, nothing
//! else: it must never add, drop, reorder or judge a row.

use std::fmt;

use super::report::{CheckReport, CheckStatus};

impl CheckStatus {
    /// The status column: upper case where an operator must look.
    fn label(self) -> &'static str {
        match self {
            CheckStatus::Pass => "pass",
            CheckStatus::Warn => "WARN",
            CheckStatus::Fail => "FAIL",
            CheckStatus::Skip => "skip",
        }
    }
}

impl fmt::Display for CheckReport {
    /// The table: status, check, detail, and an indented `fix:` line under
    /// each row that has one; then a one-line summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .rows
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(0)
            .max("CHECK".len());
        writeln!(f, "{:<6}  {:<width$}  DETAIL", "STATUS", "CHECK")?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<6}  {:<width$}  {}",
                r.status.label(),
                r.name,
                r.detail
            )?;
            if let Some(fix) = &r.fix {
                writeln!(f, "{:<6}  {:<width$}  fix: {fix}", "", "")?;
            }
        }
        let count = |s: CheckStatus| self.rows.iter().filter(|r| r.status == s).count();
        write!(
            f,
            "{} passed, {} warnings, {} failed, {} skipped",
            count(CheckStatus::Pass),
            count(CheckStatus::Warn),
            count(CheckStatus::Fail),
            count(CheckStatus::Skip)
        )?;
        if self.passed() {
            writeln!(f, ": walrelay can start")
        } else {
            writeln!(f, ": fix the failures above before starting walrelay")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::{MAX_SLOT_WAL_KEEP_SIZE, ROLE, WAL_LEVEL};

    #[test]
    fn report_fails_only_on_fail_rows() {
        let mut r = CheckReport::default();
        r.pass(WAL_LEVEL, "logical");
        r.warn(MAX_SLOT_WAL_KEEP_SIZE, "-1", "bound it");
        assert!(r.passed());
        r.fail(ROLE, "no REPLICATION", "ALTER ROLE x REPLICATION");
        assert!(!r.passed());
        let text = r.to_string();
        assert!(text.contains("FAIL    role attributes"), "{text}");
        assert!(text.contains("fix: ALTER ROLE x REPLICATION"), "{text}");
        assert!(text.contains("1 passed, 1 warnings, 1 failed"), "{text}");
    }
}
