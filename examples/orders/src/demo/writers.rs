//! The demo's writers: concurrent tasks placing orders through the service functions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use deadpool_postgres::Pool;
use tokio::task::JoinSet;
use uuid::Uuid;

use super::DemoConfig;
use super::tally::Tally;
use crate::Error;
use crate::service::{self, NewLine, NewOrder};

/// The running writers.
pub(super) struct Writers {
    pub(super) tasks: JoinSet<Result<(), Error>>,
    /// Whether the order meant to roll back was refused, as intended.
    pub(super) rolled_back_refused: Arc<AtomicBool>,
}

impl Writers {
    /// The first writer that failed, if one did (finished writers are reaped).
    pub(super) fn failure(&mut self) -> Result<(), Error> {
        while let Some(result) = self.tasks.try_join_next() {
            if let Err(e) = result.map_err(Error::from).and_then(|r| r) {
                self.tasks.abort_all();
                return Err(format!("a writer failed: {}", crate::error_chain(&*e)).into());
            }
        }
        Ok(())
    }
}

/// Starts `config.writers` writers placing `config.orders` orders between them; halfway, one of
/// them places order `rolled_back_order`, whose transaction is refused and rolls back.
pub(super) fn spawn(
    config: &DemoConfig,
    pool: &Pool,
    tally: &Arc<Tally>,
    rolled_back_order: Uuid,
) -> Writers {
    let next = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicBool::new(false));
    let mut tasks = JoinSet::new();
    for _ in 0..config.writers.max(1) {
        let (pool, tally, next, refused) =
            (pool.clone(), tally.clone(), next.clone(), refused.clone());
        let orders = config.orders;
        tasks.spawn(async move {
            let emitter = service::sqs_emitter();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Ok(i) = u32::try_from(i) else { break };
                if i == orders / 2 && place_rolled_back(&pool, rolled_back_order).await {
                    refused.store(true, Ordering::Relaxed);
                }
                if i >= orders {
                    break;
                }
                let (order, added, remove_first, ship) = order_plan(i);
                tally.committed(service::place_order(&pool, &emitter, &order).await?);
                tally.orders_placed.fetch_add(1, Ordering::Relaxed);
                for line in &added {
                    tally.committed(service::add_line(&pool, &emitter, order.id, line).await?);
                }
                if remove_first {
                    tally.committed(service::remove_line(&pool, &emitter, order.id, 1).await?);
                }
                if ship {
                    tally.committed(service::ship_order(&pool, &emitter, order.id, "DHL").await?);
                }
            }
            Ok::<(), Error>(())
        });
    }
    Writers {
        tasks,
        rolled_back_refused: refused,
    }
}

/// An order whose second line is invalid. `place_order` has emitted `OrderPlaced` when the line
/// is refused; the rollback takes the event away. Returns whether it was refused.
async fn place_rolled_back(pool: &Pool, id: Uuid) -> bool {
    let line = |sku: &str, quantity| NewLine {
        sku: sku.into(),
        quantity,
        unit_price_cents: 100,
    };
    let bad = NewOrder {
        id,
        customer: "customer-rollback".into(),
        lines: vec![line("SKU-001", 1), line("SKU-002", 0)],
    };
    service::place_order(pool, &service::sqs_emitter(), &bad)
        .await
        .is_err()
}

/// What the order with number `i` goes through: placed with 1–3 lines, then 0–2 lines added, a line
/// removed from every fourth order, every other order shipped.
pub(crate) fn order_plan(i: u32) -> (NewOrder, Vec<NewLine>, bool, bool) {
    let line = |j: u32| NewLine {
        sku: format!("SKU-{:03}", (i * 7 + j) % 200),
        quantity: 1 + ((i + j) % 4) as i32,
        unit_price_cents: 199 + i64::from((i * 31 + j * 17) % 5000),
    };
    let order = NewOrder {
        id: Uuid::new_v4(),
        customer: format!("customer-{:02}", i % 97),
        lines: (0..1 + i % 3).map(line).collect(),
    };
    let added = (10..10 + i % 3).map(line).collect();
    (order, added, i % 4 == 1, i % 2 == 0)
}
