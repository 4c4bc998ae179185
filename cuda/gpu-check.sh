#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine. `just gpu-check` builds
# everything into bin/gpu on a machine with the toolkit; run this there from
# the repository root: no Go toolchain is needed, the binaries link only
# libcuda.so.1. It runs the kernel parity and end-to-end tests, verifies
# llama.cpp's golden outputs with --backend cuda, and benchmarks decode with
# and without CUDA graphs, reporting bandwidth against the H200's 4.8 TB/s.
#
# With --dry-run it runs nothing: it checks that bin/gpu holds every file
# the steps need and prints each step's command line (prefixed "+ "), so a
# CPU machine can show what the GPU run will do.
set -uo pipefail
G=bin/gpu
PEAK=${PEAK_GBS:-4800}
dry=0
if [ "${1:-}" = "--dry-run" ]; then
	dry=1
elif [ $# -gt 0 ]; then
	echo "usage: $0 [--dry-run]" >&2
	exit 2
fi
status=0
exec 3>&1 # step lines bypass the output filters below

# run prints a step and, unless this is a dry run, runs it.
run() {
	printf '+ %s\n' "$*" >&3
	[ "$dry" -eq 1 ] || "$@"
}

# need reports a file of bin/gpu that is missing.
need() {
	if [ ! -e "$1" ]; then
		echo "missing: $1 (run 'just gpu-check' first)"
		status=1
	fi
}
need "$G/cuda.test"
need "$G/ninfer"
need "$G/make_random_gguf.py"
for m in stories260K tiny-qwen3-f32 tiny-qwen3-q8_0 tiny-qwen3-eagle3-f32 tiny-qwen3-dflash-f32; do need "$G/models/$m.gguf"; done
shopt -s nullglob
goldens=("$G"/golden/*.json)
[ ${#goldens[@]} -gt 0 ] || { echo "missing: $G/golden/*.json"; status=1; }

run nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

echo "== parity and end-to-end tests"
run env NINFER_CUDA_MODELS=$G/models "$G/cuda.test" -test.count=1 -test.v 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' | tail -80
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== golden outputs (llama.cpp) on --backend cuda"
run "$G/ninfer" golden verify --backend cuda --models "$G/models" "${goldens[@]}" || status=1

echo "== speculative graphs on --backend cuda (same_as: plain, greedy ids)"
run "$G/ninfer" graph test --backend cuda --model "$G/models/tiny-qwen3-f32.gguf" --model "draft=$G/models/tiny-qwen3-q8_0.gguf" ngram self draft || status=1
run "$G/ninfer" graph test --backend cuda --model "$G/models/tiny-qwen3-f32.gguf" --model "draft=$G/models/tiny-qwen3-eagle3-f32.gguf" eagle3 || status=1
run "$G/ninfer" graph test --backend cuda --model "$G/models/tiny-qwen3-f32.gguf" --model "draft=$G/models/tiny-qwen3-dflash-f32.gguf" dflash || status=1

bench() { # model
	for mode in "" --no-cuda-graph; do
		# shellcheck disable=SC2086 # mode is empty or one flag
		run "$G/ninfer" bench --backend cuda $mode --model "$1" -p 512 -n 128 -r 3 --warmup 1 --peak-bandwidth "$PEAK" --output md 2>&1 |
			grep -E '^\|| cuda: |error'
		[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
	done
}
echo "== bench, graphs then eager"
bench "$G/models/stories260K.gguf"
bench "$G/models/tiny-qwen3-q8_0.gguf"
if [ "$dry" -eq 1 ] || python3 -c 'import numpy' 2>/dev/null; then
	for dt in q8_0 f16; do
		m=/tmp/qwen3-0.6b-shape-$dt.gguf
		if [ "$dry" -eq 1 ] || [ ! -f "$m" ]; then
			run python3 "$G/make_random_gguf.py" --preset qwen3-0.6b-shape --dtype "$dt" -o "$m" >/dev/null
		fi
		bench "$m"
	done
else
	echo "no python3 numpy here: skipping the bandwidth-bound 0.6B-shape models"
fi
if [ "$dry" -eq 1 ]; then
	echo "dry run: nothing was run"
fi
exit $status
