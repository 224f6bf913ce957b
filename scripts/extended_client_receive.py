"""Receives messages with the Python `amazon-sqs-extended-client`; see extended-client.sh."""

import os
import sys
import time

import boto3
from botocore.config import Config
from sqs_extended_client import SQSExtendedClientSession


def main() -> None:
    queue_url, out_dir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    wait = float(sys.argv[4]) if len(sys.argv) > 4 else 20.0
    endpoint = (
        os.environ.get("AWS_ENDPOINT_URL_SQS")
        or os.environ.get("AWS_ENDPOINT_URL")
        or "http://127.0.0.1:4566"
    )
    settings = dict(
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
    )
    session = SQSExtendedClientSession(**settings)
    sqs = session.client("sqs", endpoint_url=endpoint)
    # The reader fetches from the bucket the pointer names; `large_payload_support` only matters
    # for sending, but the client requires it to be a string.
    sqs.large_payload_support = "unused-for-receiving"
    # A local S3 needs path-style addressing.
    sqs.s3_client = boto3.client(
        "s3",
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3", endpoint),
        config=Config(s3={"addressing_style": "path"}),
        **settings,
    )
    os.makedirs(out_dir, exist_ok=True)
    received = 0
    deadline = time.monotonic() + wait
    while received < count and time.monotonic() < deadline:
        response = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=1,
            MessageAttributeNames=["All"],
        )
        for message in response.get("Messages", []):
            attributes = message.get("MessageAttributes", {})
            event_id = attributes["event_id"]["StringValue"]
            with open(os.path.join(out_dir, event_id), "wb") as f:
                f.write(message["Body"].encode("utf-8"))
            with open(os.path.join(out_dir, event_id + ".attributes"), "w") as f:
                f.write("".join(name + "\n" for name in sorted(attributes)))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            received += 1
    print(received)


if __name__ == "__main__":
    main()
