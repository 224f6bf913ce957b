//! `outbox dead-letters list | retry | purge`.

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
            let client = db::connect(url).await?;
            let rows = outbox_core::list_dead_letters(&client, &filter(&args), limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(());
            }
            if rows.is_empty() {
                println!("no dead letters");
                return Ok(());
            }
            println!(
                "{:<36}  {:<24}  {:<28}  {:>8}  {:<20}  last error",
                "event id", "event type", "aggregate", "attempts", "dead since"
            );
            for r in rows {
                let aggregate = format!("{}/{}", r.aggregate_type, r.aggregate_id);
                let error: String = r.last_error.unwrap_or_default().chars().take(80).collect();
                println!(
                    "{:<36}  {:<24}  {:<28}  {:>8}  {:<20}  {error}",
                    r.id,
                    r.event_type,
                    aggregate,
                    r.attempts,
                    r.dead_lettered_at.format("%Y-%m-%d %H:%M:%S")
                );
            }
            Ok(())
        }
        DeadLettersCommand::Retry(args) => {
            let f = selection(&args)?;
            let client = db::connect(url).await?;
            let ids = outbox_core::retry_dead_letters(&client, &f).await?;
            println!("retried {} dead letters", ids.len());
            for id in ids {
                println!("{id}");
            }
            Ok(())
        }
        DeadLettersCommand::Purge { select, yes } => {
            let f = selection(&select)?;
            let client = db::connect(url).await?;
            if !yes {
                let count = outbox_core::list_dead_letters(&client, &f, i64::MAX)
                    .await?
                    .iter()
                    .filter(|d| f.ids.as_ref().is_none_or(|ids| ids.contains(&d.id)))
                    .count();
                if !confirm(&format!("delete {count} dead letters for good?"))? {
                    println!("nothing deleted");
                    return Ok(());
                }
            }
            let ids = outbox_core::purge_dead_letters(&client, &f).await?;
            println!("purged {} dead letters", ids.len());
            for id in ids {
                println!("{id}");
            }
            Ok(())
        }
    }
}

/// Asks on the terminal; without one, refuses (use --yes in scripts).
fn confirm(question: &str) -> Result<bool, Failure> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(
            "refusing to purge without confirmation: stdin is not a terminal; \
            pass --yes to confirm"
                .into(),
        );
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
