#!/usr/bin/env bash
# install-check.sh: installs kvplan into a temporary prefix and runs `memory` from there, with
# no hint of the source tree in the environment: the installed binary must find its installed
# library, print what the build tree's binary prints, and find its man page installed.
# Usage: tests/install-check.sh "MAKE-COMMAND" BUILT-BINARY
set -eu
make_cmd=$1
built=$(realpath "$2")
tmp=$(mktemp -d /tmp/kvplan-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
$make_cmd install PREFIX="$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; echo "install-check: make install failed"; exit 1; }
fail() { echo "install-check: $*"; exit 1; }
[ -x "$prefix/bin/kvplan" ] || fail "no $prefix/bin/kvplan"
[ -f "$prefix/share/kvplan/scenarios/chat.yaml" ] || fail "the library was not installed"
[ -f "$prefix/share/kvplan/scenarios/models/llama-3-8b.yaml" ] || fail "the models were not installed"
head -3 "$prefix/share/man/man1/kvplan.1" | grep -q '^\.TH KVPLAN 1' || fail "no man page"
find "$prefix/share/kvplan" -name '*.c' -o -name '*.h' | grep -q . && fail "code installed into the data folder"
# A clean environment: no library override, a fresh home, run from an empty directory.
mkdir -p "$tmp/home" "$tmp/cwd"
run() { (cd "$tmp/cwd" && env -i PATH=/usr/bin:/bin HOME="$tmp/home" "$@"); }
run "$prefix/bin/kvplan" --version >"$tmp/version" || fail "--version failed"
grep -qx "library: $(realpath "$prefix")/share/kvplan/scenarios" "$tmp/version" ||
    fail "the installed binary does not use the installed library: $(grep library "$tmp/version")"
cp "$prefix/share/kvplan/scenarios/chat.yaml" "$tmp/cwd/chat.yaml"
run "$prefix/bin/kvplan" memory chat.yaml --format csv >"$tmp/installed.csv" || fail "memory from the prefix failed"
# The build tree's binary on the source tree's library, for comparison.
run env KVPLAN_LIBRARY="$(dirname "$built")/../scenarios" "$built" memory chat.yaml --format csv >"$tmp/built.csv" ||
    fail "memory from the build tree failed"
cmp -s "$tmp/installed.csv" "$tmp/built.csv" || { diff "$tmp/built.csv" "$tmp/installed.csv" | head; fail "installed and built binaries disagree"; }
lines=$(wc -l <"$tmp/installed.csv")
[ "$lines" -ge 2 ] || fail "memory printed no rows"
# Nothing was written into the installed data.
[ -z "$(find "$prefix/share/kvplan" -newer "$tmp/install.log" -type f)" ] || fail "something wrote into the share dir"
echo "install-check: installed into a temporary prefix; memory from there matches the build ($((lines - 1)) rows)"
