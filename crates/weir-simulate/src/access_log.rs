//! Access log lines in the common (and combined) log format:
//! `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326 ...`.
//!
//! Only the client address (the first field, the key) and the time are read; the
//! time has whole seconds, so the requests of one second arrive together.

/// The request's time (milliseconds since the Unix epoch) and client address.
pub(super) fn line(text: &str) -> Result<(u64, &str), String> {
    let key = text
        .split_ascii_whitespace()
        .next()
        .ok_or("an empty line")?;
    let open = text
        .find('[')
        .ok_or("not a common log format line: no `[time]`")?;
    let close = text[open..]
        .find(']')
        .ok_or("not a common log format line: no `]` after the time")?;
    let time = &text[open + 1..open + close];
    let seconds = timestamp(time).ok_or_else(|| {
        format!("cannot read the time `{time}`: expected e.g. `10/Oct/2000:13:55:36 -0700`")
    })?;
    let ms = u64::try_from(seconds)
        .ok()
        .and_then(|s| s.checked_mul(1000))
        .ok_or_else(|| format!("the time `{time}` is before 1970"))?;
    Ok((ms, key))
}

/// `dd/Mon/yyyy:HH:MM:SS ±hhmm` as seconds since the Unix epoch.
fn timestamp(text: &str) -> Option<i64> {
    let (date_time, zone) = text.split_once(' ')?;
    let mut parts = date_time.splitn(4, ':');
    let date = parts.next()?;
    let [hour, minute, second] = [parts.next()?, parts.next()?, parts.next()?].map(number);
    let mut date = date.split('/');
    let day = number(date.next()?)?;
    let month_name = date.next()?;
    let month = MONTHS.iter().position(|&m| m == month_name)? as i64 + 1;
    let year = number(date.next()?)?;
    let (hour, minute, second) = (hour?, minute?, second?);
    if date.next().is_some() || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let zone = number(&zone[1..]).filter(|_| zone.len() == 5)?;
    let offset = sign * ((zone / 100) * 3600 + (zone % 100) * 60);
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Digits only (no sign), as a number.
fn number(text: &str) -> Option<i64> {
    if text.is_empty() || text.len() > 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (Howard
/// Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_apache_example() {
        let text = r#"127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08""#;
        // 2000-10-10T20:55:36Z
        assert_eq!(line(text), Ok((971_211_336_000, "127.0.0.1")));
    }

    #[test]
    fn reads_dates_across_the_calendar() {
        assert_eq!(timestamp("01/Jan/1970:00:00:00 +0000"), Some(0));
        assert_eq!(timestamp("29/Feb/2024:12:00:00 +0130"), Some(1_709_202_600));
        assert_eq!(timestamp("31/Dec/2099:23:59:59 +0000"), Some(4_102_444_799));
    }

    #[test]
    fn refuses_what_is_not_a_log_line() {
        for bad in [
            "",
            "1.2.3.4 - - 10/Oct/2000:13:55:36 -0700 \"GET /\"",
            "1.2.3.4 - - [10/Oct/2000:13:55:36 -0700",
            "1.2.3.4 - - [10/Foo/2000:13:55:36 -0700]",
            "1.2.3.4 - - [10/Oct/2000:25:55:36 -0700]",
            "1.2.3.4 - - [10/Oct/2000:13:55:36]",
            "1.2.3.4 - - [10/Oct/2000:13:55:36 0700]",
            "1.2.3.4 - - [31/Dec/1969:23:59:59 +0000]",
        ] {
            assert!(line(bad).is_err(), "{bad}");
        }
    }
}
