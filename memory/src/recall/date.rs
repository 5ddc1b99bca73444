//! Calendar arithmetic for the indexed text (no time-zone database: dates are UTC).
//!
//! Days from/to the civil calendar by Howard Hinnant's algorithms (exact for the proleptic Gregorian
//! calendar), so "8 May 2023" can be put into the text that BM25 and the embedder see.

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

/// Days since 1970-01-01 of a civil date.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Civil date (year, month 1–12, day 1–31) of days since 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// "8 May 2023" for a time in ms since the epoch.
pub fn render_day(time_ms: i64) -> String {
    let (y, m, d) = civil_from_days(time_ms.div_euclid(86_400_000));
    let month = MONTHS[(m as usize).saturating_sub(1).min(11)];
    format!("{d} {month} {y}")
}

/// Parse LoCoMo's "1:56 pm on 8 May, 2023" into ms since the epoch (UTC); `None` when it is not
/// that shape.
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
        .and_then(|i| u32::try_from(i + 1).ok())?;
    let y: i64 = parts.next()?.parse().ok()?;
    Some((days_from_civil(y, m, d) * 86_400 + h * 3600 + min * 60) * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_parses_locomo_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        assert_eq!(
            civil_from_days(days_from_civil(1999, 12, 31)),
            (1999, 12, 31)
        );
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
}
