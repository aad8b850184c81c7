//! Numbers for reading: how every printed table, `report.md` and the charts write a
//! number. `results.json` keeps the exact values; these strings are for people.
//!
//! - counts (instructions, cycles, repetitions): thousands separators, no decimals from
//!   100 up (`21,446,393`), one decimal below when the count is fractional (`10.5`);
//! - ratios and other derived values: about three significant digits (`1.13`, `31.3`,
//!   `0.21`), thousands separators from 1,000 up, no exponent notation;
//! - durations: the most readable of s, ms, µs, ns.
//!
//! Not-a-number prints as `n/a` and infinities as `∞` / `-∞`: a division by a zero row
//! must still produce a report, never a panic.

/// What a NaN prints as.
const NOT_A_NUMBER: &str = "n/a";

/// The text of a non-finite value, or `None` for a finite one.
fn non_finite(value: f64) -> Option<String> {
    if value.is_nan() {
        Some(NOT_A_NUMBER.to_string())
    } else if value == f64::INFINITY {
        Some("∞".to_string())
    } else if value == f64::NEG_INFINITY {
        Some("-∞".to_string())
    } else {
        None
    }
}

/// Inserts a comma between every group of three digits of `digits` (ASCII digits only).
fn separate_thousands(digits: &str) -> String {
    let mut separated = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            separated.push(',');
        }
        separated.push(digit);
    }
    separated
}

/// `value` rounded to `decimals` places, with thousands separators in its integer part
/// (`21446393.0` → `21,446,393`; `-1234.56`, 1 → `-1,234.6`). A value that rounds to zero
/// prints without a sign.
fn with_separators(value: f64, decimals: usize) -> String {
    if let Some(text) = non_finite(value) {
        return text;
    }
    let rounded = format!("{:.decimals$}", value.abs());
    let (integer, fraction) = match rounded.split_once('.') {
        Some((integer, fraction)) => (integer, Some(fraction)),
        None => (rounded.as_str(), None),
    };
    let is_zero = rounded.bytes().all(|byte| byte == b'0' || byte == b'.');
    let mut text = String::new();
    if value < 0.0 && !is_zero {
        text.push('-');
    }
    text.push_str(&separate_thousands(integer));
    if let Some(fraction) = fraction {
        text.push('.');
        text.push_str(fraction);
    }
    text
}

/// `value` rounded to the nearest integer, with thousands separators (`21446393.0` →
/// `21,446,393`).
pub fn grouped(value: f64) -> String {
    with_separators(value, 0)
}

/// `value` with exactly `decimals` decimal places and thousands separators (`1402.3457`, 3
/// → `1,402.346`), for columns whose unit fixes the precision (milliseconds to the µs).
pub fn fixed(value: f64, decimals: usize) -> String {
    with_separators(value, decimals)
}

/// A count per operation (instructions, modelled cycles): from 100 up a grouped integer
/// (`1,286`), below it one decimal if the count is fractional (`10.5`, `31`). The exact
/// value is in results.json.
pub fn count(value: f64) -> String {
    if !value.is_finite() || value.abs() >= 99.95 {
        return grouped(value);
    }
    let tenths = (value * 10.0).round();
    if tenths % 10.0 == 0.0 { grouped(value) } else { with_separators(value, 1) }
}

/// About three significant digits, for ratios and values derived from counts (they span
/// 0.001–10⁴): `1,533`, `123`, `31.3`, `1.13`; below 1, two significant digits (`0.21`,
/// `0.050`, `0.0066`), so a bound of 0.05 does not print as `0.0500`.
pub fn significant(value: f64) -> String {
    if let Some(text) = non_finite(value) {
        return text;
    }
    let magnitude = value.abs();
    if magnitude == 0.0 {
        return "0".to_string();
    }
    let decimals = if magnitude >= 99.95 {
        0
    } else if magnitude >= 9.995 {
        1
    } else if magnitude >= 0.9995 {
        2
    } else {
        // Two significant digits: 0.21 (1 leading place) → 2 decimals, 0.0066 → 4. The
        // cap keeps a denormal from printing 300 zeros; it prints as 0 instead.
        let leading_zeros = (-magnitude.log10()).floor() as usize;
        (leading_zeros + 2).min(12)
    };
    with_separators(value, decimals)
}

/// [`significant`] without trailing zeros after the decimal point, for round values
/// such as axis ticks (`1`, `0.1`, `0.05`, `20`, `1,000`).
pub fn trimmed(value: f64) -> String {
    let text = significant(value);
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

/// A ratio: [`significant`] followed by `×` (`1.1349` → `1.13×`).
pub fn ratio(value: f64) -> String {
    format!("{}×", significant(value))
}

/// An optional value through [`significant`]; `-` when absent.
pub fn optional(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), significant)
}

/// Seconds as the most readable of s / ms / µs / ns, with [`significant`] digits.
pub fn duration(seconds: f64) -> String {
    if let Some(text) = non_finite(seconds) {
        return text;
    }
    let magnitude = seconds.abs();
    if magnitude >= 1.0 || magnitude == 0.0 {
        format!("{} s", significant(seconds))
    } else if magnitude >= 1e-3 {
        format!("{} ms", significant(seconds * 1e3))
    } else if magnitude >= 1e-6 {
        format!("{} µs", significant(seconds * 1e6))
    } else {
        format!("{} ns", significant(seconds * 1e9))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_integers() {
        assert_eq!(grouped(0.0), "0");
        assert_eq!(grouped(999.0), "999");
        assert_eq!(grouped(1000.0), "1,000");
        assert_eq!(grouped(21_446_393.0), "21,446,393");
        assert_eq!(grouped(123_456.0), "123,456");
        assert_eq!(grouped(1_234_567_890.4), "1,234,567,890");
        assert_eq!(grouped(999.6), "1,000", "rounding carries into a new group");
        assert_eq!(grouped(-1234.0), "-1,234");
        assert_eq!(grouped(-0.3), "0", "no negative zero");
        assert_eq!(grouped(4096.0), "4,096");
    }

    #[test]
    fn fixed_decimals() {
        assert_eq!(fixed(1402.345678, 3), "1,402.346");
        assert_eq!(fixed(656.25, 3), "656.250");
        assert_eq!(fixed(0.0004, 3), "0.000");
        assert_eq!(fixed(-0.0004, 3), "0.000", "no negative zero");
        assert_eq!(fixed(-1.5, 2), "-1.50");
        assert_eq!(fixed(f64::NAN, 3), "n/a");
    }

    #[test]
    fn counts_keep_a_decimal_only_when_small_and_fractional() {
        assert_eq!(count(21_446_393.0), "21,446,393");
        assert_eq!(count(1286.125), "1,286");
        assert_eq!(count(818.25), "818");
        assert_eq!(count(10.5), "10.5");
        assert_eq!(count(31.0), "31");
        assert_eq!(count(31.001), "31");
        assert_eq!(count(0.5), "0.5");
        assert_eq!(count(0.0), "0");
        assert_eq!(count(99.96), "100");
    }

    #[test]
    fn significant_digits() {
        assert_eq!(significant(1533.4), "1,533");
        assert_eq!(significant(12_345.6), "12,346");
        assert_eq!(significant(123.4), "123");
        assert_eq!(significant(31.32), "31.3");
        assert_eq!(significant(1.1349), "1.13");
        assert_eq!(significant(1.0), "1.00");
        assert_eq!(significant(0.5), "0.50");
        assert_eq!(significant(0.2146), "0.21");
        assert_eq!(significant(0.05), "0.050");
        assert_eq!(significant(0.0066), "0.0066");
        assert_eq!(significant(0.0), "0");
        assert_eq!(significant(-2.5), "-2.50");
        assert_eq!(significant(9.999), "10.0", "rounding up moves to the next band");
        assert_eq!(significant(0.99999), "1.00");
        assert!(!significant(1e-300).contains('e'), "no exponent notation");
    }

    #[test]
    fn trimmed_round_values() {
        assert_eq!(trimmed(1.0), "1");
        assert_eq!(trimmed(0.1), "0.1");
        assert_eq!(trimmed(0.05), "0.05");
        assert_eq!(trimmed(20.0), "20");
        assert_eq!(trimmed(1000.0), "1,000");
        assert_eq!(trimmed(1.25), "1.25");
        assert_eq!(trimmed(f64::NAN), "n/a");
    }

    #[test]
    fn ratios() {
        assert_eq!(ratio(1.1349), "1.13×");
        assert_eq!(ratio(32.3), "32.3×");
        assert_eq!(ratio(0.366), "0.37×");
        assert_eq!(ratio(2983.0), "2,983×");
    }

    #[test]
    fn non_finite_values_print_without_panicking() {
        for format in [grouped, count, significant, ratio, duration] {
            assert!(format(f64::NAN).starts_with("n/a"));
            assert!(format(f64::INFINITY).starts_with('∞'));
            assert!(format(f64::NEG_INFINITY).starts_with("-∞"));
        }
        assert_eq!(ratio(f64::INFINITY), "∞×");
        assert_eq!(grouped(f64::MAX).len(), 309 + 102, "309 digits and 102 separators");
        assert_eq!(optional(None), "-");
        assert_eq!(optional(Some(f64::NAN)), "n/a");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(0.3276), "328 ms");
        assert_eq!(duration(2.8e-6), "2.80 µs");
        assert_eq!(duration(4.1667e-3), "4.17 ms");
        assert_eq!(duration(1.5), "1.50 s");
        assert_eq!(duration(3.2e-9), "3.20 ns");
        assert_eq!(duration(0.0), "0 s");
        assert_eq!(duration(5000.0), "5,000 s");
    }
}
