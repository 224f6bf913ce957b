//! `outbox dead-letters list | retry | purge`.

use crate::output::out;
use std::io::{BufRead, IsTerminal, Write};

use outbox_core::DeadLetterFilter;

use crate::cli::{DeadLettersCommand, FilterArgs, SelectArgs};
use crate::{Failure, db};

fn filter(args: &FilterArgs) -> DeadLetterFilter {
    DeadLetterFilter {
        ids: None,
        event_type: args.event_type.clone(),
        aggregate_type: args.aggregate_type.clone(),
        aggregate_id: args.aggregate_id.clone(),
    }
}

/// The filter a retry or purge applies; refuses an empty selection without `--all`.
fn selection(args: &SelectArgs) -> Result<DeadLetterFilter, Failure> {
    let mut f = filter(&args.filter);
    if !args.ids.is_empty() {
        f.ids = Some(args.ids.clone());
    }
    if f.is_empty() && !args.all {
        return Err("say which dead letters: give event ids, a filter \
            (--event-type, --aggregate-type, --aggregate-id) or --all"
            .into());
    }
    Ok(f)
}

/// Runs a dead-letter subcommand.
pub async fn run(url: Option<&str>, command: DeadLettersCommand) -> Result<(), Failure> {
    match command {
        DeadLettersCommand::List {
            filter: args,
            limit,
            json,
        } => {
            let conn = db::connect_bounded(url).await?;
            // One more than asked: whether there are more to say so.
            let asked = limit.saturating_add(1);
            let mut rows = conn
                .answer(outbox_core::list_dead_letters(
                    conn.client(),
                    &filter(&args),
                    asked,
                ))
                .await?;
            let more = usize::try_from(limit).is_ok_and(|limit| rows.len() > limit);
            rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            let note = format!(
                "more not shown: the first {limit} dead letters are listed (raise --limit, or \
                 narrow with a filter; `outbox stats` counts them)"
            );
            if json {
                out!("{}", serde_json::to_string_pretty(&rows)?);
                if more {
                    // A log line (stdout holds the JSON): in the format `--log-format` asks for.
                    tracing::warn!(limit, "{note}");
                }
                return Ok(());
            }
            if rows.is_empty() {
                out!("no dead letters");
                return Ok(());
            }
            out!(
                "{:<36}  {:<24}  {:<28}  {:>8}  {:<20}  last error",
                "event id",
                "event type",
                "aggregate",
                "attempts",
                // Times are UTC (the session's TimeZone does not apply: a black-box run on a
                // +13:45 server read them as local).
                "dead since (UTC)"
            );
            for r in rows {
                let aggregate = printable(&format!("{}/{}", r.aggregate_type, r.aggregate_id));
                let error = printable_within(&r.last_error.unwrap_or_default(), ERROR_SHOWN_CHARS);
                out!(
                    "{:<36}  {:<24}  {:<28}  {:>8}  {:<20}  {error}",
                    r.id,
                    printable(&r.event_type),
                    aggregate,
                    r.attempts,
                    r.dead_lettered_at.format("%Y-%m-%d %H:%M:%S")
                );
            }
            if more {
                out!("{note}");
            }
            Ok(())
        }
        DeadLettersCommand::Retry(args) => {
            let f = selection(&args)?;
            let conn = db::connect_bounded(url).await?;
            let ids = conn
                .answer(outbox_core::retry_dead_letters(conn.client(), &f))
                .await?;
            out!("retried {}", dead_letters(ids.len()));
            for id in &ids {
                out!("{id}");
            }
            unmatched(&args.ids, &ids)
        }
        DeadLettersCommand::Purge { select, yes } => {
            let f = selection(&select)?;
            if !yes {
                refuse_without_terminal()?;
            }
            let mut conn = db::connect_bounded(url).await?;
            // The ids are captured now: the purge deletes exactly these, not whatever matches the
            // filter by the time the operator answers.
            let ids = conn
                .answer(outbox_core::dead_letter_ids(conn.client(), &f))
                .await?;
            if ids.is_empty() {
                out!("no dead letters match; nothing deleted");
                return unmatched(&select.ids, &ids);
            }
            // Named ids that are not dead letters fail the command before anything is deleted.
            unmatched(&select.ids, &ids)?;
            if !yes {
                conn.answer(show_purge(conn.client(), &ids)).await?;
                if !confirm(&format!(
                    "delete {} for good?",
                    match ids.len() {
                        1 => "this dead letter".to_owned(),
                        n => format!("these {n} dead letters"),
                    }
                ))? {
                    out!("nothing deleted");
                    return Ok(());
                }
                // The server ends a session idle for its idle_session_timeout (asked for at
                // start-up): an operator may take longer to answer.
                if conn.client().is_closed() {
                    conn = db::connect_bounded(url).await?;
                }
            }
            let purged = conn
                .answer(outbox_core::purge_dead_letter_ids(conn.client(), &ids))
                .await?;
            out!("purged {}", dead_letters(purged.len()));
            if purged.len() < ids.len() {
                out!(
                    "{} of those shown were no longer dead letters (retried or removed meanwhile) \
                     and were kept",
                    ids.len() - purged.len()
                );
            }
            for id in purged {
                out!("{id}");
            }
            Ok(())
        }
    }
}

/// Fails, naming them, when some of the event ids the operator gave (`asked`) are not among the
/// dead letters the command found (`found`): a mistyped id, or an event that is not (or no longer)
/// a dead letter. A filter that matches nothing is not a failure; an id that matches nothing is.
/// Each is named once, however often it was given.
fn unmatched(asked: &[uuid::Uuid], found: &[uuid::Uuid]) -> Result<(), Failure> {
    let mut named = std::collections::HashSet::new();
    let missing: Vec<String> = asked
        .iter()
        .filter(|id| !found.contains(id) && named.insert(**id))
        .map(ToString::to_string)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} of the event ids given {} not a dead letter (no such event, or not dead, or it did \
         not match the filter): {}",
        missing.len(),
        if missing.len() == 1 { "is" } else { "are" },
        missing.join(", ")
    )
    .into())
}

/// The characters of a value a table row shows (`--json` shows them whole).
const MAX_SHOWN_CHARS: usize = 100;

/// The characters of the last error a table row shows (the row's last column).
const ERROR_SHOWN_CHARS: usize = 80;

/// `text` with control characters and noncharacters escaped (`\n`, `\u{1b}`, `\u{fffe}`): stored
/// text (an error message, an id written by hand) must not break the table's lines, send escape
/// sequences to the terminal, or show nothing where a character is (U+FFFE printed raw looked like
/// no character at all: black-box run). Cut at [`MAX_SHOWN_CHARS`] (a hand-written row's 100 000-
/// character event type made a 100 kB table row).
fn printable(text: &str) -> String {
    printable_within(text, MAX_SHOWN_CHARS)
}

/// [`printable`], cut at `max` characters, with `…` where it is cut (the last error was cut
/// without one).
fn printable_within(text: &str, max: usize) -> String {
    let text: std::borrow::Cow<'_, str> = match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]).into(),
        None => text.into(),
    };
    let hidden = |c: char| c.is_control() || is_noncharacter(c);
    if !text.chars().any(hidden) {
        return text.into_owned();
    }
    text.chars()
        .map(|c| {
            if hidden(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// One of Unicode's 66 noncharacters (U+FDD0–U+FDEF, and the last two of every plane).
fn is_noncharacter(c: char) -> bool {
    let n = c as u32;
    (0xFDD0..=0xFDEF).contains(&n) || n & 0xFFFE == 0xFFFE
}

/// How many of the dead letters to be purged are listed before the question.
const PURGE_SHOWN: usize = 20;

/// Lists (the first [`PURGE_SHOWN`] of) the dead letters with these ids.
async fn show_purge<C: outbox_core::GenericClient>(
    client: &C,
    ids: &[uuid::Uuid],
) -> Result<(), Failure> {
    let shown = DeadLetterFilter {
        ids: Some(ids.iter().take(PURGE_SHOWN).copied().collect()),
        ..DeadLetterFilter::default()
    };
    for r in outbox_core::list_dead_letters(client, &shown, PURGE_SHOWN as i64).await? {
        let error = printable(
            &r.last_error
                .unwrap_or_default()
                .chars()
                .take(60)
                .collect::<String>(),
        );
        out!(
            "{}  {}  {}  {error}",
            r.id,
            printable(&r.event_type),
            printable(&format!("{}/{}", r.aggregate_type, r.aggregate_id))
        );
    }
    if ids.len() > PURGE_SHOWN {
        out!("… and {} more", ids.len() - PURGE_SHOWN);
    }
    Ok(())
}

/// Refuses a purge that would have to ask, with no terminal to ask on (use --yes in scripts): a
/// usage error (exit 2), found before the database is contacted, so that a script sees only the
/// refusal, whatever matches (black-box run: it exited 1, after connecting, and only when
/// something matched).
fn refuse_without_terminal() -> Result<(), Failure> {
    if std::io::stdin().is_terminal() {
        return Ok(());
    }
    Err(crate::usage::usage(
        "refusing to purge without confirmation: stdin is not a terminal; pass --yes to confirm",
    ))
}

/// Asks on the terminal.
fn confirm(question: &str) -> Result<bool, Failure> {
    let stdin = std::io::stdin();
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// "1 dead letter", "these 2 dead letters": a count with its noun.
fn dead_letters(n: usize) -> String {
    if n == 1 {
        "1 dead letter".to_owned()
    } else {
        format!("{n} dead letters")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_characters_and_cuts_long_values() {
        assert_eq!(printable("a\nb"), "a\\nb");
        assert_eq!(printable("order.created"), "order.created");
        assert_eq!(printable("A\u{FFFE}q\u{10FFFF}"), "A\\u{fffe}q\\u{10ffff}");
        assert_eq!(printable("ｘ\u{FF01}é"), "ｘ\u{FF01}é");
        assert_eq!(printable_within("abcdef", 3), "abc…");
        assert_eq!(printable_within("abc", 3), "abc");
        let long = "u".repeat(100_000);
        assert_eq!(
            printable(&long),
            format!("{}…", "u".repeat(MAX_SHOWN_CHARS))
        );
    }
}
