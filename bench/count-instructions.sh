#!/usr/bin/env bash
# Instructions one call of a tiny benchmark executes, counted by Valgrind's
# callgrind: steady where timings of a 100-ns op on a shared machine move by
# 2x. Collects inside the benchmark's function only and divides by the
# number of calls of CALLEE it made (one per iteration).
#
#   bench/count-instructions.sh build/bin/backplane-bench tiny_add/backplane
#   bench/count-instructions.sh build/bin/backplane-bench tiny_add_grad/backplane
#   bench/count-instructions.sh BENCH NAME [CALLEE]
#
# NAME is a benchmark of BENCH whose function is NAME with '/' as '_'
# (tiny_add/backplane, tiny_add_scalar/backplane, tiny_add_grad/backplane in
# bench_main.cpp; tiny_add/libtorch in
# bench_libtorch.cpp); CALLEE defaults to bp::add(Tensor, Tensor, Scalar),
# or to LibTorch's add operator for a NAME ending in /libtorch.
# Needs valgrind (Debian: apt-get install valgrind). Takes a minute or two:
# the program runs about 50 times slower under callgrind.
set -euo pipefail
if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
bench=$1 name=$2
default_callee="bp::add(bp::Tensor const&, bp::Tensor const&, bp::Scalar const&)"
[[ $name == */libtorch ]] &&
  default_callee="at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, c10::Scalar const&)"
callee=${3:-$default_callee}
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
fn="bp::bench::(anonymous namespace)::${name//\//_}(benchmark::State&)"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
cmd=(valgrind --tool=callgrind "--callgrind-out-file=$out" "--toggle-collect=$fn"
     "$bench" "--benchmark_filter=^${name}\$" --benchmark_min_time=0.2)
echo "running: ${cmd[*]}" >&2
"${cmd[@]}" >/dev/null 2>"$err" || { cat "$err" >&2; exit 1; }
total=$(awk '/Collected/ {print $NF}' "$err")
calls=$(callgrind_annotate --tree=calling "$out" 2>/dev/null | grep -F "> " | grep -F "$callee (" |
        head -1 | sed 's/.*(\([0-9,]*\)x).*/\1/' | tr -d , || true)
if ! [[ $total =~ ^[0-9]+$ && $calls =~ ^[1-9][0-9]*$ ]]; then
  echo "no calls of '$callee' were counted inside '$fn'" >&2
  exit 1
fi
echo "$name: $((total / calls)) instructions per call ($total in $calls calls)"
