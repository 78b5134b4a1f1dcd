#!/usr/bin/env bash
# A real S3-compatible server for local use and tests: s3proxy (Maven Central) over a filesystem
# blobstore, AWS signatures enforced with the credentials in $STATE_DIR/s3/credentials.
# usage: deploy/s3.sh provision|start|stop|status|credentials
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

S_DIR="$STATE_DIR/s3"
JARS="$S_DIR/jars"
DATA="$S_DIR/data"
CONF="$S_DIR/s3proxy.conf"
CREDS="$S_DIR/credentials"
PIDFILE="$S_DIR/s3proxy.pid"
mkdir -p "$S_DIR" "$DATA"

provision() {
  maven_fetch "$REPO_ROOT/deploy/s3proxy/pom.xml" "$JARS"
  if [[ ! -f "$CREDS" ]]; then
    umask 077
    printf 'S3_ACCESS_KEY=orgmem-%s\nS3_SECRET_KEY=%s\n' \
      "$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')" "$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')" >"$CREDS"
  fi
  # shellcheck disable=SC1090
  source "$CREDS"
  cat >"$CONF" <<CONF
s3proxy.endpoint=http://127.0.0.1:$S3_PORT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$S3_ACCESS_KEY
s3proxy.credential=$S3_SECRET_KEY
jclouds.provider=filesystem
jclouds.filesystem.basedir=$DATA
CONF
}

start() {
  if is_running "$PIDFILE"; then log "s3proxy already running (pid $(cat "$PIDFILE"))"; return 0; fi
  provision
  log "starting s3proxy on 127.0.0.1:$S3_PORT"
  nohup java -Xmx256m -DLOG_LEVEL=warn -cp "$JARS/*" org.gaul.s3proxy.Main --properties "$CONF" \
    >>"$S_DIR/s3proxy.log" 2>&1 &
  echo $! >"$PIDFILE"
  wait_port "$S3_PORT" 60 s3proxy || { tail -30 "$S_DIR/s3proxy.log" >&2; exit 1; }
}

case "${1:-}" in
  provision) provision ;;
  start) start ;;
  stop) stop_pid "$PIDFILE" s3proxy TERM ;;
  status) if is_running "$PIDFILE"; then echo "s3proxy: running pid $(cat "$PIDFILE") 127.0.0.1:$S3_PORT"; else echo "s3proxy: stopped"; fi ;;
  credentials) provision >/dev/null; cat "$CREDS" ;;
  *) echo "usage: $0 provision|start|stop|status|credentials" >&2; exit 2 ;;
esac
