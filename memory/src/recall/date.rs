//! Dates for the indexed text, in UTC (no time-zone database), so "8 May 2023" can be put into the
//! text that BM25 and the embedder see.
//!
//! The calendar is `jiff`'s (the crate facts already use for RFC 3339); this module only knows the
//! two text shapes: the rendered day, and LoCoMo's session times.
//!
//! Invariant: both functions cover jiff's range (years -9999..=9999), which holds every time a clock
//! or a conversation gives; outside it `render_day` shows the raw number and `parse_locomo` says
//! `None`, never a wrong date.

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::Offset;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const MS_PER_DAY: i64 = 86_400_000;

/// "8 May 2023" for a time in ms since the epoch (UTC).
pub fn render_day(time_ms: i64) -> String {
    match Timestamp::from_millisecond(time_ms) {
        Ok(ts) => {
            let date = Offset::UTC.to_datetime(ts).date();
            let month = MONTHS[usize::try_from(date.month() - 1).unwrap_or(0).min(11)];
            format!("{} {month} {}", date.day(), date.year())
        }
        // Beyond years ±9999: cannot come from a clock or `parse_locomo`; render the number.
        Err(_) => format!("@{time_ms}ms"),
    }
}

/// Parse LoCoMo's "1:56 pm on 8 May, 2023" into ms since the epoch (UTC); `None` when it is not
/// that shape.
///
/// The day and the clock are counted on from the first of the month (as earlier builds did), so
/// "31 February" is 3 March in a common year, not an error.
pub fn parse_locomo(s: &str) -> Option<i64> {
    let (clock, day) = s.split_once(" on ")?;
    let mut clock_parts = clock.split_whitespace();
    let hm = clock_parts.next()?;
    let ampm = clock_parts.next().unwrap_or("am").to_ascii_lowercase();
    let (h, min) = hm.split_once(':')?;
    let mut h: i64 = h.trim().parse().ok()?;
    let min: i64 = min.trim().parse().ok()?;
    if ampm == "pm" && h < 12 {
        h += 12;
    } else if ampm == "am" && h == 12 {
        h = 0;
    }
    let day = day.replace(',', " ");
    let mut parts = day.split_whitespace();
    let d: u32 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let m = MONTHS
        .iter()
        .position(|x| x.eq_ignore_ascii_case(month))
        .and_then(|i| i8::try_from(i + 1).ok())?;
    let y: i16 = parts.next()?.parse().ok()?;
    let first = Offset::UTC
        .to_timestamp(Date::new(y, m, 1).ok()?.at(0, 0, 0, 0))
        .ok()?
        .as_millisecond();
    Some(first + (i64::from(d) - 1) * MS_PER_DAY + (h * 3600 + min * 60) * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_days_and_parses_locomo_dates() {
        assert_eq!(render_day(0), "1 January 1970");
        assert_eq!(render_day(-1), "31 December 1969");
        assert_eq!(render_day(1_709_164_800_000), "29 February 2024");
        assert_eq!(render_day(946_684_799_999), "31 December 1999");
        let t = parse_locomo("1:56 pm on 8 May, 2023");
        assert_eq!(t, Some(1_683_554_160_000));
        assert_eq!(t.map(render_day).as_deref(), Some("8 May 2023"));
        assert_eq!(
            parse_locomo("12:05 am on 1 January, 2020")
                .map(render_day)
                .as_deref(),
            Some("1 January 2020")
        );
        assert_eq!(parse_locomo("yesterday"), None);
    }

    #[test]
    fn a_day_past_the_month_counts_on_and_the_calendar_ends_are_kept() {
        assert_eq!(
            parse_locomo("12:00 am on 31 February, 2023")
                .map(render_day)
                .as_deref(),
            Some("3 March 2023")
        );
        assert_eq!(parse_locomo("1:00 pm on 1 May, 10000"), None);
        assert_eq!(render_day(i64::MAX), format!("@{}ms", i64::MAX));
    }
}
