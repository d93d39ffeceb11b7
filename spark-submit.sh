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
bash "$root/scripts/bootstrap.sh"
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
# running ones cancelled, nothing half-published; exit 128+N). If this script is killed outright,
# the driver sees ENGINE_WRAPPER_PID vanish and stops the same way. See engine/cli/signals.py.
export ENGINE_WRAPPER_PID=$$
# The driver's output reaches the terminal through the JVM (a pipe): tell it a live view will show.
if [ -t 1 ]; then export ENGINE_TTY=1; fi
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
signalled=""
forward() {
  signalled=1
  local pid
  for pid in $(driver_pids); do kill -"$1" "$pid" 2>/dev/null || true; done
}
trap 'forward TERM' TERM
trap 'forward INT' INT
while :; do
  signalled=""
  set +e
  wait "$child"
  status=$?
  set -e
  [ -z "$signalled" ] && break  # wait returned because spark-submit ended, not for a signal
done
exit "$status"
