#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine. `just gpu-check` builds
# everything into bin/gpu on a machine with the toolkit; run this there from
# the repository root: no Go toolchain is needed, the binaries link only
# libcuda.so.1. It runs the kernel parity and end-to-end tests, verifies
# llama.cpp's golden outputs with --backend cuda, and benchmarks decode with
# and without CUDA graphs, reporting bandwidth against the H200's 4.8 TB/s.
set -uo pipefail
G=bin/gpu
PEAK=${PEAK_GBS:-4800}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

echo "== parity and end-to-end tests"
NINFER_CUDA_MODELS=$G/models "$G/cuda.test" -test.count=1 -test.v 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' | tail -80
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== golden outputs (llama.cpp) on --backend cuda"
"$G/ninfer" golden verify --backend cuda --models "$G/models" "$G"/golden/*.json || status=1

bench() { # model, extra flags
	for mode in "" --no-cuda-graph; do
		"$G/ninfer" bench --backend cuda $mode --model "$1" -p 512 -n 128 -r 3 --warmup 1 --peak-bandwidth "$PEAK" --output md 2>&1 |
			grep -E '^\|| cuda: |error' || status=1
	done
}
echo "== bench, graphs then eager"
bench "$G/models/stories260K.gguf"
bench "$G/models/tiny-qwen3-q8_0.gguf"
if python3 -c 'import numpy' 2>/dev/null; then
	for dt in q8_0 f16; do
		m=/tmp/qwen3-0.6b-shape-$dt.gguf
		[ -f "$m" ] || python3 "$G/make_random_gguf.py" --preset qwen3-0.6b-shape --dtype "$dt" -o "$m" >/dev/null
		bench "$m"
	done
else
	echo "no python3 numpy here: skipping the bandwidth-bound 0.6B-shape models"
fi
exit $status
