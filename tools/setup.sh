#!/bin/sh
# Installs the Debian packages clattn needs (when missing; as root, or through sudo), then configures
# and builds into build/. Safe to run again: it only installs what is missing and rebuilds what changed.
set -eu
cd "$(dirname "$0")/.." || exit 1

packages="gcc libc6-dev python3 pkg-config meson ninja-build ocl-icd-opencl-dev opencl-headers libclblast-dev check pocl-opencl-icd cmake g++ oclgrind libopenmpi-dev openmpi-bin"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    echo "setup: installing$missing" >&2
    $sudo apt-get update -qq
    # shellcheck disable=SC2086 # the package list is meant to split into words
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
fi

[ -f build/build.ninja ] || meson setup build >&2
meson compile -C build >&2
