-- Inbox retention (`outbox_core::cleanup_inbox`, `outbox cleanup --inbox-older-than`) deletes the
-- oldest records first, in small batches: this index makes each batch a short range scan instead of a
-- scan of the whole table.
CREATE INDEX IF NOT EXISTS processed_events_processed_at ON processed_events (processed_at);
