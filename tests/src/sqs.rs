//! SQS test support (in progress).
