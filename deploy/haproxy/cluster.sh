#!/usr/bin/env bash
# Starts N `ninfer serve` replicas on free loopback ports and HAProxy in front
# of them (haproxy.cfg beside this script, through render.sh), then waits;
# Ctrl-C or SIGTERM stops them all (the replicas drain, see docs/serving.md).
#   cluster.sh NINFER MODEL N [ninfer serve flags...]
# The gateway listens on 127.0.0.1:${NINFER_GATEWAY_PORT:-8080}, the HAProxy
# stats page on a free port; everything is on 127.0.0.1.
set -euo pipefail
if [ $# -lt 3 ]; then
	echo "usage: $0 NINFER MODEL N [ninfer serve flags...]" >&2
	exit 2
fi
ninfer=$1 model=$2 n=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v haproxy >/dev/null 2>&1; then
	echo "cluster: haproxy is not installed (Debian: apt-get install haproxy)" >&2
	exit 1
fi
gateway=${NINFER_GATEWAY_PORT:-8080}
dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 2N + 1 distinct free ports: every socket stays bound until all are chosen.
read -r -a ports <<<"$(/usr/bin/python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
' $((2 * n + 1)))"
stats=${ports[0]}
replicas=()
for i in $(seq 1 "$n"); do
	http=${ports[$((2 * i - 1))]} agent=${ports[$((2 * i))]}
	"$ninfer" serve --model "$model" --host 127.0.0.1 --port "$http" --agent-port "$agent" "$@" \
		>"$dir/r$i.out" 2> >(sed -u "s/^/r$i: /" >&2) &
	pids+=($!)
	replicas+=("$http:$agent")
done
for i in $(seq 1 "$n"); do
	for _ in $(seq 600); do
		grep -q "ready on" "$dir/r$i.out" 2>/dev/null && break
		kill -0 "${pids[$((i - 1))]}" 2>/dev/null || { echo "cluster: replica r$i exited" >&2; exit 1; }
		sleep 0.1
	done
	grep -q "ready on" "$dir/r$i.out" || { echo "cluster: replica r$i is not ready after 60 s" >&2; exit 1; }
	echo "cluster: r$i $(cat "$dir/r$i.out")"
done
"$here/render.sh" "$gateway" "$stats" "${replicas[@]}" >"$dir/haproxy.cfg"
haproxy -db -f "$dir/haproxy.cfg" &
pids+=($!)
echo "cluster: gateway http://127.0.0.1:$gateway (HAProxy, config $dir/haproxy.cfg), stats http://127.0.0.1:$stats/stats; Ctrl-C stops"
wait -n
