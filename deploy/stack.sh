#!/usr/bin/env bash
# The local infrastructure in one place: Kafka, Postgres+pgvector, s3proxy.
# usage: deploy/stack.sh start|stop|status|env
#   env: print the environment (connection settings) the app and tests use for this stack.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
D="$REPO_ROOT/deploy"

case "${1:-}" in
  start)
    "$D/postgres.sh" start
    "$D/kafka.sh" start
    "$D/s3.sh" start
    ;;
  stop)
    "$D/s3.sh" stop || true
    "$D/kafka.sh" stop || true
    "$D/postgres.sh" stop || true
    ;;
  status)
    "$D/postgres.sh" status; "$D/kafka.sh" status; "$D/s3.sh" status ;;
  env)
    "$D/s3.sh" provision >/dev/null
    # shellcheck disable=SC1091
    source "$STATE_DIR/s3/credentials"
    cat <<ENV
DATABASE_URL=$("$D/postgres.sh" dsn)
KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$KAFKA_PORT
OBJECT_STORE_BACKEND=s3
S3_ENDPOINT=127.0.0.1:$S3_PORT
S3_SECURE=false
S3_ACCESS_KEY=$S3_ACCESS_KEY
S3_SECRET_KEY=$S3_SECRET_KEY
S3_BUCKET=orgmem-envelopes
ENV
    ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
