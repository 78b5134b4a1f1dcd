# Shared helpers for the local-stack scripts. Sourced, not executed.
# Everything lives under $ORGMEM_STATE_DIR (default: <repo>/.state), git-ignored.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${ORGMEM_STATE_DIR:-$REPO_ROOT/.state}"
VENV="${ORGMEM_VENV:-$REPO_ROOT/.venv}"
KAFKA_PORT="${ORGMEM_KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${ORGMEM_KAFKA_CONTROLLER_PORT:-19093}"
PG_PORT="${ORGMEM_PG_PORT:-55432}"
S3_PORT="${ORGMEM_S3_PORT:-19000}"
mkdir -p "$STATE_DIR"

log() { printf '[deploy] %s\n' "$*" >&2; }

# is_running <pidfile>
is_running() {
  local pidfile="$1"
  [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

# wait_port <port> <seconds> <name>
wait_port() {
  local port="$1" secs="$2" name="$3" i
  for ((i = 0; i < secs * 5; i++)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  log "$name did not open 127.0.0.1:$port within ${secs}s"
  return 1
}

# stop_pid <pidfile> <name> [signal]
stop_pid() {
  local pidfile="$1" name="$2" sig="${3:-TERM}" pid i
  if ! is_running "$pidfile"; then rm -f "$pidfile"; return 0; fi
  pid="$(cat "$pidfile")"
  kill "-$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; log "$name stopped"; return 0; }
    sleep 0.2
  done
  log "$name did not stop in 30s; killing"
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

# maven_fetch <pom> <dest dir>: copy the pom's runtime dependencies from Maven Central once.
maven_fetch() {
  local pom="$1" dest="$2"
  if [[ -f "$dest/.complete" && "$dest/.complete" -nt "$pom" ]]; then return 0; fi
  command -v mvn >/dev/null || { log "mvn not found (needed once to fetch jars from Maven Central)"; return 1; }
  command -v java >/dev/null || { log "java not found (Java 17 is required)"; return 1; }
  log "fetching $(basename "$(dirname "$pom")") jars from Maven Central into $dest"
  rm -rf "$dest"; mkdir -p "$dest"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$dest" -DincludeScope=runtime
  touch "$dest/.complete"
}
