#!/usr/bin/env bash
# Installs those of the named Debian packages that are missing (with sudo
# when not root), quietly; does nothing when all are there. The test and
# benchmark scripts call it so that each works on a fresh machine.
#
#   scripts/need-packages.sh PKG...
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
