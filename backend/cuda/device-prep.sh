#!/usr/bin/env bash
# device-prep.sh: run HERE (the build machine) before the device call. Builds kvplan and its CUDA
# plugin and copies both, with the shared libraries the device image may lack, into .devlibs/,
# which the device call carries. Not copied: glibc, the C++ runtime, the driver, and cuBLAS: the
# plugin opens cuBLAS at run time wherever the device image has it (device-check.sh finds it
# under the soname recorded here in .devlibs/cublas-soname, and records where). See
# backend/cuda/device-check.sh and docs/cuda.md.
set -eu
cd "$(dirname "$0")/../.."
make CUDA=1 >/dev/null
test -f build/libkvplan-cuda.so || { echo "device-prep: no CUDA plugin was built (is nvcc here?)" >&2; exit 69; }
rm -rf .devlibs && mkdir -p .devlibs
cp build/kvplan build/libkvplan-cuda.so .devlibs/
for f in build/kvplan build/libkvplan-cuda.so; do ldd "$f"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcublas|libcublasLt|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" .devlibs/; done
# The cuBLAS soname the plugin opens (gemm.cu builds it from the toolkit's CUBLAS_VER_MAJOR; it
# is opened with dlopen, so `readelf -d` does not list it): device-check.sh looks for exactly
# this file, since another major version has another ABI.
soname=$(grep -aoE 'libcublas\.so\.[0-9]+' build/libkvplan-cuda.so | head -n 1)
[ -n "$soname" ] || { echo "device-prep: no cuBLAS soname in build/libkvplan-cuda.so" >&2; exit 70; }
echo "$soname" > .devlibs/cublas-soname
echo "cuBLAS soname: $soname (and ${soname/libcublas/libcublasLt})"
ex=$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)
grep -qx '/.devlibs/' "$ex" 2>/dev/null || echo '/.devlibs/' >> "$ex"
ls -l .devlibs
du -sh .devlibs
