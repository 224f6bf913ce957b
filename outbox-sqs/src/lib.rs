//! SQS publisher (in progress).
