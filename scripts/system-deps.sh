#!/usr/bin/env bash
# Install the Debian packages rtscope uses, when missing.
# As root with apt-get: installs them. Otherwise: prints the one command to run, and fails
# only if a package needed for building (a C compiler, make) is missing.
set -euo pipefail

# command -> Debian package
declare -A NEEDED=(
  [cc]=gcc [g++]=g++ [make]=make
  [elixir]=elixir
  [cyclictest]=rt-tests [hackbench]=rt-tests
  [fio]=fio [stress-ng]=stress-ng
  [chromium]=chromium   # the real-browser tests of the report and of rtscope serve
  [mkfs.ext2]=e2fsprogs [unshare]=util-linux [setpriv]=util-linux
  # static probes for the targets rtscope deploys to (make cross), tested under qemu-user
  [x86_64-linux-gnu-gcc]=gcc-x86-64-linux-gnu [x86_64-linux-gnu-g++]=g++-x86-64-linux-gnu
  [aarch64-linux-gnu-gcc]=gcc-aarch64-linux-gnu [aarch64-linux-gnu-g++]=g++-aarch64-linux-gnu
  [arm-linux-gnueabihf-gcc]=gcc-arm-linux-gnueabihf [arm-linux-gnueabihf-g++]=g++-arm-linux-gnueabihf
  [qemu-aarch64]=qemu-user [qemu-arm]=qemu-user [file]=file
  # the SSH target's tests: a real OpenSSH server and its key tool
  [ssh-keygen]=openssh-client
  # VM targets: QEMU, Debian kernels unpacked and guest images built here (docs/kernels.md)
  [qemu-system-x86_64]=qemu-system-x86 [qemu-system-aarch64]=qemu-system-arm [mmdebstrap]=mmdebstrap
  [cpio]=cpio [depmod]=kmod [arch-test]=arch-test [update-binfmts]=binfmt-support
  # container environments (docs/environments.md); runc where crun may not set rlimits (nested sandboxes)
  [podman]=podman [runc]=runc
)
missing=()
for cmd in "${!NEEDED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEEDED[$cmd]}")
done
# Packages that bring files rather than commands.
[ -f /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)   # cbtask's tests
[ -x /usr/bin/time ] || missing+=(time)                         # `command -v time` finds the shell builtin
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)              # not on a user's PATH
compgen -G "/usr/lib/erlang/lib/ssh-*" >/dev/null || missing+=(erlang-ssh)  # the nerves+ssh target's tests
[ -x /usr/bin/qemu-aarch64-static ] || missing+=(qemu-user-static)  # arm64 guest images (binfmt_misc)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)  # the PostgreSQL store's tests
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
