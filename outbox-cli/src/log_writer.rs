//! Where text log lines go: stderr, one line per record, control characters escaped.
//!
//! Field values come from the rows (an `aggregate_id` a user typed, an event type) and from
//! servers' error texts. Written raw, a newline in one forges a log line of its own, and an escape
//! sequence drives the operator's terminal. Each record reaches the writer whole (the formatter
//! writes it in one piece): every control character in it but its final newline is written
//! escaped (`\n`, `\u{1b}`, as `outbox dead-letters list` shows them), except the colour codes
//! (`ESC [ … m`) the formatter itself adds when stderr is a terminal.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// Makes [`EscapingWriter`]s on stderr.
#[derive(Debug, Clone, Copy)]
pub struct EscapingStderr {
    /// Colour codes are kept (stderr is a terminal and colours are on).
    pub colour: bool,
}

impl<'a> MakeWriter<'a> for EscapingStderr {
    type Writer = EscapingWriter;

    fn make_writer(&'a self) -> Self::Writer {
        EscapingWriter {
            colour: self.colour,
        }
    }
}

/// Writes to stderr with control characters escaped.
#[derive(Debug)]
pub struct EscapingWriter {
    colour: bool,
}

impl Write for EscapingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let escaped = escape(buf, self.colour);
        io::stderr().lock().write_all(&escaped)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// The length of the colour code (`ESC [ digits/semicolons m`) at the start of `rest`, if one is.
fn colour_code(rest: &[u8]) -> Option<usize> {
    let body = rest.strip_prefix(b"\x1b[")?;
    let digits = body
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b';')
        .count();
    (body.get(digits) == Some(&b'm')).then_some(2 + digits + 1)
}

/// `record` with every control character except a final newline (and, with `colour`, colour
/// codes) escaped. Bytes that are not UTF-8 stay as they are.
pub fn escape(record: &[u8], colour: bool) -> Vec<u8> {
    let (body, end) = match record.strip_suffix(b"\n") {
        Some(body) => (body, &b"\n"[..]),
        None => (record, &b""[..]),
    };
    if !body.iter().any(|b| b.is_ascii_control()) {
        return record.to_vec();
    }
    let mut out = Vec::with_capacity(record.len() + 16);
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        if colour {
            if let Some(n) = colour_code(&body[i..]) {
                out.extend_from_slice(&body[i..i + n]);
                i += n;
                continue;
            }
        }
        if b.is_ascii_control() {
            for c in char::from(b).escape_debug() {
                let mut utf8 = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        } else {
            out.push(b);
        }
        i += 1;
    }
    out.extend_from_slice(end);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(record: &str, colour: bool) -> String {
        String::from_utf8(escape(record.as_bytes(), colour)).unwrap()
    }

    #[test]
    fn a_record_stays_one_line_without_raw_control_characters() {
        let forged = "WARN dead-lettered aggregate_id=inj\n2026-12-04T00:00:00Z ERROR forged \x1b[31mred\r\x07\n";
        let out = text(forged, false);
        assert_eq!(
            out,
            "WARN dead-lettered aggregate_id=inj\\n2026-12-04T00:00:00Z ERROR forged \\u{1b}[31mred\\r\\u{7}\n"
        );
        assert_eq!(out.matches('\n').count(), 1);
        assert!(!out.bytes().any(|b| b == 0x1b));
    }

    #[test]
    fn plain_records_and_non_ascii_text_pass_unchanged() {
        for r in [
            "INFO relay started\n",
            "INFO ümlaut 😀 tab-free\n",
            "no newline",
        ] {
            assert_eq!(text(r, false), r);
        }
    }

    #[test]
    fn colour_codes_are_kept_only_with_colour_and_other_escapes_never() {
        let r = "\x1b[2m2026\x1b[0m \x1b[33mWARN\x1b[0m id=\x1b]0;title\x07 \x1b[1;31mX\x1b[0m\n";
        assert_eq!(
            text(r, true),
            "\x1b[2m2026\x1b[0m \x1b[33mWARN\x1b[0m id=\\u{1b}]0;title\\u{7} \x1b[1;31mX\x1b[0m\n"
        );
        assert!(!text(r, false).contains('\x1b'));
    }
}
