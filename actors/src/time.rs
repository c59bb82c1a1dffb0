//! Rendering of stored timestamps (ms since epoch, UTC).

use chrono::{SecondsFormat, TimeZone, Utc};

/// ISO 8601 with offset and milliseconds, in UTC: `2026-11-22T10:00:00.000+00:00`.
pub fn iso(ms: i64) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, false)
}

/// The local date (`YYYY-MM-DD`, America/Sao_Paulo, UTC−03:00) of an instant in ms: the day
/// the campaign guardrails count (D-031).
pub fn local_date(ms: i64) -> String {
    let offset = chrono::FixedOffset::west_opt(3 * 3600).expect("a valid offset");
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or_default()
        .with_timezone(&offset)
        .format("%Y-%m-%d")
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_with_offset() {
        assert_eq!(super::iso(0), "1970-01-01T00:00:00.000+00:00");
    }
}
