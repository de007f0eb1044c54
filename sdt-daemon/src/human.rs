//! Human-readable sizes, durations, times and errors for progress lines and tables, and
//! text from a program or a store made safe to print.

use std::borrow::Cow;

/// `1536` → `1.5 KiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// Nanoseconds as `850 µs`, `12.3 ms` or `4.56 s`.
pub fn duration_ns(ns: u64) -> String {
    match ns {
        0..1_000_000 => format!("{} µs", ns / 1000),
        1_000_000..1_000_000_000 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// Nanoseconds since the Unix epoch as UTC ISO 8601 with milliseconds:
/// `2026-11-22T10:45:12.345Z`.
pub fn utc_timestamp(wall_ns: i64) -> String {
    let secs = wall_ns.div_euclid(1_000_000_000);
    let millis = wall_ns.rem_euclid(1_000_000_000) / 1_000_000;
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

/// `text` as it may reach a terminal: control characters (`\x1b`, `\n`, C1 controls),
/// the Unicode marks that reorder or hide text (bidirectional overrides and isolates,
/// zero-width and line separators) and `\` are written as escapes (`\x1b`, `\n`,
/// `\u{202e}`, `\\`); all other text, UTF-8 included, stays as it is. For anything a
/// program or a store said (attributes, paths, names, error messages).
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c == '\\'
        || c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// An error and its causes on one line: `outer: inner: errno text`.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(256 << 20), "256.0 MiB");
        assert_eq!(duration_ns(850_000), "850 µs");
        assert_eq!(duration_ns(12_340_000), "12.3 ms");
        assert_eq!(duration_ns(4_560_000_000), "4.56 s");
    }

    #[test]
    fn escapes_what_a_terminal_would_act_on() {
        assert_eq!(escape("phase=solve,iter=3"), "phase=solve,iter=3");
        assert!(matches!(escape("/usr/lib/libc.so.6"), Cow::Borrowed(_)));
        assert_eq!(escape("grüße 日本 ok"), "grüße 日本 ok");
        assert_eq!(escape("a\x1b[31mred\x1b[0m"), "a\\x1b[31mred\\x1b[0m");
        assert_eq!(escape("two\nlines\r\tx\0"), "two\\nlines\\r\\tx\\x00");
        assert_eq!(escape("\u{7f}\u{9b}31m"), "\\x7f\\u{9b}31m");
        assert_eq!(escape("evil\u{202e}fdp.exe"), "evil\\u{202e}fdp.exe");
        assert_eq!(escape("C:\\x1b"), "C:\\\\x1b", "a backslash is escaped, so escapes are unambiguous");
    }

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00.000Z");
        // date -u -d @1795344312.345 → 2026-11-22 10:45:12 UTC
        assert_eq!(utc_timestamp(1_795_344_312_345_000_000), "2026-11-22T10:45:12.345Z");
        assert_eq!(utc_timestamp(951_782_400_000_000_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_timestamp(-1_000_000), "1969-12-31T23:59:59.999Z");
    }
}
