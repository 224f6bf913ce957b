-- Wake-ups: the relay listens on the channel the insert trigger notifies.

--! listen_outbox_events
LISTEN outbox_events;
