#!/bin/sh
# Builds paradyse-real and the real backend's tests against the LibTorch of a pip `torch` (the version
# the GPU machine has) and gathers them, with the shared libraries they load beyond LibTorch, CUDA,
# NCCL and the C and C++ runtimes, into one folder: what check.sh runs on a GPU machine that has a
# CUDA PyTorch but none of paradyse's other dependencies (no package manager, no network).
#
# usage: tools/gpu-check/make-bundle.sh SITE_PACKAGES BUNDLE_DIR [BUILD_DIR]
#   SITE_PACKAGES  the folder holding torch/ and nvidia/ (python3 -m pip install --target DIR torch==X)
#   BUNDLE_DIR     written anew: bin/ (the executables) and lib/ (the libraries they need)
#   BUILD_DIR      the CMake build folder to configure against that LibTorch (default build-gpu-bundle)
set -eu
[ $# -eq 2 ] || [ $# -eq 3 ] || { sed -n 2,11p "$0" >&2; exit 2; }
site=$(cd "$1" && pwd)
bundle=$(mkdir -p "$2" && cd "$2" && pwd)
build=${3:-build-gpu-bundle}
[ -d "$site/torch/share/cmake/Torch" ] || { echo "make-bundle: no LibTorch under $site/torch" >&2; exit 2; }
cd "$(dirname "$0")/../.."
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$site/torch/share/cmake" >/dev/null
cmake --build "$build" -j"$(nproc)" --target paradyse-real real_backend_tests
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/experiments/paradyse-real" "$build/tests/real_backend_tests" "$bundle/bin/"
# Every library the executables load that the GPU machine brings itself stays behind: the pip
# packages' (LibTorch, CUDA, NCCL), the CUDA toolkit's and the C and C++ runtimes.
for exe in "$bundle"/bin/*; do
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  case "$lib" in
    "$site"/* | /usr/local/cuda* | */libc.so* | */libm.so* | */libdl.so* | */librt.so* | */libpthread.so* | \
      */libutil.so* | */libresolv.so* | */ld-linux* | */libstdc++.so* | */libgcc_s.so*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done
python3 -c "import json,sys; json.dump({'torch': sys.argv[1]}, open(sys.argv[2], 'w'))" \
  "$(PYTHONPATH="$site" python3 -c 'import torch; print(torch.__version__)')" "$bundle/built-against.json"
du -sh "$bundle"
