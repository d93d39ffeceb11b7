#!/usr/bin/env bash
# Run a job: ./spark-submit.sh [spark-submit options] job=<path under jobs/> [key=value ...]
#
# Sets itself up on first use (scripts/bootstrap.sh: .venv and the JVM packages in .cache/), then
# hands over to the engine's launcher, the `engine` command of an installed engine
# (engine/cli/launch.py): spark-submit options to spark-submit, the rest to Hydra, the engine zipped
# for executors, the driver JVM's class archive, and stop signals passed on to the driver.
# ENGINE_APP names another Python file to submit the same way (bench/fixed_cost.py's empty app).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# A stop (SIGTERM, SIGINT) during the set-up is noted and acted on once it is done (it is never left
# half done): the run ends there, 128+N. Afterwards the launcher handles them (README "Exit codes").
stop_signal=""
trap 'stop_signal=TERM' TERM
trap 'stop_signal=INT' INT
bash "$root/scripts/bootstrap.sh"
if [ -n "$stop_signal" ]; then exit $((128 + $(kill -l "$stop_signal"))); fi
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "$root/.venv/bin/python" -m engine.cli.launch "$@"
