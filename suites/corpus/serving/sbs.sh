#!/usr/bin/env bash
# Serving throughput side by side (issue 20): `ninfer serve` and
# `llama-server --parallel C` on the same model and the same client
# workload (the corpus runner, /v1/completions, greedy), alternating at
# each point. Each point gets a fresh server; llama-server gets 4096 tokens
# of context per slot, as ninfer's KV holds per sequence by default.
#
#   suites/corpus/serving/sbs.sh MODEL OUT LLAMA_SERVER [WORKLOAD:C:LIMIT ...]
#
# WORKLOAD is short or prompt100 (suites/corpus/serving/*.json); LIMIT
# sends only the first LIMIT requests of the send order. The table at the
# end is also written to OUT/sbs.md. LLAMA_ARGS adds arguments to
# llama-server's (e.g. --no-repack where its repacked CPU kernels crash).
set -euo pipefail
model=$1 out=$2 llama=$3
shift 3
points=("$@")
if [ ${#points[@]} -eq 0 ]; then
	points=(short:1:8 short:2:8 short:4:16 short:8:32 short:16:32 prompt100:1:8 prompt100:8:32 prompt100:16:32)
fi
bin=${NINFER_BIN:-bin/ninfer}
here=$(dirname "$0")
port=${LLAMA_PORT:-18080}
mkdir -p "$out"
for p in "${points[@]}"; do
	IFS=: read -r w c lim <<<"$p"
	echo "== $w C=$c ninfer $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
	"$bin" corpus --model "$model" --manifest "$here/$w.json" --api completions --greedy \
		--concurrency "$c" --limit "$lim" --out "$out/ninfer-$w-c$c" >/dev/null
	echo "== $w C=$c llama-server $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
	"$llama" -m "$model" --host 127.0.0.1 --port "$port" -t 2 -tb 2 --parallel "$c" -c $((c * 4096)) \
		--no-webui ${LLAMA_ARGS:-} >"$out/llama-server-$w-c$c.log" 2>&1 &
	pid=$!
	for _ in $(seq 120); do
		curl -sf "127.0.0.1:$port/health" >/dev/null && break
		sleep 0.5
	done
	"$bin" corpus --url "http://127.0.0.1:$port" --manifest "$here/$w.json" --api completions --greedy \
		--concurrency "$c" --limit "$lim" --out "$out/llama-$w-c$c" >/dev/null || true
	kill "$pid"
	wait "$pid" 2>/dev/null || true
done
python3 - "$out" "${points[@]}" <<'PY' | tee "$out/sbs.md"
import json, sys
out, points = sys.argv[1], sys.argv[2:]
def point(path):
    p = json.load(open(path))["points"][0]
    return p
print("| workload | C | requests | ninfer decode tok/s | ninfer steady tok/s | llama-server decode tok/s | ratio | ninfer ITL p50 ms | llama-server ITL p50 ms | ninfer TTFT p50 ms | llama-server TTFT p50 ms |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for p in points:
    w, c, lim = p.split(":")
    n = point(f"{out}/ninfer-{w}-c{c}/corpus.json")
    l = point(f"{out}/llama-{w}-c{c}/corpus.json")
    steady = n.get("steady_decode_tok_s") or 0
    print(f"| {w} | {c} | {n['requests']} | {n['corpus_decode_tok_s']:.1f} | {steady:.1f} | {l['corpus_decode_tok_s']:.1f} | "
          f"{n['corpus_decode_tok_s']/l['corpus_decode_tok_s']:.2f} | {n['itl']['p50_ms']:.1f} | {l['itl']['p50_ms']:.1f} | {n['ttft']['p50_ms']:.0f} | {l['ttft']['p50_ms']:.0f} |")
PY
