#!/usr/bin/env bash
# Sets up, builds and runs Backplane on a Debian machine.
#   bash quickstart.sh conformance   # install what is missing, build, certify cpu_onednn
#   bash quickstart.sh test          # install what is missing, build, run every test
# Environment: BUILD_DIR (default build), JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")"

mode=${1:-}
case "$mode" in
  conformance|test) ;;
  -h|--help|"")
    sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
    [ -n "$mode" ] && exit 0 || exit 2 ;;
  *) echo "quickstart.sh: unknown mode '$mode' (use conformance or test)" >&2; exit 2 ;;
esac

build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}

# --- dependencies: Debian packages, installed only when missing --------------
packages=(cmake g++ make pkg-config python3 dpkg-dev file
          libboost-dev libboost-program-options-dev libboost-filesystem-dev libssl-dev
          libdnnl-dev ocl-icd-opencl-dev libdlpack-dev googletest libgtest-dev libbenchmark-dev
          opencl-c-headers pocl-opencl-icd libclblast-dev clinfo gnuplot-nox
          nlohmann-json3-dev libgloo-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
else
  echo "== dependencies present"
fi

# --- build -------------------------------------------------------------------
echo "== configuring ($build_dir)"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
echo "== building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"

# --- run ---------------------------------------------------------------------
if [ "$mode" = conformance ]; then
  echo "== conformance on cpu_onednn"
  exec "$build_dir/bin/backplane" conformance --backend cpu_onednn \
    --json "$build_dir/conformance-cpu_onednn.json"
else
  echo "== tests"
  exec ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" --timeout 600
fi
