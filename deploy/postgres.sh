#!/usr/bin/env bash
# Embedded Postgres 16 + pgvector from the PyPI `pgserver` wheel, TCP on 127.0.0.1.
# usage: deploy/postgres.sh provision|start|stop|status|dsn
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

P_DIR="$STATE_DIR/postgres"
DATA="$P_DIR/data"
DB_NAME="${ORGMEM_PG_DB:-orgmem}"
mkdir -p "$P_DIR"

pgbin() {
  local root
  root="$("$VENV/bin/python" -W ignore -c 'import os, pgserver; print(os.path.dirname(pgserver.__file__))')"
  echo "$root/pginstall/bin"
}

# Postgres refuses to run as root: when we are root, run the server as a dedicated system user.
PG_OS_USER="${ORGMEM_PG_OS_USER:-orgmem-pg}"
as_pg() {
  if [[ "$(id -u)" == 0 ]]; then runuser -u "$PG_OS_USER" -- "$@"; else "$@"; fi
}

prepare_root() {
  [[ "$(id -u)" == 0 ]] || return 0
  id -u "$PG_OS_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_OS_USER"
  # the server user must traverse to its data dir and the binaries
  local d
  for d in "$P_DIR" "$(pgbin)"; do
    while [[ "$d" != "/" ]]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
  done
  chown -R "$PG_OS_USER" "$P_DIR"
}

provision() {
  local bin; bin="$(pgbin)"
  prepare_root
  if [[ ! -f "$DATA/PG_VERSION" ]]; then
    log "initdb $DATA"
    as_pg "$bin/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$P_DIR/initdb.log" 2>&1 \
      || { cat "$P_DIR/initdb.log" >&2; exit 1; }
    as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<CONF
# orgmem local stack
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$P_DIR'
max_connections = 200
shared_buffers = 512MB
work_mem = 32MB
maintenance_work_mem = 512MB
synchronous_commit = on
fsync = on
CONF
  fi
}

start() {
  local bin; bin="$(pgbin)"
  provision
  if as_pg "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then log "postgres already running"; else
    log "starting Postgres on 127.0.0.1:$PG_PORT"
    as_pg "$bin/pg_ctl" -D "$DATA" -l "$P_DIR/postgres.log" -w -t 60 start >/dev/null \
      || { tail -30 "$P_DIR/postgres.log" >&2; exit 1; }
  fi
  if ! "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname='$DB_NAME'" | grep -q 1; then
    "$bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres "$DB_NAME"
  fi
}

case "${1:-}" in
  provision) provision ;;
  start) start ;;
  stop) bin="$(pgbin)"; if [[ -f "$DATA/PG_VERSION" ]]; then as_pg "$bin/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true; fi; log "postgres stopped" ;;
  status) bin="$(pgbin)"; if as_pg "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then echo "postgres: running 127.0.0.1:$PG_PORT"; else echo "postgres: stopped"; fi ;;
  dsn) echo "postgresql://postgres@127.0.0.1:$PG_PORT/$DB_NAME" ;;
  *) echo "usage: $0 provision|start|stop|status|dsn" >&2; exit 2 ;;
esac
