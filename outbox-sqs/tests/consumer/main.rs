//! The typed SQS consumer against real services: PostgreSQL and the local SQS server (fauxqs).
//! Start them with `bash scripts/services.sh`; a test that cannot reach them fails saying so.

#[path = "../aws/mod.rs"]
mod aws;
mod bad_input;
mod faults;
mod fifo;
mod offloaded;
mod round_trip;
mod shutdown;
mod sns;
mod support;
