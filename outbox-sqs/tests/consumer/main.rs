//! The typed SQS consumer against real services: PostgreSQL and the local SQS server (fauxqs).
//! Start them with `bash scripts/services.sh`; a test that cannot reach them fails saying so.

mod bad_input;
mod faults;
mod fifo;
mod offloaded;
mod round_trip;
mod shutdown;
mod support;
