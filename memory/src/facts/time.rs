//! RFC 3339 times for facts (world and system times are stored as Unix ms).
//!
//! Parsing is `jiff`'s (a well-kept date-time crate already in the lock): an RFC 3339 date-time
//! with an offset (`2026-05-03T09:30:00Z`, `2026-05-03T11:30:00+02:00`), or a bare date
//! (`2026-05-03`) meaning 00:00 UTC that day, since a model and a person often know only the day.
//! A date-time without an offset is refused: which day it means would depend on a time zone nobody
//! named. Formatting is always UTC with `Z`, with milliseconds only when there are some.

use jiff::Timestamp;

/// Parse a time: RFC 3339 with an offset, or `YYYY-MM-DD` (00:00 UTC). The error says what was
/// expected.
pub fn parse_time(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let is_date = t.len() == 10
        && t.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    let stamp = if is_date {
        t.parse::<jiff::civil::Date>()
            .map_err(|e| e.to_string())
            .and_then(|d| {
                jiff::tz::Offset::UTC
                    .to_timestamp(d.at(0, 0, 0, 0))
                    .map_err(|e| e.to_string())
            })
    } else {
        t.parse::<Timestamp>().map_err(|e| e.to_string())
    };
    stamp.map(|ts| ts.as_millisecond()).map_err(|why| {
        format!(
            "{s:?} is not a time: expected RFC 3339 with an offset (e.g. 2026-05-03T09:30:00Z) or a date (2026-05-03); {why}"
        )
    })
}

/// Format Unix ms as RFC 3339 in UTC (`2026-05-03T09:30:00Z`, `…:00.250Z` when there are ms).
pub fn format_time(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => ts.to_string(),
        // Outside years -9999..=9999: cannot come from `parse_time` or a clock; render the number.
        Err(_) => format!("@{ms}ms"),
    }
}

/// An optional time as JSON: an RFC 3339 string or null.
pub fn json_time(ms: Option<i64>) -> serde_json::Value {
    ms.map_or(serde_json::Value::Null, |m| {
        serde_json::Value::String(format_time(m))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_offsets() {
        let ms = parse_time("2026-05-03T09:30:00Z").unwrap();
        assert_eq!(format_time(ms), "2026-05-03T09:30:00Z");
        assert_eq!(parse_time("2026-05-03T11:30:00+02:00").unwrap(), ms);
        assert_eq!(
            format_time(parse_time("2026-05-03T09:30:00.25Z").unwrap()),
            "2026-05-03T09:30:00.25Z"
        );
        assert_eq!(
            parse_time("2026-05-03").unwrap(),
            parse_time("2026-05-03T00:00:00Z").unwrap()
        );
    }

    #[test]
    fn refuses_what_is_not_a_time() {
        for bad in [
            "",
            "tomorrow",
            "2026-05-03T09:30:00",
            "2026-13-03",
            "2026-02-30",
            "03/05/2026",
            "2026-05-03T25:00:00Z",
            "99999-01-01T00:00:00Z",
            "2026-5-3",
        ] {
            let err = parse_time(bad).unwrap_err();
            assert!(err.contains("RFC 3339"), "{bad}: {err}");
        }
    }
}
