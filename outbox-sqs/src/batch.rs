//! Splitting one destination's messages into `SendMessageBatch` or `PublishBatch` calls.

use std::collections::HashMap;

use crate::message::SQS_LIMITS;

use crate::message::Prepared;

/// The most entries SQS accepts in one `SendMessageBatch` call.
pub const MAX_BATCH_ENTRIES: usize = 10;
/// The most bytes (bodies and attributes of every entry) SQS accepts in one `SendMessageBatch`
/// call: 1 MiB.
pub const MAX_BATCH_BYTES: usize = SQS_LIMITS.max_message_bytes();

/// What planning needs to know of a message.
pub(crate) trait Plannable {
    /// The bytes SQS counts for it.
    fn size(&self) -> usize;
    /// Its `MessageGroupId` on a FIFO queue.
    fn group(&self) -> Option<&str>;
}

impl Plannable for Prepared {
    fn size(&self) -> usize {
        self.size
    }
    fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }
}

/// A run of batches that must be sent one after the other (they share a message group).
pub(crate) type Chain<T> = Vec<Vec<T>>;

/// Splits `items` — one queue's messages in `seq` order — into batches of at most
/// [`MAX_BATCH_ENTRIES`] entries and `max_bytes` bytes ([`MAX_BATCH_BYTES`] for a queue,
/// [`SNS_MAX_BATCH_BYTES`](crate::SNS_MAX_BATCH_BYTES) for a topic), grouped into chains.
///
/// On a standard queue every batch is its own chain (all may be sent at once). On a FIFO queue the
/// messages of one group are kept together, in order, so that they share a batch when they fit;
/// when a group spills over into the next batch, the two batches form a chain and are sent in
/// order. Groups keep the order of their first message.
pub(crate) fn plan<T: Plannable>(mut items: Vec<T>, fifo: bool, max_bytes: usize) -> Vec<Chain<T>> {
    if fifo {
        let mut first: HashMap<String, usize> = HashMap::new();
        let mut rank = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let key = item.group().unwrap_or("").to_owned();
            rank.push(*first.entry(key).or_insert(i));
        }
        let mut ranked: Vec<(usize, T)> = rank.into_iter().zip(items).collect();
        ranked.sort_by_key(|(r, _)| *r); // stable: a group keeps its order
        items = ranked.into_iter().map(|(_, item)| item).collect();
    }

    let mut batches: Vec<Vec<T>> = Vec::new();
    let mut current: Vec<T> = Vec::new();
    let mut current_bytes = 0;
    for item in items {
        let full = current.len() == MAX_BATCH_ENTRIES || current_bytes + item.size() > max_bytes;
        if !current.is_empty() && full {
            batches.push(std::mem::take(&mut current));
            current_bytes = 0;
        }
        current_bytes += item.size();
        current.push(item);
    }
    if !current.is_empty() {
        batches.push(current);
    }

    let mut chains: Vec<Chain<T>> = Vec::new();
    for batch in batches {
        let continues = fifo
            && chains
                .last()
                .and_then(|chain| chain.last())
                .and_then(|previous| previous.last())
                .is_some_and(|last| last.group() == batch[0].group());
        match chains.last_mut() {
            Some(chain) if continues => chain.push(batch),
            _ => chains.push(vec![batch]),
        }
    }
    chains
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Item {
        n: usize,
        size: usize,
        group: Option<String>,
    }

    impl Plannable for Item {
        fn size(&self) -> usize {
            self.size
        }
        fn group(&self) -> Option<&str> {
            self.group.as_deref()
        }
    }

    fn items(n: usize, size: usize) -> Vec<Item> {
        (0..n)
            .map(|n| Item {
                n,
                size,
                group: None,
            })
            .collect()
    }

    fn shape<T>(chains: &[Chain<T>]) -> Vec<Vec<usize>> {
        chains
            .iter()
            .map(|c| c.iter().map(Vec::len).collect())
            .collect()
    }

    #[test]
    fn splits_by_count() {
        assert!(plan(items(0, 10), false, MAX_BATCH_BYTES).is_empty());
        assert_eq!(
            shape(&plan(items(1, 10), false, MAX_BATCH_BYTES)),
            vec![vec![1]]
        );
        assert_eq!(
            shape(&plan(items(10, 10), false, MAX_BATCH_BYTES)),
            vec![vec![10]]
        );
        assert_eq!(
            shape(&plan(items(25, 10), false, MAX_BATCH_BYTES)),
            vec![vec![10], vec![10], vec![5]]
        );
        // Order is kept.
        let flat: Vec<usize> = plan(items(25, 10), false, MAX_BATCH_BYTES)
            .into_iter()
            .flatten()
            .flatten()
            .map(|i| i.n)
            .collect();
        assert_eq!(flat, (0..25).collect::<Vec<_>>());
    }

    #[test]
    fn splits_by_size() {
        // Three of 400 KiB: two fit in 1 MiB, the third does not.
        assert_eq!(
            shape(&plan(items(3, 400 * 1024), false, MAX_BATCH_BYTES)),
            vec![vec![2], vec![1]]
        );
        // Exactly 1 MiB in total fits.
        assert_eq!(
            shape(&plan(items(4, MAX_BATCH_BYTES / 4), false, MAX_BATCH_BYTES)),
            vec![vec![4]]
        );
        assert_eq!(
            shape(&plan(items(5, MAX_BATCH_BYTES / 4), false, MAX_BATCH_BYTES)),
            vec![vec![4], vec![1]]
        );
        // One message of (almost) 1 MiB goes alone.
        let mut v = items(3, 100);
        v[1].size = MAX_BATCH_BYTES - 50;
        assert_eq!(
            shape(&plan(v, false, MAX_BATCH_BYTES)),
            vec![vec![1], vec![1], vec![1]]
        );
    }

    #[test]
    fn a_topics_batches_stop_at_snss_256_kib() {
        let sns = crate::SNS_MAX_BATCH_BYTES;
        assert_eq!(
            shape(&plan(items(3, 100 * 1024), false, sns)),
            vec![vec![2], vec![1]]
        );
        assert_eq!(shape(&plan(items(4, sns / 4), false, sns)), vec![vec![4]]);
    }

    fn grouped(groups: &[&str]) -> Vec<Item> {
        groups
            .iter()
            .enumerate()
            .map(|(n, g)| Item {
                n,
                size: 10,
                group: Some(g.to_string()),
            })
            .collect()
    }

    #[test]
    fn fifo_keeps_a_group_together_and_in_order() {
        let chains = plan(
            grouped(&["a", "b", "a", "c", "a", "b"]),
            true,
            MAX_BATCH_BYTES,
        );
        assert_eq!(shape(&chains), vec![vec![6]]);
        let order: Vec<usize> = chains[0][0].iter().map(|i| i.n).collect();
        assert_eq!(order, vec![0, 2, 4, 1, 5, 3]);
    }

    #[test]
    fn fifo_group_spilling_over_chains_batches() {
        // 12 of group a then 3 of b: [a×10] → [a×2, b×3] must be sequential.
        let mut groups = vec!["a"; 12];
        groups.extend(["b"; 3]);
        let chains = plan(grouped(&groups), true, MAX_BATCH_BYTES);
        assert_eq!(shape(&chains), vec![vec![10, 5]]);
        // Distinct groups never chain.
        let distinct: Vec<String> = (0..25).map(|i| format!("g{i}")).collect();
        let distinct: Vec<&str> = distinct.iter().map(String::as_str).collect();
        assert_eq!(
            shape(&plan(grouped(&distinct), true, MAX_BATCH_BYTES)),
            vec![vec![10], vec![10], vec![5]]
        );
    }
}
