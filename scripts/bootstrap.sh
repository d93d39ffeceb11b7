#!/usr/bin/env bash
# Idempotent set-up used by spark-submit.sh and scripts/test.sh: a virtualenv with the pinned Python
# packages (.venv/) and the JVM packages (.cache/jars/). Each part is redone only when its input file
# changes (a stamp holds the input's hash), so a second call costs ~0.1 s and needs no network.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
cache="$root/.cache"
log() { printf '[bootstrap] %s\n' "$*" >&2; }

stamp_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

python_bin() {
  for p in "${ENGINE_PYTHON:-}" python3.11 python3.12 python3.10 python3; do
    [ -n "$p" ] && command -v "$p" >/dev/null 2>&1 && { command -v "$p"; return; }
  done
  log "no python3 (3.10+) on PATH"; exit 2
}

ensure_venv() {
  local want; want="$(stamp_of "$root/requirements.lock")"
  [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$want" ] && return
  log "installing Python packages into .venv (once)"
  [ -x "$venv/bin/python" ] || "$(python_bin)" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/requirements.lock" >&2
  echo "$want" > "$venv/.stamp"
}

ensure_jars() {
  local want; want="$(stamp_of "$root/jvm-packages.txt" "$root/requirements.lock")"
  [ -f "$cache/jars/.stamp" ] && [ "$(cat "$cache/jars/.stamp")" = "$want" ] && return
  log "resolving JVM packages into .cache (once)"
  local coords; coords="$(grep -vE '^\s*(#|$)' "$root/jvm-packages.txt" | paste -sd, -)"
  local noop; noop="$(mktemp --suffix=.py)"; echo 'pass' > "$noop"
  PYSPARK_PYTHON="$venv/bin/python" "$venv/bin/spark-submit" \
    --conf "spark.jars.ivy=$cache/ivy" --packages "$coords" "$noop" >"$cache/resolve.log" 2>&1 || {
      log "JVM package resolution failed; see .cache/resolve.log"; tail -20 "$cache/resolve.log" >&2; exit 2; }
  rm -f "$noop"
  rm -rf "$cache/jars"; mkdir -p "$cache/jars"
  local c g a v
  for c in ${coords//,/ }; do
    IFS=: read -r g a v <<<"$c"
    cp "$cache/ivy/jars/${g}_${a}-${v}.jar" "$cache/jars/"
  done
  echo "$want" > "$cache/jars/.stamp"
}

mkdir -p "$cache"
ensure_venv
ensure_jars
