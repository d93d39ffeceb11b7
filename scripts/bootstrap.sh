#!/usr/bin/env bash
# Idempotent set-up used by spark-submit.sh and scripts/test.sh: a virtualenv with the pinned Python
# packages (.venv/), the JVM packages (.cache/jars/) and a class-data-sharing archive of the driver
# JVM (.cache/cds/). Each part is redone only when its input changes (a stamp holds the input's
# hash), so a second call costs ~0.1 s and needs no network.
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
  # --no-cache-dir: nothing of the user's home (~/.cache/pip) is read or written; the venv keeps
  # what it installed, so only a changed requirement is downloaded again.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir -r "$root/requirements.lock" >&2
  echo "$want" > "$venv/.stamp"
}

ensure_jars() {
  local want; want="$(stamp_of "$root/jvm-packages.txt" "$root/requirements.lock")"
  [ -f "$cache/jars/.stamp" ] && [ "$(cat "$cache/jars/.stamp")" = "$want" ] && return
  log "resolving JVM packages into .cache (once)"
  local coords; coords="$(grep -vE '^\s*(#|$)' "$root/jvm-packages.txt" | sed -E 's/^\s*classpath\s+//')"
  # From Maven Central alone into .cache/ivy (conf/ivysettings.xml), never the user's ~/.m2; a
  # cache that holds modules from elsewhere, or fails, is mended and tried again (the module says how).
  # shellcheck disable=SC2086  # one coordinate a word
  PYTHONPATH="$root" PYSPARK_PYTHON="$venv/bin/python" "$venv/bin/python" -m engine.cli.jvm_packages \
    --ivy "$cache/ivy" --log "$cache/resolve.log" --label "[bootstrap]" $coords || {
      log "JVM package resolution failed; see .cache/resolve.log"; exit 2; }
  rm -rf "$cache/jars" "$cache/classpath"; mkdir -p "$cache/jars" "$cache/classpath"
  local line c g a v into
  while read -r line; do
    into=jars; c="$line"
    case "$line" in classpath\ *) into=classpath; c="$(echo "${line#classpath}" | tr -d ' ')" ;; esac
    IFS=: read -r g a v <<<"$c"
    cp -l "$cache/ivy/jars/${g}_${a}-${v}.jar" "$cache/$into/" 2>/dev/null || cp "$cache/ivy/jars/${g}_${a}-${v}.jar" "$cache/$into/"
  done < <(grep -vE '^\s*(#|$)' "$root/jvm-packages.txt" | sed -E 's/^\s+//')
  echo "$want" > "$cache/jars/.stamp"
}

# The classes a run loads (Spark, Delta, the JDK's), parsed and verified once into an archive the
# driver JVM maps at start (JDK dynamic CDS): every later start skips that work (bench/fixed_cost.py
# measures it). Trained by running the demo job once; keyed by the Java runtime and the jars, and
# ignored by the JVM itself if they no longer match. ENGINE_CDS=off: no archive. Optional: nothing
# here fails a run (no Java, a read-only cache, a failed training: runs start without it).
ensure_cds() {
  [ "${ENGINE_CDS:-on}" = off ] && return 0
  [ -n "${ENGINE_CDS_TRAIN:-}" ] && return 0  # this is the training run
  local java="${JAVA_HOME:+$JAVA_HOME/bin/java}"; java="${java:-$(command -v java || true)}"
  [ -n "$java" ] && [ -x "$java" ] || return 0  # spark-submit says what is wrong with Java
  java="$(readlink -f "$java")"
  local want; want="$(printf '%s %s\n' "$(stat -c '%s %Y' "$java" "$(dirname "$java")/../lib/server/libjvm.so" 2>/dev/null || true)" \
    "$(cat "$cache/jars/.stamp" "$venv/.stamp")" | sha256sum | cut -c1-16)"
  local dir="$cache/cds" archive="$cache/cds/$want.jsa"
  if [ ! -f "$archive" ] && [ ! -f "$archive.failed" ]; then
    mkdir -p "$dir" && exec 9>"$dir/.lock" || return 0
    flock -n 9 || return 0  # another set-up is training: run without the archive meanwhile
    [ -f "$archive" ] || [ -f "$archive.failed" ] || train_cds "$archive"
    exec 9>&-
  fi
  # Point engine.jsa at it unless it already does (a link made under this process's own name,
  # then renamed over: launches running at once never see a missing link).
  if [ -f "$archive" ] && [ "$(readlink "$dir/engine.jsa" 2>/dev/null || true)" != "$want.jsa" ]; then
    ln -sfn "$want.jsa" "$dir/engine.jsa.$$" && mv -fT "$dir/engine.jsa.$$" "$dir/engine.jsa" || rm -f "$dir/engine.jsa.$$"
  fi
  return 0
}

train_cds() {
  local archive="$1" work code=0; work="$(mktemp -d)"
  log "training the driver JVM's class archive on the demo job (once, about a minute)"
  # The demo from this tree, locally, whatever the caller's environment points the engine at; its
  # Spark log file in the scratch folder too (by default a run keeps it in the user's home).
  env $(compgen -e | grep '^ENGINE_' | sed 's/^/-u /') ENGINE_CDS_TRAIN="$archive.tmp" ENGINE_LOG_DIR="$work/logs" \
    bash "$root/spark-submit.sh" job=demo/orders "warehouse=$work/lake" progress=off >"$cache/cds/train.log" 2>&1 || code=$?
  rm -rf "$work"
  if [ "$code" -eq 0 ] && [ -s "$archive.tmp" ]; then
    mv "$archive.tmp" "$archive"
    find "$cache/cds" -name '*.jsa' ! -name "$(basename "$archive")" -type f -delete  # earlier runtimes' or jars'
  elif [ "$code" -ge 128 ]; then  # interrupted: train again next time
    rm -f "$archive.tmp"; exit "$code"
  else
    log "no class archive (runs start slower); see .cache/cds/train.log"
    rm -f "$archive.tmp"; touch "$archive.failed"
  fi
}

mkdir -p "$cache"
ensure_venv
ensure_jars
ensure_cds
