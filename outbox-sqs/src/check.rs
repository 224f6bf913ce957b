//! The start-up check: every configured queue exists and the credentials work.

use aws_sdk_sqs::types::QueueAttributeName;

use crate::error::Result;
use crate::publisher::{Queue, SqsPublisher};
use crate::sdk_error::{sdk_error, timeout_error};

impl SqsPublisher {
    /// `GetQueueAttributes` on every configured queue; the first failure, naming its queue.
    pub(crate) async fn check_queues(&self) -> Result<()> {
        let checks = self.inner.queues.iter().map(|q| self.check_queue(q));
        for result in futures::future::join_all(checks).await {
            result?;
        }
        Ok(())
    }

    async fn check_queue(&self, queue: &Queue) -> Result<()> {
        let call = self
            .inner
            .client
            .get_queue_attributes()
            .queue_url(&queue.url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send();
        let what = format!("GetQueueAttributes on queue `{}`", queue.url);
        match tokio::time::timeout(self.inner.call_timeout, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(sdk_error(&what, e)),
            Err(_) => Err(timeout_error(&what, self.inner.call_timeout)),
        }
    }
}
