#!/usr/bin/env bash
# Reads messages with the AWS reference reader of the S3 pointer format, the Python
# `amazon-sqs-extended-client` package, installed into the git-ignored .tools/venv on first use.
#
#   bash scripts/extended-client.sh QUEUE_URL OUT_DIR COUNT [WAIT_SECONDS]
#
# Receives up to COUNT messages from QUEUE_URL (deleting them), and writes each message's body —
# the original payload, fetched from S3 by the extended client when the message points there — to
# OUT_DIR/<event_id>, plus OUT_DIR/<event_id>.attributes (the attribute names the client returned,
# one a line). Endpoint, region and credentials come from AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL,
# AWS_REGION and AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (defaults: the local fauxqs server,
# us-east-1, test/test).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.tools/venv"
package="amazon-sqs-extended-client==1.0.1"

# Tests run this concurrently: one installs, the others wait for it (flock on a lock file).
mkdir -p "$root/.tools"
exec 9>"$root/.tools/venv.lock"
flock 9
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sqs_extended_client' 2>/dev/null; then
  echo "[extended-client] installing $package into .tools/venv" >&2
  rm -rf "$venv"
  python3.11 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$package" >&2
fi
flock -u 9

exec "$venv/bin/python" "$root/scripts/extended_client_receive.py" "$@"
