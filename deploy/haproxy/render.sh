#!/usr/bin/env bash
# Prints deploy/haproxy/haproxy.cfg for N replicas on the given loopback ports:
#   render.sh GATEWAY_PORT STATS_PORT HTTP_PORT:AGENT_PORT...
# The frontend binds 127.0.0.1:GATEWAY_PORT, the stats page 127.0.0.1:STATS_PORT,
# and replica i (r1, r2, ...) is 127.0.0.1:HTTP_PORT with its agent check on
# AGENT_PORT. Everything else is the file as checked in.
set -euo pipefail
if [ $# -lt 3 ]; then
	echo "usage: $0 GATEWAY_PORT STATS_PORT HTTP_PORT:AGENT_PORT..." >&2
	exit 2
fi
gateway=$1 stats=$2
shift 2
servers=""
i=0
for r in "$@"; do
	i=$((i + 1))
	http=${r%%:*} agent=${r##*:}
	if ! [[ "$r" =~ ^[0-9]+:[0-9]+$ ]]; then
		echo "$0: replica $i: want HTTP_PORT:AGENT_PORT, got '$r'" >&2
		exit 2
	fi
	servers+="    server r$i 127.0.0.1:$http agent-port $agent"$'\n'
done
cfg="$(dirname "$0")/haproxy.cfg"
awk -v gateway="$gateway" -v stats="$stats" -v servers="$servers" '
	/^frontend / { section = "frontend" }
	/^listen stats/ { section = "stats" }
	/^backend / { section = "backend" }
	/^    bind 127\.0\.0\.1:/ && section == "frontend" { print "    bind 127.0.0.1:" gateway; next }
	/^    bind 127\.0\.0\.1:/ && section == "stats" { print "    bind 127.0.0.1:" stats; next }
	/^    server / && section == "backend" { if (!done) printf "%s", servers; done = 1; next }
	{ print }
' "$cfg"
