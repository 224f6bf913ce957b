//! What a broker accepts in a message: the seam between [`Emitter`](crate::Emitter), which refuses
//! what the broker would reject before anything is written, and the publisher, which states it.

use crate::error::{Error, ErrorKind};

/// The size limit of an [`Emitter`](crate::Emitter) that was not built for a publisher: 1 MiB,
/// the largest message the AWS brokers accept without offloading. Build the emitter with
/// [`Emitter::for_publisher`](crate::Emitter::for_publisher) to check your broker's own limits.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The characters a broker accepts in message bodies and attribute values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CharacterSet {
    /// Every Unicode scalar value except NUL (which PostgreSQL's `text` and `jsonb` cannot hold).
    Unicode,
    /// The characters of XML 1.0: `#x9 | #xA | #xD | #x20–#xD7FF | #xE000–#xFFFD |
    /// #x10000–#x10FFFF` — what Amazon SQS and SNS accept.
    Xml,
}

impl CharacterSet {
    /// Whether `c` belongs to the set.
    pub fn contains(self, c: char) -> bool {
        match self {
            CharacterSet::Unicode => c != '\0',
            CharacterSet::Xml => matches!(c as u32,
                0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x10000..=0x10FFFF),
        }
    }
}

/// The limits of the messages a publisher sends, as [`Publisher::limits`](crate::Publisher::limits)
/// states them: `emit` checks every event against them before it writes the row, so an event the
/// broker would refuse fails in the writer's transaction instead of becoming a dead letter.
///
/// A message is the payload plus the event's attributes (see [`message`](crate::message)); its
/// size is counted with [`message_size`](crate::message::message_size).
///
/// ```
/// use outbox_core::limits::{CharacterSet, MessageLimits};
///
/// let limits = MessageLimits::new("my broker", 256 * 1024, CharacterSet::Xml);
/// assert_eq!(limits.max_message_bytes(), 262_144);
/// assert!(limits.check_text("aggregate_id", "order-1").is_ok());
/// assert!(limits.check_text("aggregate_id", "bell\u{7}").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct MessageLimits {
    broker: &'static str,
    max_message_bytes: usize,
    characters: CharacterSet,
    /// Who set the size limit, when not the broker (see [`MessageLimits::with_limit_holder`]).
    holder: Option<&'static str>,
}

impl Default for MessageLimits {
    /// [`MessageLimits::DEFAULT`].
    fn default() -> Self {
        MessageLimits::DEFAULT
    }
}

impl MessageLimits {
    /// The limits of a publisher that states none, and of [`Emitter::new`](crate::Emitter::new):
    /// [`DEFAULT_MAX_MESSAGE_BYTES`] and [`CharacterSet::Xml`]: what SQS accepts (SNS takes 256 KiB).
    pub const DEFAULT: MessageLimits =
        MessageLimits::new("the broker", DEFAULT_MAX_MESSAGE_BYTES, CharacterSet::Xml);

    /// Limits named after `broker` (it appears in error messages, e.g. `"SQS"`), of at most
    /// `max_message_bytes` per message, with `characters` allowed in text.
    pub const fn new(
        broker: &'static str,
        max_message_bytes: usize,
        characters: CharacterSet,
    ) -> Self {
        MessageLimits {
            broker,
            max_message_bytes,
            characters,
            holder: None,
        }
    }

    /// The same limits with a different size limit (e.g. a publisher that offloads large payloads
    /// raises it; an operator lowers it), said to be the broker's.
    pub const fn with_max_message_bytes(mut self, max_message_bytes: usize) -> Self {
        self.max_message_bytes = max_message_bytes;
        self.holder = None;
        self
    }

    /// The same limits, the size limit said to be `holder`'s rather than the broker's: a
    /// destination's own setting, which its owner may raise, where the broker's may not be. A
    /// refusal then reads `… ; <holder> allows at most N bytes` (e.g. `the queue's
    /// MaximumMessageSize`) instead of `… ; SQS accepts at most N bytes`.
    ///
    /// ```
    /// use outbox_core::limits::{CharacterSet, MessageLimits};
    ///
    /// let limits = MessageLimits::new("SQS", 1024 * 1024, CharacterSet::Xml)
    ///     .with_max_message_bytes(1024)
    ///     .with_limit_holder("the queue's MaximumMessageSize");
    /// let refused = limits.check_size("order.placed", 2000).unwrap_err();
    /// assert!(refused.to_string().ends_with("the queue's MaximumMessageSize allows at most 1024 bytes"));
    /// ```
    pub const fn with_limit_holder(mut self, holder: &'static str) -> Self {
        self.holder = Some(holder);
        self
    }

    /// Who set the size limit, when not the broker ([`with_limit_holder`](Self::with_limit_holder)).
    pub const fn limit_holder(&self) -> Option<&'static str> {
        self.holder
    }

    /// The broker's name, as error messages use it.
    pub const fn broker(&self) -> &'static str {
        self.broker
    }

    /// The largest message, payload and attributes, in bytes.
    pub const fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// The characters allowed in bodies and attribute values.
    pub const fn characters(&self) -> CharacterSet {
        self.characters
    }

    /// Refuses text the broker would reject in an attribute value (and that a log line could not
    /// show), naming the field and the first offending character.
    pub fn check_text(&self, field: &'static str, value: &str) -> Result<(), Error> {
        match value
            .char_indices()
            .find(|&(_, c)| !self.characters.contains(c))
        {
            None => Ok(()),
            Some((at, c)) => Err(Error::new(
                ErrorKind::InvalidText,
                format!(
                    "{field} holds U+{:04X} at byte {at}, which {} does not accept",
                    c as u32, self.broker
                ),
            )),
        }
    }

    /// Refuses a message of `size` bytes (see [`message_size`](crate::message::message_size)) that
    /// is over the limit.
    pub fn check_size(&self, event_type: &str, size: usize) -> Result<(), Error> {
        if size > self.max_message_bytes {
            let max = self.max_message_bytes;
            let whose = match self.holder {
                Some(holder) => format!("{holder} allows at most {max} bytes"),
                None => format!("{} accepts at most {max} bytes", self.broker),
            };
            return Err(Error::new(
                ErrorKind::TooLarge,
                format!("event `{event_type}` would be a {size}-byte message; {whose}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_character_ranges() {
        for ok in [
            '\t',
            '\n',
            '\r',
            ' ',
            'a',
            '\u{D7FF}',
            '\u{E000}',
            '\u{FFFD}',
            '\u{10000}',
            '😀',
        ] {
            assert!(CharacterSet::Xml.contains(ok), "{ok:?}");
            assert!(CharacterSet::Unicode.contains(ok), "{ok:?}");
        }
        for bad in [
            '\0', '\u{1}', '\u{8}', '\u{B}', '\u{1F}', '\u{FFFE}', '\u{FFFF}',
        ] {
            assert!(!CharacterSet::Xml.contains(bad), "{bad:?}");
        }
        assert!(!CharacterSet::Unicode.contains('\0'));
        assert!(CharacterSet::Unicode.contains('\u{1}'));
    }

    #[test]
    fn check_text_names_the_field_the_position_and_the_broker() {
        let limits = MessageLimits::new("SQS", 10, CharacterSet::Xml);
        let e = limits.check_text("aggregate_id", "ab\u{1}").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidText);
        assert!(
            e.to_string()
                .contains("aggregate_id holds U+0001 at byte 2, which SQS does not accept"),
            "{e}"
        );
        assert!(limits.check_text("x", "order-1 ✓").is_ok());
    }

    #[test]
    fn check_size_is_inclusive_and_names_the_limit() {
        let limits = MessageLimits::default().with_max_message_bytes(100);
        assert!(limits.check_size("order.placed", 100).is_ok());
        let e = limits.check_size("order.placed", 101).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        assert!(e.to_string().contains("101-byte"), "{e}");
        assert!(e.to_string().contains("at most 100 bytes"), "{e}");
    }
}
