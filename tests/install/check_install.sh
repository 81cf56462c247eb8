#!/bin/sh
# tests/install/check_install.sh BUILD_DIR: installs the build into a temporary DESTDIR, then builds and
# runs tests/install/app.c against that staged install twice, as an application would: once through
# `pkg-config clattn`, once through CMake's find_package(clattn). Run by `meson test --suite install`.
set -eu

fail() { echo "check_install: FAIL: $*" >&2; exit 1; }
step() { echo "check_install: $*"; }

[ $# -eq 1 ] || fail "usage: $0 BUILD_DIR"
build=$(cd "$1" && pwd) || fail "no build folder $1"
here=$(cd "$(dirname "$0")" && pwd)
command -v cmake >/dev/null 2>&1 || fail "cmake is not installed (tools/setup.sh installs it)"
command -v pkg-config >/dev/null 2>&1 || fail "pkg-config is not installed (tools/setup.sh installs it)"
cc=${CC:-cc}
# meson test points LD_LIBRARY_PATH at the build folder: drop it, so only the staged library can load.
unset LD_LIBRARY_PATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clattn-install.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

step "meson install --destdir $tmp/stage"
meson install -C "$build" --no-rebuild --destdir "$tmp/stage" --quiet >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install"; }

# prefix and libdir as configured (libdir is relative to the prefix unless set outside it).
dirs=$(meson introspect "$build" --buildoptions | python3 -c '
import json, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
print(opts["prefix"]); print(opts["libdir"])') || fail "meson introspect --buildoptions"
prefix="$tmp/stage$(echo "$dirs" | sed -n 1p)"
libdir=$(echo "$dirs" | sed -n 2p)
case $libdir in /*) libdir="$tmp/stage$libdir" ;; *) libdir="$prefix/$libdir" ;; esac
[ -f "$libdir/pkgconfig/clattn.pc" ] || fail "no clattn.pc in $libdir/pkgconfig"
[ -f "$libdir/cmake/clattn/clattnConfig.cmake" ] || fail "no clattnConfig.cmake in $libdir/cmake/clattn"
[ -f "$prefix/include/clattn/clattn.h" ] || fail "no include/clattn/clattn.h under $prefix"

# The .pc file names the configured prefix; moved under the DESTDIR it is overridden. (pkgconf's
# --define-prefix cannot do it: it takes the prefix as two levels above pkgconfig/, wrong for Debian's
# lib/x86_64-linux-gnu.)
step "pkg-config --define-variable=prefix=$prefix clattn"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --define-variable=prefix="$prefix" --cflags --libs clattn) ||
    fail "pkg-config clattn"
case $flags in *"$tmp/stage"*) ;; *) fail "pkg-config flags do not point into the staged prefix: $flags" ;; esac
# shellcheck disable=SC2086 # the flags are meant to split into words
$cc -std=c11 -Wall -Wextra -Werror -o "$tmp/app-pkgconfig" "$here/app.c" $flags ||
    fail "compiling app.c with: $flags"
out=$(LD_LIBRARY_PATH="$libdir" "$tmp/app-pkgconfig") ||
    fail "app (pkg-config build) exited $?"
step "app (pkg-config): $out"

step "cmake find_package(clattn)"
cmake -S "$here" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; fail "cmake configure of tests/install"; }
cmake --build "$tmp/cmake-build" >"$tmp/cmake-build.log" 2>&1 ||
    { cat "$tmp/cmake-build.log" >&2; fail "cmake build of tests/install"; }
# CMake puts the staged library's folder in the build RPATH: no LD_LIBRARY_PATH needed.
out=$("$tmp/cmake-build/app") || fail "app (CMake build) exited $?"
step "app (CMake): $out"
step "ok"
