#!/usr/bin/env bash
# Install the Debian packages rtscope uses, when missing.
# As root with apt-get: installs them. Otherwise: prints the one command to run, and fails
# only if a package needed for building (a C compiler, make) is missing.
set -euo pipefail

# One list for this script and `rtscope doctor`: src/rtscope/system_deps.txt (CHECK PACKAGE USE WHAT-IT-ENABLES).
LIST="$(dirname "$0")/../src/rtscope/system_deps.txt"
missing=()
while read -r check pkg _; do
  what=${check#*:}
  case "$check" in
    cmd:*) command -v "$what" >/dev/null 2>&1 || missing+=("$pkg") ;;
    file:*) [ -e "$what" ] || missing+=("$pkg") ;;
    glob:*) compgen -G "$what" >/dev/null || missing+=("$pkg") ;;
  esac
done < "$LIST"
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u | sed '/^$/d')
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "rtscope: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$(find /var/lib/apt/lists -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
    apt-get update -qq
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
echo "rtscope: missing Debian packages: ${missing[*]}" >&2
echo "rtscope: install them with:  sudo apt-get install -y ${missing[*]}" >&2
for pkg in gcc make; do
  if printf '%s\n' "${missing[@]}" | grep -qx "$pkg"; then exit 1; fi
done
exit 0
