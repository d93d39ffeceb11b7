#!/usr/bin/env bash
# Idempotent set-up used by spark-submit.sh and scripts/test.sh: a virtualenv with the pinned Python
# packages (.venv/) and the JVM packages (.cache/jars/); `bootstrap.sh venv` or `bootstrap.sh jars`
# does one part. Each part is redone only when its input changes (a stamp holds the input's hash),
# so a second call costs ~0.1 s and needs no network. It runs no job: the driver JVM's class archive
# (.cache/cds/) is written only when asked, by a run with ENGINE_CDS=train (engine/platform/class_archive.py).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
cache="$root/.cache"
log() { printf '[bootstrap] %s\n' "$*" >&2; }

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }  # the inputs' contents, not their paths: a clone shares a stamp

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

mkdir -p "$cache"
for part in ${*:-venv jars}; do
  case "$part" in
    venv) ensure_venv ;;
    jars) ensure_jars ;;
    *) log "unknown part '$part' (venv, jars)"; exit 2 ;;
  esac
done
