#!/usr/bin/env bash
# Headless Chromium and its WebDriver for the status page's browser tests, from Debian's packages.
# Used by scripts/test.sh.
#   install  ensure chromium and chromedriver are installed (apt-get, --no-install-recommends).
#            Idempotent: when they are there it costs ~0.01 s, prints nothing and needs no network or root.
set -euo pipefail
log() { printf '[chromium] %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

installed() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }

cmd_install() {
  installed && return 0
  [ "$(id -u)" -eq 0 ] || die "chromium is not installed and this user cannot apt-get it: run as root, or apt-get install chromium chromium-driver"
  local aptlog; aptlog="$(mktemp)"
  export DEBIAN_FRONTEND=noninteractive
  local install=(apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 chromium chromium-driver)
  log "installing chromium and chromium-driver from Debian's packages (once)"
  if ! "${install[@]}" >>"$aptlog" 2>&1; then
    log "apt-get install failed; refreshing the package lists and retrying"
    apt-get update -q -o DPkg::Lock::Timeout=300 >>"$aptlog" 2>&1 || { tail -20 "$aptlog" >&2; die "apt-get update failed"; }
    "${install[@]}" >>"$aptlog" 2>&1 || { tail -30 "$aptlog" >&2; die "apt-get install chromium chromium-driver failed"; }
  fi
  rm -f "$aptlog"
  installed || die "apt-get installed chromium, but chromium or chromedriver is not on PATH"
}

case "${1:-}" in
  install) cmd_install ;;
  *) die "usage: $0 install" ;;
esac
