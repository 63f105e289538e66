#!/usr/bin/env bash
# backplane-bench beside PyTorch 2.x: builds backplane-bench against the
# LibTorch of PyTorch's PyPI wheel (in a build folder of its own) and runs the
# benchmarks that have LibTorch rows, so that its ratio table puts Backplane
# beside PyTorch 2.x as build/bin/backplane-bench puts it beside Debian's 1.13.
#   bash bench/pytorch2.sh --install                  # venv + wheel, build, run
#   bash bench/pytorch2.sh [-- BENCHMARK ARGS...]     # build (if needed) and run
# --install makes a virtual environment and installs the wheel (about 900 MB
# from PyPI) with the two CUDA runtime libraries its libtorch_cpu.so links,
# nothing else; without it the script uses the one a previous --install made.
# Not part of CI. Environment: VENV (default build-pytorch2/venv), BUILD_DIR
# (default build-pytorch2), TORCH_VERSION (default: the newest on PyPI),
# FILTER (default: every benchmark with a LibTorch row).
set -euo pipefail
cd "$(dirname "$0")/.."

install=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; args=("$@"); break ;;
    *) echo "pytorch2.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

build_dir=${BUILD_DIR:-build-pytorch2}
venv=${VENV:-$build_dir/venv}
filter=${FILTER:-'^(tiny_add|tiny_add_grad|mlp_step|add_16M|adam_step|sgd_step|sparse_mm_(1pct|0.1pct)|coalesce_1pct|sort_1M|conv2d_fwd|conv2d_fwd_bwd|resnet_block|norm_pool|matmul_[0-9]+)/(backplane|libtorch)'}

if [ "$install" = 1 ]; then
  echo "== virtual environment: $venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  echo "== installing torch${TORCH_VERSION:+==$TORCH_VERSION} from PyPI (no dependencies)"
  "$venv/bin/pip" install -q --no-deps "torch${TORCH_VERSION:+==$TORCH_VERSION}"
  # libtorch_cpu.so of the CUDA wheel links the CUDA runtime and CUPTI: the
  # two packages at the versions the wheel names, and nothing else of CUDA.
  mapfile -t cuda_deps < <("$venv/bin/python" - <<'PY'
import importlib.metadata as m
for r in m.requires("torch") or []:
    name = r.split(";")[0].strip()
    if name.startswith(("nvidia-cuda-runtime", "nvidia-cuda-cupti")):
        print(name)
PY
)
  if [ ${#cuda_deps[@]} -gt 0 ]; then
    echo "== installing ${cuda_deps[*]}"
    "$venv/bin/pip" install -q --no-deps "${cuda_deps[@]}"
  fi
fi
site=$(ls -d "$venv"/lib/python3*/site-packages 2>/dev/null | head -1 || true)
torch_dir="$site/torch"
if [ -z "$site" ] || [ ! -f "$torch_dir/lib/libtorch_cpu.so" ]; then
  echo "pytorch2.sh: no PyTorch wheel in $venv; run with --install first" >&2
  exit 2
fi
version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))')
libs="$torch_dir/lib"
for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && libs="$libs:$d"; done

echo "== building backplane-bench against LibTorch $version ($build_dir)"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON \
  -DBACKPLANE_TORCH_CPU_LIB="$torch_dir/lib/libtorch_cpu.so" \
  -DBACKPLANE_C10_LIB="$torch_dir/lib/libc10.so" \
  -DBACKPLANE_ATEN_INCLUDE="$torch_dir/include" >/dev/null
cmake --build "$build_dir" --target backplane-bench -j "${JOBS:-$(nproc)}"

# One OpenMP runtime for both sides: the system's libgomp, which the
# cpu_onednn plugin and oneDNN were built with, rather than the copy the
# wheel bundles (only one libgomp.so.1 can be loaded in a process, and the
# wheel's took both sides' threading over).
gomp=$(ldconfig -p | awk '/libgomp\.so\.1 .*x86-64/ {print $NF; exit}')
echo "== backplane-bench: the libtorch rows are PyTorch $version's LibTorch (OpenMP: ${gomp:-bundled with the wheel})"
LD_PRELOAD="${gomp}${LD_PRELOAD:+:$LD_PRELOAD}" \
  LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$build_dir/bin/backplane-bench" --benchmark_filter="$filter" "${args[@]}"
