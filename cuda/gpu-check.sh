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
#      and the hybrids' greedy ids with bf16 state (state-bf16) equal to
#      the cpu backend's;
#   3. `golden drafts`: llama.cpp's draft counts under mtp, eagle3, dflash;
#   4. `ninfer bench --batch 1,8,32`, CUDA graph replay then eager
#      launches, on the Qwen3-0.6B shape and a 1.7B generated model: bench
#      JSON (ninfer_bench_report, schema 15; decode_path cuda_graph /
#      cuda_eager) with decode bytes per token (weights shared by a batch's
#      sequences) and the fraction of the H200's HBM bandwidth (PEAK_GBS,
#      default 4800) it reaches.
# It ends with one summary table of the steps and one of the bench reports
# (graph vs eager per test and batch); the raw reports go to OUT (default
# gpu-check-out).
#
# With --dry-run it checks that bin/gpu holds every file the steps need,
# prints each step's command line (prefixed "+ ") without running it, and
# runs what needs no GPU: step 4's bench at batch 1, 8 and 32 on the cpu
# backend with stories260K, by the ninfer NINFER_CPU names (built without
# -tags cuda; OUT defaults to a temporary folder), whose
# report goes through the same summary, so a CPU machine (CI) checks the
# batch reports and the roofline table the GPU run will print.
set -uo pipefail
G=bin/gpu
PEAK=${PEAK_GBS:-4800}
PY=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)} # with numpy for the generated models
dry=0
if [ "${1:-}" = "--dry-run" ]; then
	dry=1
elif [ $# -gt 0 ]; then
	echo "usage: $0 [--dry-run]" >&2
	exit 2
fi
if [ "$dry" -eq 1 ]; then
	OUT=${OUT:-$(mktemp -d)}
else
	OUT=${OUT:-gpu-check-out}
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

# cpustep runs a step that needs no GPU, also in a dry run.
cpustep() {
	local was=$dry
	dry=0
	step "$@"
	dry=$was
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
mkdir -p "$OUT"

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

# same_ids runs a greedy prompt under a graph on the cpu and the cuda
# backend and fails unless both give the same ids.
same_ids() { # model graph
	local ids=()
	for be in cpu cuda; do
		ids+=("$("$G/ninfer" run --backend "$be" --graph "$2" --model "$1" --prompt "Once upon a time" --max-tokens 32 --ignore-eos --json |
			"$PY" -c 'import json, sys; print(json.load(sys.stdin)["ids"])')") || return 1
	done
	echo "cpu  ${ids[0]}"
	echo "cuda ${ids[1]}"
	[ "${ids[0]}" = "${ids[1]}" ]
}
for m in tiny-qwen35-f32 tiny-qwen35moe-f32; do
	[ -f "$M/$m.gguf" ] && step "state-bf16 $m cuda = cpu" same_ids "$M/$m.gguf" state-bf16
done

echo "== 3. llama.cpp's draft counts (golden drafts) on --backend cuda"
step "drafts mtp" "$G/ninfer" golden drafts --backend cuda --graph mtp --model "$M/tiny-qwen35-f32.gguf" "$G/golden/spec-tiny-qwen35-mtp.json"
step "drafts mtp moe" "$G/ninfer" golden drafts --backend cuda --graph mtp --model "$M/tiny-qwen35moe-f32.gguf" "$G/golden/spec-tiny-qwen35moe-mtp.json"
step "drafts eagle3" "$G/ninfer" golden drafts --backend cuda --graph eagle3 --model "$M/tiny-qwen3-f32.gguf" --model "draft=$M/tiny-qwen3-eagle3-f32.gguf" "$G/golden/spec-tiny-qwen3-eagle3.json"
step "drafts dflash" "$G/ninfer" golden drafts --backend cuda --graph dflash --model "$M/tiny-qwen3-f32.gguf" --model "draft=$M/tiny-qwen3-dflash-f32.gguf" "$G/golden/spec-tiny-qwen3-dflash.json"

echo "== 4. bench: batch 1, 8 and 32, CUDA graph replay then eager"
# bench runs one model's tests at every batch, graph replay and eager.
bench() { # name model
	local name=$1 model=$2
	for mode in graph eager; do
		flag=()
		[ "$mode" = eager ] && flag=(--no-cuda-graph)
		step "bench $name $mode" "$G/ninfer" bench --backend cuda "${flag[@]}" --model "$model" -p 512 -n 128 --batch 1,8,32 -r 3 --warmup 1 \
			--peak-bandwidth "$PEAK" --output json --output-file "$OUT/bench-$name-$mode.json"
	done
}
if [ "$dry" -eq 1 ] || "$PY" -c 'import numpy' 2>/dev/null; then
	for spec in "qwen3-0.6b q8_0" "qwen3-1.7b f16 --param n_embd=2048 --param n_ff=6144"; do
		read -r name dt params <<<"$spec"
		m=/tmp/$name-shape-$dt.gguf
		if [ "$dry" -eq 1 ] || [ ! -f "$m" ]; then
			# shellcheck disable=SC2086 # params is a list of flags
			step "make $name $dt" "$PY" "$G/make_random_gguf.py" --preset qwen3-0.6b-shape $params --dtype "$dt" -o "$m"
		fi
		bench "$name-$dt" "$m"
	done
else
	summary+=("bench|skipped|no python3 numpy here to generate the 0.6B and 1.7B shapes")
fi
if [ "$dry" -eq 1 ]; then
	# The same bench, batches and summary on the cpu backend: the part of
	# step 4 a machine without a GPU runs, with a ninfer built without
	# -tags cuda (NINFER_CPU; bin/gpu/ninfer initialises the driver as it
	# starts, so it cannot start without a GPU).
	if [ -x "${NINFER_CPU:-}" ]; then
		cpustep "bench stories260K cpu" "$NINFER_CPU" bench --backend cpu --model "$M/stories260K.gguf" -p 16 -n 8 --batch 1,8,32 -r 1 --warmup 0 \
			--peak-bandwidth "$PEAK" --output json --output-file "$OUT/bench-stories260K-cpu.json"
	else
		summary+=("bench stories260K cpu|skipped|NINFER_CPU is not an executable ninfer built without -tags cuda")
	fi
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
# The bench table: per model, test and batch, decode tok/s with graph
# replay and eager, the speed-up, bytes read per token and the fraction of
# HBM peak (graph replay), from every bench report in OUT.
benches=("$OUT"/bench-*.json)
if [ ${#benches[@]} -gt 0 ] && [ -z "$PY" ]; then
	echo "no python3 here: the bench table is left out (reports in $OUT)"
elif [ ${#benches[@]} -gt 0 ]; then
	echo
	if ! "$PY" - "${benches[@]}" <<'EOF'; then
import json, os, sys
rows = {}
for path in sys.argv[1:]:
    name, mode = os.path.basename(path)[len("bench-"):-len(".json")].rsplit("-", 1)
    r = json.load(open(path))
    for t in r["tests"]:
        if t["kind"] == "pp":
            continue
        row = rows.setdefault((name, t["label"]), {"batch": t["batch"]})
        row[mode] = (t["decode_output_tok_s_mean"], t["decode_bytes_per_token"], t["decode_bandwidth_fraction_of_peak"], r["config"]["decode_path"])
num = lambda v, f: "-" if v is None else f % v
print("| model | test | batch | decode path | decode tok/s | eager tok/s | graph/eager | bytes/token | of HBM peak |")
print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for (name, label), row in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[1]["batch"], kv[0][1])):
    main = row.get("graph") or row.get("cpu") or row.get("eager")
    eager = row.get("eager")
    speed = main[0] / eager[0] if eager and main is not eager and main[0] and eager[0] else None
    print("| %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (name, label, row["batch"], main[3], num(main[0], "%.1f"),
          num(eager[0] if eager else None, "%.1f"), num(speed, "%.2fx"), num(main[1], "%.3g"), num(None if main[2] is None else 100 * main[2], "%.1f%%")))
EOF
		status=1
	fi
fi
if [ "$dry" -eq 1 ]; then
	echo "dry run: only the cpu bench ran; its report is in $OUT"
fi
exit $status
