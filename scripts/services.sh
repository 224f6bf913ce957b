#!/usr/bin/env bash
# Makes sure the services the tests and the demo need are up, and prints the settings they read:
#   - PostgreSQL on 127.0.0.1:5432 (started with pg_ctlcluster if it is down);
#   - fauxqs@1.9.2, a local SQS, SNS and S3 server, installed into .tools/ (ignored by git) and started on
#     127.0.0.1:${FAUXQS_PORT:-4566}.
# Idempotent: a service already answering is left alone. Source it (`. scripts/services.sh`) to get
# the environment variables exported into your shell, or run it and copy them.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fauxqs_version="1.9.2"
fauxqs_port="${FAUXQS_PORT:-4566}"
tools="$root/.tools"

log() { printf '[services] %s\n' "$*" >&2; }

ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432; then return; fi
  log "PostgreSQL is down; starting it"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  for _ in $(seq 1 50); do
    pg_isready -q -h 127.0.0.1 -p 5432 && return
    sleep 0.2
  done
  log "PostgreSQL did not come up on 127.0.0.1:5432"; exit 1
}

fauxqs_answers() {
  # Any HTTP answer means the server is listening.
  curl -s -o /dev/null --max-time 2 -X POST "http://127.0.0.1:${fauxqs_port}/" \
    -H 'content-type: application/x-amz-json-1.0' -H 'x-amz-target: AmazonSQS.ListQueues' -d '{}'
}

ensure_fauxqs() {
  if fauxqs_answers; then return; fi
  local bin="$tools/fauxqs/node_modules/.bin/fauxqs"
  if [ ! -x "$bin" ] || ! grep -q "\"version\": \"${fauxqs_version}\"" \
      "$tools/fauxqs/node_modules/fauxqs/package.json" 2>/dev/null; then
    log "installing fauxqs@${fauxqs_version} into .tools/fauxqs"
    mkdir -p "$tools/fauxqs"
    npm install --prefix "$tools/fauxqs" --no-audit --no-fund --loglevel=error \
      "fauxqs@${fauxqs_version}" >&2
  fi
  log "starting fauxqs on 127.0.0.1:${fauxqs_port} (log: .tools/fauxqs.log)"
  (cd "$tools" && FAUXQS_PORT="$fauxqs_port" FAUXQS_HOST=127.0.0.1 nohup "$bin" >"$tools/fauxqs.log" 2>&1 &)
  for _ in $(seq 1 100); do
    fauxqs_answers && return
    sleep 0.1
  done
  log "fauxqs did not answer on port ${fauxqs_port}; see .tools/fauxqs.log"; exit 1
}

ensure_postgres
ensure_fauxqs

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
export AWS_ENDPOINT_URL_SQS="${AWS_ENDPOINT_URL_SQS:-http://127.0.0.1:${fauxqs_port}}"
# fauxqs serves SNS and S3 on the same port (topic routes and S3 offload).
export AWS_ENDPOINT_URL_SNS="${AWS_ENDPOINT_URL_SNS:-${AWS_ENDPOINT_URL_SQS}}"
export AWS_ENDPOINT_URL_S3="${AWS_ENDPOINT_URL_S3:-${AWS_ENDPOINT_URL_SQS}}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
log "PostgreSQL and fauxqs are up"
