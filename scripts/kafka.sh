#!/usr/bin/env bash
# An Apache Kafka broker's jars for the tests (tests/kafka.py starts a throwaway single-node KRaft broker on
# loopback ports for each pytest session and stops it afterwards). Used by scripts/test.sh.
#   install  resolve the broker (kafka_2.13 and its dependencies, plus the log4j binding of the slf4j it logs
#            through: without one it logs nothing at all) from Maven Central (the project's conf/ivysettings.xml) through spark-submit's Ivy
#            (cache in .cache/kafka/ivy) and put exactly those jars, plus the pyspark wheel's scala-library
#            (which Spark's resolver leaves out as provided), in .cache/kafka/lib. Idempotent: a stamp holds the
#            coordinates, so when they match this costs ~0.1 s, prints nothing and needs no network.
#   libdir   print .cache/kafka/lib (the broker's class path is <libdir>/*)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
self="$root/scripts/kafka.sh"
venv="$root/.venv"
cache="$root/.cache/kafka"
lib="$cache/lib"
# The binding's version is that of the log4j-core the broker depends on.
coords="org.apache.kafka:kafka_2.13:4.1.1,org.apache.logging.log4j:log4j-slf4j-impl:2.24.3"
log() { printf '[kafka] %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

installed() { [ -f "$lib/.stamp" ] && [ "$(cat "$lib/.stamp")" = "$coords" ]; }

scala_library() {  # the wheel's scala-library jar (Kafka's _2.13 build runs on any 2.13.x)
  local jars
  jars="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')" ||
    die "cannot import pyspark from $venv (run scripts/bootstrap.sh)"
  compgen -G "$jars/scala-library-*.jar" | sort -V | tail -1 | grep . || die "no scala-library-*.jar in $jars"
}

cmd_install() {
  installed && return 0
  mkdir -p "$cache"
  exec 9>"$cache/.lock"; flock 9  # another session installing at the same time: wait for it, then reuse its work
  installed && return 0
  [ -x "$venv/bin/spark-submit" ] || die "no $venv/bin/spark-submit: run 'bash $root/scripts/bootstrap.sh' first"
  log "resolving $coords into .cache/kafka (once)"
  local scala noop resolvelog="$cache/resolve.log"
  scala="$(scala_library)"
  noop="$(mktemp --suffix=.py)"; echo 'pass' >"$noop"
  # Ivy's retrieve adds to ivy/jars and never removes: emptied first, it holds these coordinates' jars only.
  rm -rf "$cache/ivy/jars"
  # Maven Central alone, as the engine's own set-up (conf/ivysettings.xml): never the user's ~/.m2
  PYSPARK_PYTHON="$venv/bin/python" "$venv/bin/spark-submit" \
    --conf "spark.jars.ivy=$cache/ivy" --conf "spark.jars.ivySettings=$root/conf/ivysettings.xml" \
    --packages "$coords" "$noop" >"$resolvelog" 2>&1 || {
      rm -f "$noop"; tail -20 "$resolvelog" >&2; die "resolving $coords failed; see .cache/kafka/resolve.log"; }
  rm -f "$noop"
  compgen -G "$cache/ivy/jars/*.jar" >/dev/null || { tail -20 "$resolvelog" >&2; die "no jars resolved for $coords"; }
  rm -rf "$lib"; mkdir -p "$lib"
  local j
  for j in "$cache/ivy/jars/"*.jar "$scala"; do
    cp -l "$j" "$lib/" 2>/dev/null || cp "$j" "$lib/"
  done
  echo "$coords" >"$lib/.stamp"
  log "$(find "$lib" -name '*.jar' | wc -l) jars in .cache/kafka/lib"
}

case "${1:-}" in
  install) cmd_install ;;
  libdir) installed && printf '%s\n' "$lib" || die "the Kafka broker's jars are not installed: run 'bash $self install'" ;;
  *) die "usage: $0 install|libdir" ;;
esac
