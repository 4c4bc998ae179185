#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine. `just gpu-check` builds
# everything into bin/gpu on a machine with the toolkit; run this there from
# the repository root: no Go toolchain is needed, the binaries link only
# libcuda.so.1. In order:
#   1. the kernel parity and end-to-end tests (cuda.test);
#   2. `golden verify` of every llama.cpp golden whose model bin/gpu holds,
#      under the plain graph and every speculative graph the model runs
#      (ngram on all; mtp on the hybrids; self and draft, eagle3, dflash on
#      tiny-qwen3-f32); quantized kq-* models teacher-forced;
#   3. `golden drafts`: llama.cpp's draft counts under mtp, eagle3, dflash;
#   4. `ninfer bench` (batch 1) and `ninfer corpus` (batch 8 and 32), CUDA
#      graph replay then eager launches, on the Qwen3-0.6B shape and a 1.7B
#      generated model: bench JSON (ninfer_bench_report, decode_path
#      cuda_graph / cuda_eager) with decode bytes per token and the fraction
#      of the H200's HBM bandwidth (PEAK_GBS, default 4800) it reaches.
# It ends with one summary table; the raw reports go to OUT (default
# gpu-check-out).
#
# With --dry-run it runs nothing: it checks that bin/gpu holds every file
# the steps need and prints each step's command line (prefixed "+ ") and
# the summary table of what would run, so a CPU machine (CI) shows what the
# GPU run will do.
set -uo pipefail
G=bin/gpu
OUT=${OUT:-gpu-check-out}
PEAK=${PEAK_GBS:-4800}
dry=0
if [ "${1:-}" = "--dry-run" ]; then
	dry=1
elif [ $# -gt 0 ]; then
	echo "usage: $0 [--dry-run]" >&2
	exit 2
fi
status=0
summary=()
exec 3>&1 # step lines bypass the output filters below

# run prints a step and, unless this is a dry run, runs it.
run() {
	printf '+ %s\n' "$*" >&3
	[ "$dry" -eq 1 ] || "$@"
}

# step runs a named step (run's arguments after the name), keeps its output
# in $OUT/<name>.log, and records its result and last line for the summary.
step() {
	local name=$1
	shift
	local log="$OUT/${name// /_}.log" rc=0
	if [ "$dry" -eq 1 ]; then
		run "$@"
		summary+=("$name|dry run|")
		return
	fi
	run "$@" >"$log" 2>&1 || rc=$?
	local last
	last=$(grep -v '^\s*$' "$log" | tail -1 | cut -c1-90)
	if [ "$rc" -eq 0 ]; then
		summary+=("$name|ok|$last")
	else
		summary+=("$name|FAIL ($rc)|$last")
		status=1
	fi
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
for m in stories260K tiny-qwen3-f32 tiny-qwen3-q8_0 tiny-qwen35-f32 tiny-qwen35moe-f32 tiny-qwen3-eagle3-f32 tiny-qwen3-dflash-f32; do
	need "$G/models/$m.gguf"
done
shopt -s nullglob
goldens=("$G"/golden/*.json)
[ ${#goldens[@]} -gt 0 ] || { echo "missing: $G/golden/*.json"; status=1; }
[ "$dry" -eq 1 ] || mkdir -p "$OUT"

run nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

echo "== 1. parity and end-to-end tests"
step parity env NINFER_CUDA_MODELS=$G/models "$G/cuda.test" -test.count=1 -test.v

echo "== 2. golden outputs (llama.cpp) on --backend cuda, plain and speculative graphs"
M=$G/models
for g in "${goldens[@]}"; do
	base=$(basename "$g" .json)
	case "$base" in spec-*) continue ;; esac # draft counts: step 3
	model=$M/$base.gguf
	if [ ! -f "$model" ]; then
		summary+=("golden $base|skipped|model not in $M (not stored, or left out of the 64 MiB bin/gpu)")
		continue
	fi
	mode=()
	graphs=(plain ngram)
	case "$base" in
	llama-2-tiny-random) continue ;;                      # only its prompt ids are a golden (flat logits)
	kq-*) mode=(--teacher-forced) graphs=(plain) ;;        # another float order than ggml's
	esac
	case "$base" in
	tiny-qwen35-f32 | tiny-qwen35-f16 | tiny-qwen35moe-f32) graphs+=(mtp) ;;
	tiny-qwen3-f32) graphs+=(self draft eagle3 dflash) ;;
	esac
	for gr in "${graphs[@]}"; do
		extra=()
		case "$gr" in
		draft) extra=(--model "draft=$M/tiny-qwen3-q8_0.gguf") ;;
		eagle3) extra=(--model "draft=$M/tiny-qwen3-eagle3-f32.gguf") ;;
		dflash) extra=(--model "draft=$M/tiny-qwen3-dflash-f32.gguf") ;;
		esac
		step "golden $base $gr" "$G/ninfer" golden verify --backend cuda --graph "$gr" --model "$model" "${extra[@]}" "${mode[@]}" "$g"
	done
done

echo "== 3. llama.cpp's draft counts (golden drafts) on --backend cuda"
step "drafts mtp" "$G/ninfer" golden drafts --backend cuda --graph mtp --model "$M/tiny-qwen35-f32.gguf" "$G/golden/spec-tiny-qwen35-mtp.json"
step "drafts mtp moe" "$G/ninfer" golden drafts --backend cuda --graph mtp --model "$M/tiny-qwen35moe-f32.gguf" "$G/golden/spec-tiny-qwen35moe-mtp.json"
step "drafts eagle3" "$G/ninfer" golden drafts --backend cuda --graph eagle3 --model "$M/tiny-qwen3-f32.gguf" --model "draft=$M/tiny-qwen3-eagle3-f32.gguf" "$G/golden/spec-tiny-qwen3-eagle3.json"
step "drafts dflash" "$G/ninfer" golden drafts --backend cuda --graph dflash --model "$M/tiny-qwen3-f32.gguf" --model "draft=$M/tiny-qwen3-dflash-f32.gguf" "$G/golden/spec-tiny-qwen3-dflash.json"

echo "== 4. bench: CUDA graph replay then eager, batch 1 (bench), 8 and 32 (corpus)"
# bench runs one model at batch 1 (ninfer bench), then at batch 8 and 32
# (ninfer corpus, that many concurrent greedy requests to a fresh server).
bench() { # name model
	local name=$1 model=$2
	for mode in graph eager; do
		flag=()
		[ "$mode" = eager ] && flag=(--no-cuda-graph)
		step "bench $name b1 $mode" "$G/ninfer" bench --backend cuda "${flag[@]}" --model "$model" -p 512 -n 128 -r 3 --warmup 1 \
			--peak-bandwidth "$PEAK" --output json --output-file "$OUT/bench-$name-$mode.json"
		sflag=()
		[ "$mode" = eager ] && sflag=(--server-arg=--no-cuda-graph)
		step "bench $name b8,32 $mode" "$G/ninfer" corpus --model "$model" --server-bin "$G/ninfer" --server-arg=--backend --server-arg=cuda "${sflag[@]}" \
			--greedy --concurrency 8,32 --limit 96 --out "$OUT/corpus-$name-$mode"
	done
}
if [ "$dry" -eq 1 ] || python3 -c 'import numpy' 2>/dev/null; then
	for spec in "qwen3-0.6b q8_0" "qwen3-1.7b f16 --param n_embd=2048 --param n_ff=6144"; do
		read -r name dt params <<<"$spec"
		m=/tmp/$name-shape-$dt.gguf
		if [ "$dry" -eq 1 ] || [ ! -f "$m" ]; then
			# shellcheck disable=SC2086 # params is a list of flags
			step "make $name $dt" python3 "$G/make_random_gguf.py" --preset qwen3-0.6b-shape $params --dtype "$dt" -o "$m"
		fi
		bench "$name-$dt" "$m"
	done
else
	summary+=("bench|skipped|no python3 numpy here to generate the 0.6B and 1.7B shapes")
fi

# The summary: every step's result; for the batch-1 bench reports, decode
# tokens/s, bytes read per token and the fraction of HBM peak.
echo
echo "| step | result | detail |"
echo "| --- | --- | --- |"
for s in "${summary[@]}"; do
	IFS='|' read -r name res detail <<<"$s"
	echo "| $name | $res | $detail |"
done
if [ "$dry" -eq 0 ] && command -v python3 >/dev/null; then
	echo
	echo "| bench report | decode tok/s | bytes/token | of HBM peak | decode_path |"
	echo "| --- | --- | --- | --- | --- |"
	for f in "$OUT"/bench-*.json; do
		python3 - "$f" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for t in r["tests"]:
    if t["kind"] != "tg":
        continue
    f = lambda v, s: "-" if v is None else s % v
    pct = lambda v: "-" if v is None else "%.1f%%" % (100 * v)
    print("| %s %s | %s | %s | %s | %s |" % (sys.argv[1].split("/")[-1], t["label"], f(t["decode_output_tok_s_mean"], "%.1f"),
          f(t.get("decode_bytes_per_token"), "%.3g"), pct(t.get("decode_bandwidth_fraction_of_peak")),
          r["config"]["decode_path"]))
EOF
	done
fi
if [ "$dry" -eq 1 ]; then
	echo "dry run: nothing was run"
fi
exit $status
