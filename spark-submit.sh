#!/usr/bin/env bash
# Run a job: ./spark-submit.sh [spark-submit options] job=<path under jobs/> [key=value ...]
#
# Sets itself up on first use (scripts/bootstrap.sh: .venv and the JVM packages in .cache/), then
# calls spark-submit with the cached jars, a driver memory, the engine zipped for executors
# (--py-files) and PYSPARK_PYTHON. Recognised spark-submit options (--master, --conf k=v,
# --driver-memory, ...) go to spark-submit; everything else goes to Hydra (overrides, -m, --cfg).
# ENGINE_APP names another Python file to submit the same way (bench/fixed_cost.py's empty app).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# A stop (SIGTERM, SIGINT) may come at any moment, the very first included: it is noted at once and
# acted on where it can be (README "Exit codes"). Before the JVM starts the run ends there (after
# the set-up, which is never left half done), 128+N; afterwards it goes to the driver (below).
stop_signal=""
pending=""
trap 'stop_signal=TERM; pending=1' TERM
trap 'stop_signal=INT; pending=1' INT
stopped() { exit $((128 + $(kill -l "$stop_signal"))); }
bash "$root/scripts/bootstrap.sh"
if [ -n "$stop_signal" ]; then stopped; fi
venv="$root/.venv"
# The master key's commands need no job and no JVM (engine/config/secrets.py).
for arg in "$@"; do
  case "$arg" in
    mode=new_key|mode=encrypt) PYTHONPATH="$root" exec "$venv/bin/python" "$root/main.py" "$arg" ;;
  esac
done

spark_opts=()
hydra_args=()
master=""
driver_memory=""
user_jars=""
user_class_path=""
java_opts="\"-Dlog4j2.configurationFile=file:$root/conf/log4j2.properties\""
user_java_opts=""
while [ $# -gt 0 ]; do
  case "$1" in
    --master) master="$2"; shift 2 ;;
    --master=*) master="${1#*=}"; shift ;;
    --driver-memory) driver_memory="$2"; shift 2 ;;
    --driver-memory=*) driver_memory="${1#*=}"; shift ;;
    --jars) user_jars="$2"; shift 2 ;;
    --jars=*) user_jars="${1#*=}"; shift ;;
    --driver-java-options) user_java_opts="$user_java_opts $2"; shift 2 ;;
    --driver-class-path) user_class_path="$2"; shift 2 ;;
    --driver-class-path=*) user_class_path="${1#*=}"; shift ;;
    --conf|--deploy-mode|--executor-memory|--executor-cores|--num-executors|--total-executor-cores|\
    --driver-cores|--name|--files|--archives|--properties-file|\
    --driver-library-path|--queue|--principal|--keytab|--packages|\
    --repositories|--exclude-packages|--py-files)
      spark_opts+=("$1" "$2"); shift 2 ;;
    --conf=*|--deploy-mode=*|--executor-memory=*|--executor-cores=*|--num-executors=*|\
    --total-executor-cores=*|--driver-cores=*|--name=*|--files=*|--archives=*|--properties-file=*|\
    --packages=*|--repositories=*|--exclude-packages=*|--verbose|--supervise)
      spark_opts+=("$1"); shift ;;
    *) hydra_args+=("$1"); shift ;;
  esac
done

# The driver JVM maps the class archive scripts/bootstrap.sh trained (or, training, writes it);
# the user's --driver-java-options come after, so theirs win.
cds_opts=""
if [ -n "${ENGINE_CDS_TRAIN:-}" ]; then  # its warnings go to .cache/cds/train.log
  cds_opts="\"-XX:ArchiveClassesAtExit=$ENGINE_CDS_TRAIN\""
elif [ "${ENGINE_CDS:-on}" != off ] && [ -f "$root/.cache/cds/engine.jsa" ]; then
  cds_opts="\"-XX:SharedArchiveFile=$(readlink -f "$root/.cache/cds/engine.jsa")\" -Xlog:cds=off -Xlog:cds+dynamic=off"
fi
java_opts="$java_opts $cds_opts$user_java_opts"

jars="$(ls "$root"/.cache/jars/*.jar | paste -sd, -)"
[ -n "$user_jars" ] && jars="$jars,$user_jars"
# The S3 connector and its SDK go on the class path at start (see jvm-packages.txt), the driver's
# and, on a cluster, the executors' (the same cache path on every machine); the user's come after.
class_path="$(ls "$root"/.cache/classpath/*.jar 2>/dev/null | paste -sd: - || true)"
[ -n "$user_class_path" ] && class_path="${class_path:+$class_path:}$user_class_path"
class_path_opts=()
[ -n "$class_path" ] && class_path_opts=(--driver-class-path "$class_path" --conf "spark.executor.extraClassPath=$class_path")

# The engine travels to executors as a zip, rebuilt when a source file is newer than it. Several
# launches at once (a flow service, a scheduler) each build under their own name and rename it over.
zip="$root/.cache/engine.zip"
if [ ! -f "$zip" ] || [ -n "$(find "$root/engine" -name '*.py' -newer "$zip" -print -quit)" ]; then
  (cd "$root" && "$venv/bin/python" - "$zip" "$zip.$$.tmp" <<'PY'
import sys, zipfile, pathlib
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as z:
    for p in sorted(pathlib.Path("engine").rglob("*.py")):
        z.write(p)
pathlib.Path(sys.argv[2]).replace(sys.argv[1])
PY
  )
fi

export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$venv/bin/python}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$venv/bin/python}"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"

# Signals: the JVM starts with SIGINT and SIGTERM ignored, so it outlives the Python driver's
# clean-up; the signals this script gets go to the driver, which stops gracefully (no new DAG,
# running ones cancelled, nothing half-published; exit 128+N). A stop is held until the driver
# catches the signal: while the JVM starts there is no driver yet, and the driver starts with the
# JVM's ignored SIGINT/SIGTERM until it sets its handler; neither has done anything yet. Held longer
# than $stop_grace seconds, the JVM is killed (the driver dies with it: engine/cli/jvm_watch.py) and
# the run ends 128+N; a JVM that ends meanwhile (its driver had finished) ends it with its own exit
# code. If this script is killed outright, the driver sees ENGINE_WRAPPER_PID vanish and stops the
# same way. See engine/cli/signals.py.
export ENGINE_WRAPPER_PID=$$
# The driver's output reaches the terminal through the JVM (a pipe): tell it a live view will show.
if [ -t 1 ]; then export ENGINE_TTY=1; fi
if [ -n "$stop_signal" ]; then stopped; fi
(
  trap '' INT TERM
  # This subshell becomes the JVM (spark-submit and spark-class exec it): the driver watches it.
  ENGINE_JVM_PID=$BASHPID
  export ENGINE_JVM_PID
  exec "$venv/bin/spark-submit" \
    --master "${master:-${ENGINE_MASTER:-local[*]}}" \
    --driver-memory "${driver_memory:-${ENGINE_DRIVER_MEMORY:-4g}}" \
    --jars "$jars" \
    ${class_path_opts[@]+"${class_path_opts[@]}"} \
    --driver-java-options "$java_opts" \
    --py-files "$zip" \
    --conf spark.ui.showConsoleProgress=false \
    ${spark_opts[@]+"${spark_opts[@]}"} \
    "${ENGINE_APP:-$root/main.py}" ${hydra_args[@]+"${hydra_args[@]}"}
) &
child=$!
stop_grace=10

driver_pids() {  # the Python driver: the child of the JVM running main.py
  if command -v pgrep >/dev/null; then
    pgrep -P "$child" -f "${ENGINE_APP:-$root/main.py}" || true
    return
  fi
  local proc
  for proc in /proc/[0-9]*; do
    [ "$(cut -d' ' -f4 "$proc/stat" 2>/dev/null)" = "$child" ] || continue
    tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -q "${ENGINE_APP:-$root/main.py}" && echo "${proc#/proc/}"
  done
  return 0
}
catching() {  # $1: pids, $2: a signal's name. Whether each has a handler for it (without /proc, as on
  local pid mask bit  # macOS, each is taken to have one; one that has just ended has none)
  [ -r /proc/self/status ] || return 0
  bit=$(($(kill -l "$2") - 1))
  for pid in $1; do
    mask="$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null || true)"
    [ -n "$mask" ] && (((0x$mask >> bit) & 1)) || return 1
  done
  return 0
}
jvm_runs() { kill -0 "$child" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$child/status" 2>/dev/null; }
killed_for=""
relay() {  # pass the stop on once the driver catches it; held past $stop_grace s, end the JVM
  local since=$SECONDS pids pid
  while [ -n "$pending" ]; do
    pids="$(driver_pids)"
    if [ -n "$pids" ] && catching "$pids" "$stop_signal"; then
      for pid in $pids; do kill -"$stop_signal" "$pid" 2>/dev/null || true; done
      pending=""
    elif ! jvm_runs; then
      pending=""  # it ended meanwhile: its exit code says how
    elif [ $((SECONDS - since)) -ge "$stop_grace" ]; then
      killed_for="$stop_signal"
      kill -KILL "$child" 2>/dev/null || true
      pending=""
    else
      sleep 0.1
    fi
  done
}
while :; do
  if [ -n "$pending" ]; then relay; fi
  set +e
  wait "$child"
  status=$?
  set -e
  if [ -z "$pending" ]; then break; fi  # wait returned because spark-submit ended, not for a signal
done
if [ -n "$killed_for" ] && [ "$status" -eq $((128 + 9)) ]; then
  status=$((128 + $(kill -l "$killed_for")))  # the exit status says which signal stopped the run
fi
exit "$status"
