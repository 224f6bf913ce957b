//! Default names: splitting a Rust identifier into words, and checking a name's characters.
//!
//! The rules here are documented on the derive (`lib.rs`); keep the two in step.

/// The longest `aggregate` or `event_type` accepted, in bytes.
pub const MAX_LEN: usize = 256;

/// The punctuation allowed in a name besides ASCII letters and digits.
pub const PUNCTUATION: &[char] = &['.', '_', '-', ':', '/'];

/// Splits an identifier (without `r#`) into lowercase words.
///
/// - `_` separates words and is dropped.
/// - An uppercase letter starts a new word when it follows a lowercase letter or a digit
///   (`OrderCreated` → `order`, `created`; `V2Created` → `v2`, `created`).
/// - A run of uppercase letters is one word (an acronym), except that its last letter starts the
///   next word when a lowercase letter follows it (`HTTPRequestSent` → `http`, `request`, `sent`;
///   `SentToAPI` → `sent`, `to`, `api`).
/// - Digits belong to the word they follow (`Order2Created` → `order2`, `created`).
pub fn words(ident: &str) -> Vec<String> {
    let chars: Vec<char> = ident.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if c.is_uppercase() && !word.is_empty() {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let starts_word =
                prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_is_lower);
            if starts_word {
                words.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Drops a last word `event` or `events` (`OrderEvent` → `order`).
pub fn strip_event_suffix(mut words: Vec<String>) -> Vec<String> {
    if words.last().is_some_and(|w| w == "event" || w == "events") {
        words.pop();
    }
    words
}

/// Why `value` is not a valid `aggregate` or `event_type`, if it is not.
///
/// Valid: 1 to [`MAX_LEN`] bytes of ASCII letters, digits and [`PUNCTUATION`], starting with a
/// letter.
pub fn check(value: &str) -> Result<(), String> {
    let Some(first) = value.chars().next() else {
        return Err("it is empty".to_owned());
    };
    if value.len() > MAX_LEN {
        return Err(format!(
            "it is {} bytes long; the limit is {MAX_LEN}",
            value.len()
        ));
    }
    if let Some((at, c)) = value
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || PUNCTUATION.contains(&c)))
    {
        return Err(format!(
            "it contains {} at byte {at}; allowed are ASCII letters, digits and `. _ - : /`",
            describe(c)
        ));
    }
    if !first.is_ascii_alphabetic() {
        return Err(format!(
            "it starts with `{first}`; it must start with an ASCII letter"
        ));
    }
    Ok(())
}

/// A character for an error message: visible ones quoted, others by code point.
fn describe(c: char) -> String {
    if c.is_whitespace() || c.is_control() {
        format!("{:?} (U+{:04X})", c, c as u32)
    } else {
        format!("`{c}` (U+{:04X})", c as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(ident: &str) -> String {
        words(ident).join(".")
    }

    #[test]
    fn splits_camel_case() {
        assert_eq!(split("OrderCreated"), "order.created");
        assert_eq!(split("Created"), "created");
        assert_eq!(split("HTTPRequestSent"), "http.request.sent");
        assert_eq!(split("SentToAPI"), "sent.to.api");
        assert_eq!(split("IOError"), "io.error");
        assert_eq!(split("OrderV2Created"), "order.v2.created");
        assert_eq!(split("Order2Created"), "order2.created");
        assert_eq!(split("Order_Created"), "order.created");
        assert_eq!(split("_Order__Created_"), "order.created");
        assert_eq!(split("lowercase"), "lowercase");
        assert_eq!(split("A"), "a");
        assert_eq!(split("ABC"), "abc");
        assert_eq!(split("ÄnderungErfasst"), "änderung.erfasst");
    }

    #[test]
    fn strips_event_suffix() {
        let strip = |s: &str| strip_event_suffix(words(s)).join("_");
        assert_eq!(strip("OrderEvent"), "order");
        assert_eq!(strip("ShoppingCartEvents"), "shopping_cart");
        assert_eq!(strip("Order"), "order");
        assert_eq!(strip("Event"), "");
        assert_eq!(strip("EventLog"), "event_log");
    }

    #[test]
    fn checks_names() {
        assert!(check("order.created").is_ok());
        assert!(check("billing/invoice:v2_paid-late").is_ok());
        assert!(check(&"a".repeat(MAX_LEN)).is_ok());
        assert_eq!(check("").unwrap_err(), "it is empty");
        assert!(
            check(&"a".repeat(MAX_LEN + 1))
                .unwrap_err()
                .contains("257 bytes")
        );
        assert!(
            check("order created")
                .unwrap_err()
                .contains("' ' (U+0020) at byte 5")
        );
        assert!(
            check("order\ncreated")
                .unwrap_err()
                .contains("'\\n' (U+000A)")
        );
        assert!(
            check("ordér")
                .unwrap_err()
                .contains("`é` (U+00E9) at byte 3")
        );
        assert!(check("1order").unwrap_err().contains("starts with `1`"));
        assert!(check(".order").unwrap_err().contains("starts with `.`"));
    }
}
