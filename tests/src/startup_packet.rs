//! Start-up messages as a pooler or an older server treats them: refused, or passed on without
//! their `options` (for [`BlackHoleProxy`](crate::BlackHoleProxy)).

/// Start-ups are passed on.
pub(crate) const REFUSE_NONE: u8 = 0;
/// Start-ups carrying `options` are refused, as PgBouncer refuses them.
pub(crate) const REFUSE_OPTIONS: u8 = 1;
/// Start-ups asking for `idle_session_timeout` are refused, as PostgreSQL before 14 refuses them.
pub(crate) const REFUSE_IDLE_LIMIT: u8 = 2;

/// The answer to `startup` when it is refused under `mode` (one of the `REFUSE_` constants).
pub(crate) fn refusal(mode: u8, startup: &[u8]) -> Option<Vec<u8>> {
    let carries = |bytes: &[u8]| startup.windows(bytes.len()).any(|w| w == bytes);
    match mode {
        REFUSE_OPTIONS if carries(b"options\0") => {
            Some(fatal("08P01", "unsupported startup parameter: options"))
        }
        REFUSE_IDLE_LIMIT if carries(b"idle_session_timeout") => Some(fatal(
            "42704",
            "unrecognized configuration parameter \"idle_session_timeout\"",
        )),
        _ => None,
    }
}

/// A FATAL `ErrorResponse` with SQLSTATE `code`.
fn fatal(code: &str, text: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (field, value) in [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', code), (b'M', text)] {
        fields.push(field);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    let len = u32::try_from(fields.len() + 4).expect("a short message");
    message.extend_from_slice(&len.to_be_bytes());
    message.extend_from_slice(&fields);
    message
}

/// A start-up message (`length`, protocol version, then name and value strings up to an empty
/// name) without its `options` parameter; anything else unchanged.
pub(crate) fn without_options(startup: &[u8]) -> Vec<u8> {
    if startup.len() < 8 {
        return startup.to_vec();
    }
    let mut fields = startup[8..].split(|b| *b == 0);
    let mut kept = startup[4..8].to_vec();
    while let (Some(name), Some(value)) = (fields.next(), fields.next()) {
        if name.is_empty() {
            break;
        }
        if name != b"options" {
            for part in [name, value] {
                kept.extend_from_slice(part);
                kept.push(0);
            }
        }
    }
    kept.push(0);
    let len = u32::try_from(kept.len() + 4).expect("a short message");
    let mut message = len.to_be_bytes().to_vec();
    message.extend_from_slice(&kept);
    message
}
