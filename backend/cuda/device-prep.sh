#!/usr/bin/env bash
# device-prep.sh: run HERE (the build machine) before the device call: builds the CUDA kvplan
# and copies it with the shared libraries the device image may lack (not glibc, not the
# driver, not cuBLAS, which the device's CUDA has) into .devlibs/, which the device call
# carries. See backend/cuda/device-check.sh.
set -eu
cd "$(dirname "$0")/../.."
make CUDA=1 >/dev/null
rm -rf .devlibs && mkdir -p .devlibs
cp kvplan .devlibs/kvplan
ldd kvplan | awk '$3 ~ /^\// {print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux|libcublas|libcublasLt|libcuda)[.-]' |
  while read -r lib; do cp -L "$lib" .devlibs/; done
grep -qx '/.devlibs/' .git/info/exclude 2>/dev/null || echo '/.devlibs/' >> .git/info/exclude
du -sh .devlibs
