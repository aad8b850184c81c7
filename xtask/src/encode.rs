//! Encoding console lines for the kernel command line (`spindle.script=`).
//!
//! Lines are percent-encoded (everything but ASCII letters, digits and `-_./:=+@`) and
//! joined with commas; the kernel's `bootargs::decode_line` reverses it.

/// Encodes one line.
pub fn encode_line(line: &str) -> String {
    let mut encoded = String::with_capacity(line.len());
    for byte in line.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_./:=+@".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// Encodes a script: every line encoded, joined with commas.
pub fn encode_script(lines: &[String]) -> String {
    lines.iter().map(|line| encode_line(line)).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_commas_and_quotes_are_escaped() {
        assert_eq!(encode_line("ext load hello"), "ext%20load%20hello");
        assert_eq!(encode_line("a,b"), "a%2Cb");
        assert_eq!(encode_line("say \"hi\""), "say%20%22hi%22");
    }

    #[test]
    fn script_joins_with_commas() {
        let lines = vec!["mem".to_string(), "echo a b".to_string(), "halt".to_string()];
        assert_eq!(encode_script(&lines), "mem,echo%20a%20b,halt");
    }

    #[test]
    fn non_ascii_is_escaped_bytewise() {
        assert_eq!(encode_line("é"), "%C3%A9");
    }
}
