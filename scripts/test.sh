#!/usr/bin/env bash
# The whole test suite: set-up (idempotent: .venv, JVM jars, PostgreSQL server binaries, Kafka broker jars,
# Chromium), lint (ruff), types (mypy), layer contracts (import-linter), the docs build, then pytest.
#   scripts/test.sh [--quick] [--coverage] [pytest args]
# --quick: the inner loop (every test module, its first few tests that start no whole command, crash
# driver nor cluster: tests/conftest.py), minutes instead of the full gate. Extra arguments go to pytest.
# --coverage: line coverage of engine/ over the run (setup.cfg [coverage:run]), every Python process
# the tests start included: .cache/coverage/report.txt. Slower; not for timing, not in CI.
#
# Where the time went: every phase here and every test's set-up/call/tear-down land in
# .cache/test-timing/ (tests/timing.py), and the top of that report is printed at the end.
# Nothing is left behind: everything the run writes outside the clone (pytest's temp, Spark's and the
# JVMs' temp files, the services' data) goes under one folder, $TMPDIR for the run, removed at the end;
# a later run removes what a killed one left; and the run fails if anything new remains in the system
# temp folder (ENGINE_TEST_TMP_CHECK=off: not checked, for a machine whose temp folder others write to).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=()
coverage=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --coverage) coverage=(--cov --cov-config="$root/setup.cfg" --cov-report=) ;;
    *) break ;;
  esac
  shift
done
# Two pytest-xdist workers by default (one on a one-core machine), each with its own SparkSession and
# servers: on two cores pytest took 30:00 on two workers where the whole command took 50:34 on one (CI,
# same commit), as tests that start a process or wait on a lease or a grace leave a core idle
# (docs/contributing/testing.md has the measurements). ENGINE_TEST_WORKERS=N chooses N (1: one process).
cores="$(nproc 2>/dev/null || echo 1)"
workers="${ENGINE_TEST_WORKERS:-$((cores >= 2 ? 2 : 1))}"
xdist=()
if [ "$workers" != 1 ]; then xdist=(-n "$workers" --dist worksteal); fi
venv="$root/.venv/bin"
timing="$root/.cache/test-timing"
mkdir -p "$timing" && : >"$timing/phases.tsv"

phase() {  # phase NAME COMMAND...: run it and add "NAME<TAB>seconds" to the timing report
  local name="$1" start="$EPOCHREALTIME" rc=0
  shift
  "$@" || rc=$?
  awk -v n="$name" -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%s\t%.1f\n", n, b - a }' >>"$timing/phases.tsv"
  return "$rc"
}

# -- set-up ----------------------------------------------------------------------------------------
phase virtualenv bash "$root/scripts/bootstrap.sh" venv
phase jvm-packages bash "$root/scripts/bootstrap.sh" jars
phase postgresql bash "$root/scripts/postgres.sh" install
phase kafka bash "$root/scripts/kafka.sh" install
phase chromium bash "$root/scripts/chromium.sh" install

# -- one temp root for the run ---------------------------------------------------------------------
systmp="${TMPDIR:-/tmp}"
for old in "$systmp"/engine-tests.*; do  # a killed run's root, once its run is gone
  [ -d "$old" ] || continue
  owner="$(cat "$old/.owner" 2>/dev/null || true)"
  if [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then continue; fi
  rm -rf "$old"
done
run_tmp="$(mktemp -d "$systmp/engine-tests.XXXXXX")"
chmod 755 "$run_tmp"  # PostgreSQL runs as its own OS user under root (tests/postgres.py): it must reach its folder
echo $$ >"$run_tmp/.owner"
trap 'rm -rf "$run_tmp"' EXIT
# The set-up above ran with the system's TMPDIR (apt-get's sandboxed helpers write there); the check
# covers everything from here on.
before="$(ls -A "$systmp" | sort)"
export TMPDIR="$run_tmp"

# What the run made in the system temp folder besides its own root. Not counted: hsperfdata_<user>,
# the folder every JVM's performance data goes to (fixed at /tmp whatever java.io.tmpdir says; a JVM
# removes its own file as it exits), which the first JVM of a fresh machine creates.
left_in_system_temp() {
  comm -13 <(printf '%s\n' "$before") <(ls -A "$systmp" | sort) | grep -vx -e "$(basename "$run_tmp")" -e 'hsperfdata_.*' || true
}

# -- lints, docs ----------------------------------------------------------------------------------
cd "$root"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
export PYSPARK_PYTHON="$venv/python"
echo "== ruff" && phase ruff "$venv/ruff" check .
echo "== mypy" && phase mypy "$venv/mypy"
echo "== import-linter" && phase import-linter "$venv/lint-imports" --no-cache
echo "== docs" && phase docs "$venv/mkdocs" build --strict --quiet --site-dir "$root/.cache/site"  # broken links fail
# The driver JVM's class archive, written once by a demo run before the tests (ENGINE_CDS=train: no
# run writes one unasked): the crash matrix's drivers and every e2e run then start on it. Never
# fails the suite; ENGINE_CDS=off: none.
warm_archive() {
  local warm
  warm="$(mktemp -d)"
  env $(compgen -e | grep '^ENGINE_' | sed 's/^/-u /') ENGINE_CDS=train ENGINE_LOG_DIR="$warm/logs" \
    "$root/spark-submit.sh" job=demo/orders "warehouse=$warm/lake" progress=off >"$warm/out.log" 2>&1 || true
  rm -rf "$warm"
}
if [ "${ENGINE_CDS:-on}" != off ] && ! ls "$root"/.cache/cds/*.jsa >/dev/null 2>&1; then
  echo "== class archive (once)" && phase class-archive warm_archive
fi

# -- the tests -------------------------------------------------------------------------------------
rc=0
if [ ${#coverage[@]} -gt 0 ]; then
  # an absolute data file: a driver may start in another folder; a run starts from no data
  export ENGINE_COVERAGE_DATA="$root/.cache/coverage/data"
  rm -rf "$root/.cache/coverage" && mkdir -p "$root/.cache/coverage"
fi
echo "== pytest" && phase pytest "$venv/python" -m pytest "${xdist[@]}" "${quick[@]}" "${coverage[@]}" "$@" || rc=$?
if [ ${#coverage[@]} -gt 0 ]; then
  "$venv/coverage" combine --rcfile="$root/setup.cfg" -q --data-file="$ENGINE_COVERAGE_DATA" 2>/dev/null || true
  "$venv/coverage" report --rcfile="$root/setup.cfg" --data-file="$ENGINE_COVERAGE_DATA" --include="$root/engine/*" \
    >"$root/.cache/coverage/report.txt" || true
  echo "== coverage of engine/ ($root/.cache/coverage/report.txt)" && grep "^TOTAL" "$root/.cache/coverage/report.txt"
fi
"$venv/python" -m tests.timing 70 || true

rm -rf "$run_tmp"
left="$(left_in_system_temp)"
if [ -n "$left" ] && [ "${ENGINE_TEST_TMP_CHECK:-on}" != off ]; then
  echo "== left in $systmp by this run (it must leave nothing there: give it a place under \$TMPDIR):" >&2
  printf '  %s\n' $left >&2
  [ "$rc" -ne 0 ] || rc=1
fi
exit "$rc"
