#!/usr/bin/env bash
# The flow service: ./serve.sh [--host 127.0.0.1] [--port 8080] [warehouse=...] [topology_dir=...]
# Its users: ./serve.sh users add <name> --group <group> [--admin] (prints the token last),
#            ./serve.sh users remove <name>, ./serve.sh users list.
# Sets itself up on first use (scripts/bootstrap.sh), as spark-submit.sh does: the executions it
# starts are spark-submit.sh runs. README "The flow service".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$root/scripts/bootstrap.sh"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "$root/.venv/bin/python" -m engine.service "$@"
