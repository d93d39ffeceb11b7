#!/usr/bin/env bash
# PostgreSQL server binaries for the tests (tests/postgres.py starts a throwaway server on a loopback port
# for each pytest session and stops it afterwards). Used by scripts/test.sh.
#   install  ensure initdb, pg_ctl, postgres, psql and pg_isready are installed from Debian's packages.
#            Idempotent: when they are there it costs ~0.1 s, prints nothing and needs no network or root.
#            Debian's "main" cluster is neither created nor started (a createcluster.d drop-in and a
#            policy-rc.d that exist only during apt-get); a cluster that appears anyway is dropped.
#   bindir   print the directory holding them (the newest /usr/lib/postgresql/<major>/bin)
set -euo pipefail
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
log() { printf '[postgres] %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

tools=(initdb pg_ctl postgres psql pg_isready)

find_bindir() {
  local d t
  while IFS= read -r d; do
    for t in "${tools[@]}"; do [ -x "$d/$t" ] || continue 2; done
    printf '%s\n' "$d"; return 0
  done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV)
  return 1
}

clusters() {  # "<version> <name>" per line, from postgresql-common (absent before the first install)
  command -v pg_lsclusters >/dev/null 2>&1 || return 0
  { pg_lsclusters -h 2>/dev/null || true; } | awk '{print $1, $2}'
}

# Set while apt-get runs, undone on exit (the EXIT trap runs after apt_install has returned).
dropdir=/etc/postgresql-common/createcluster.d
dropin="$dropdir/zz-engine-tests-no-main-cluster.conf"
policy=/usr/sbin/policy-rc.d
made_dir="" made_dropin="" made_policy="" aptlog=""
cleanup() {
  [ -z "$made_dropin" ] || rm -f "$dropin"
  [ -z "$made_dir" ] || rmdir "$dropdir" 2>/dev/null || true
  [ -z "$made_policy" ] || rm -f "$policy"
  [ -z "$aptlog" ] || rm -f "$aptlog"
}

apt_install() {
  local before c
  trap cleanup EXIT; trap 'exit 130' INT TERM
  aptlog="$(mktemp)"
  # The postinst of postgresql-<major> creates (pg_createcluster) and starts a "main" cluster on port 5432
  # unless createcluster.conf (which include_dir's createcluster.d) says create_main_cluster = false;
  # invoke-rc.d/deb-systemd-invoke start nothing while policy-rc.d exits 101.
  [ -d "$dropdir" ] || { mkdir -p "$dropdir"; made_dir=1; }
  echo 'create_main_cluster = false' >"$dropin"; made_dropin=1
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# temporary, from %s: start no services during apt-get\nexit 101\n' "$self" >"$policy"
    chmod 755 "$policy"; made_policy=1
  fi
  before="$(clusters)"

  export DEBIAN_FRONTEND=noninteractive
  local install=(apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 postgresql)
  if ! apt-cache show postgresql >/dev/null 2>&1; then
    log "apt-get update (no package lists know postgresql)"
    apt-get update -q -o DPkg::Lock::Timeout=300 >>"$aptlog" 2>&1 || { tail -20 "$aptlog" >&2; die "apt-get update failed"; }
  fi
  if ! "${install[@]}" >>"$aptlog" 2>&1; then
    log "apt-get install failed; refreshing the package lists and retrying"
    apt-get update -q -o DPkg::Lock::Timeout=300 >>"$aptlog" 2>&1 || { tail -20 "$aptlog" >&2; die "apt-get update failed"; }
    "${install[@]}" >>"$aptlog" 2>&1 || { tail -30 "$aptlog" >&2; die "apt-get install postgresql failed"; }
  fi

  while read -r c; do  # safety net: drop (stopping it first) any cluster the packages created
    [ -n "$c" ] || continue
    grep -qxF "$c" <<<"$before" && continue
    log "dropping cluster $c created by the package"
    # shellcheck disable=SC2086  # "<version> <name>"
    pg_dropcluster --stop $c >&2
  done <<<"$(clusters)"
}

cmd_install() {
  find_bindir >/dev/null && return 0
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
      die "PostgreSQL is not installed and installing it needs root; no sudo here: run 'bash $self install' as root"
    log "not root: re-running with sudo"
    exec sudo -- bash "$self" install
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "no apt-get: install the PostgreSQL server (${tools[*]}) under /usr/lib/postgresql/<major>/bin"
  log "installing the postgresql package from Debian (once)"
  apt_install
  local bindir
  bindir="$(find_bindir)" || die "postgresql installed but no ${tools[*]} under /usr/lib/postgresql/*/bin"
  log "installed $("$bindir/postgres" --version) in $bindir"
}

case "${1:-}" in
  install) cmd_install ;;
  bindir) find_bindir || die "PostgreSQL server binaries not found: run 'bash $self install'" ;;
  *) die "usage: $0 install|bindir" ;;
esac
