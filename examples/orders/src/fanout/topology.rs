//! The fan-out's AWS resources: one SNS FIFO topic and two SQS FIFO queues subscribed to it with
//! raw message delivery (the message body and attributes arrive exactly as the relay sent them).

use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;

use crate::Error;

/// A topic and the two queues subscribed to it: one per consumer.
#[derive(Debug, Clone)]
pub struct Topology {
    /// The topic the relay publishes `order.*` to.
    pub topic_arn: String,
    /// The read model's queue ([`crate::consumer`]).
    pub summaries_queue: String,
    /// The shipping service's queue ([`crate::shipping`]).
    pub shipping_queue: String,
}

impl Topology {
    /// Creates `{prefix}-orders.fifo` (a FIFO topic: per-order order survives the fan-out),
    /// `{prefix}-summaries.fifo` and `{prefix}-shipping.fifo`, and subscribes both queues with raw
    /// message delivery. Each queue's policy lets the topic (and only it) send to it, as SNS
    /// requires on AWS.
    pub async fn create(aws: &SdkConfig, prefix: &str) -> Result<Topology, Error> {
        let sns = aws_sdk_sns::Client::new(aws);
        let sqs = aws_sdk_sqs::Client::new(aws);
        let topic_arn = sns
            .create_topic()
            .name(format!("{prefix}-orders.fifo"))
            .attributes("FifoTopic", "true")
            .attributes("ContentBasedDeduplication", "false")
            .send()
            .await?
            .topic_arn()
            .ok_or("CreateTopic returned no topic ARN")?
            .to_owned();
        let mut queues = Vec::new();
        for name in ["summaries", "shipping"] {
            let url =
                crate::demo::create_fifo_queue(&sqs, &format!("{prefix}-{name}.fifo")).await?;
            let arn = queue_arn(&sqs, &url).await?;
            sqs.set_queue_attributes()
                .queue_url(&url)
                .attributes(QueueAttributeName::Policy, policy(&arn, &topic_arn))
                .send()
                .await?;
            sns.subscribe()
                .topic_arn(&topic_arn)
                .protocol("sqs")
                .endpoint(arn)
                .attributes("RawMessageDelivery", "true")
                .send()
                .await?;
            queues.push(url);
        }
        let shipping_queue = queues.pop().ok_or("no shipping queue")?;
        let summaries_queue = queues.pop().ok_or("no summaries queue")?;
        Ok(Topology {
            topic_arn,
            summaries_queue,
            shipping_queue,
        })
    }

    /// Deletes the topic and the queues, best effort (leftovers are harmless).
    pub async fn delete(&self, aws: &SdkConfig) {
        let sns = aws_sdk_sns::Client::new(aws);
        let sqs = aws_sdk_sqs::Client::new(aws);
        let _ = sns.delete_topic().topic_arn(&self.topic_arn).send().await;
        for url in [&self.summaries_queue, &self.shipping_queue] {
            let _ = sqs.delete_queue().queue_url(url).send().await;
        }
    }
}

async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<String, Error> {
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?;
    Ok(out
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn))
        .ok_or("GetQueueAttributes returned no QueueArn")?
        .clone())
}

/// The queue policy that lets SNS deliver the topic's messages to the queue.
fn policy(queue_arn: &str, topic_arn: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "sns.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": topic_arn}}
        }]
    })
    .to_string()
}
