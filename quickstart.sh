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
          nlohmann-json3-dev libgloo-dev
          python3-dev python3-venv python3-pytest python3-numpy python3-torch)
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

# --- the Python package's build tool -----------------------------------------
# nanobind (the binding library) is not in Debian: pip installs it from PyPI
# into a virtual environment in the build folder, made with
# --system-site-packages so that Debian's numpy, torch and pytest stay
# visible to the interpreter the package is built for (/usr/bin/python3).
# A virtual environment rather than a user-wide install: Debian's Python
# refuses pip outside one (PEP 668), and nothing outside the build changes.
python_env="$build_dir/python-env"
nanobind_version=3.1.0
# Without PyPI (no network, a proxy pip does not trust) the rest is built and
# tested all the same, and this says that the Python package is left out.
if ! "$python_env/bin/python3" -c "import nanobind" 2>/dev/null; then
  echo "== Python: nanobind $nanobind_version from PyPI into $python_env"
  mkdir -p "$build_dir"
  [ -x "$python_env/bin/pip" ] || /usr/bin/python3 -m venv --system-site-packages "$python_env"
  if ! "$python_env/bin/pip" install --quiet --disable-pip-version-check --timeout 30 \
         "nanobind==$nanobind_version" > "$build_dir/python-env.log" 2>&1; then
    echo "== Python: pip could not install nanobind ($(tail -n 1 "$build_dir/python-env.log"));" \
         "the Python package and its tests are left out (log: $build_dir/python-env.log)"
  fi
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
