#!/usr/bin/env bash
# serve_load.sh - demos/serve.py under gunicorn, loaded with wrk: aicraft against PyTorch.
#
#   bench/serve_load.sh                   # 60 s of load per service
#   DURATION=20 bench/serve_load.sh       # a quicker look
#
# Two services run as `make serve` runs one (gunicorn --preload, 2 workers of
# 4 threads, AC_NUM_THREADS=1): one on aicraft, one on PyTorch with the same
# weights and the same WSGI code (SERVE_BACKEND=torch). wrk drives them from
# another process over loopback with bench/serve_mix.lua: one-row requests,
# and a 32-row one every BATCH_EVERY-th, on 8 connections. After a warm-up,
# the two take turns, ROUNDS rounds each, so that a machine whose load drifts
# slows both alike. Reported per service: requests/s over all its rounds, the
# median over rounds of p50 and p99 latency, the CPU time its workers spent
# per request (what a loaded machine disturbs least), and each worker's RSS
# after start-up, after the warm-up and at the end; then the ratios, with the
# median of the per-round throughput ratios. Last, the aicraft service takes
# the same load until SOAK_REQUESTS (100,000) requests have been answered
# since its warm-up, and its workers' RSS is read again. Before any of that, a
# fresh aicraft service takes HOSTILE_ROUNDS rounds of bench/serve_hostile.py's
# mix (1,300 valid and bad requests a round, each checked for its status) and
# its workers' RSS is read after each round.
#
# Weights: $AICRAFT_WEIGHTS, else data/mnist_mlp.safetensors (python
# demos/mnist_mlp.py writes it), else a randomly initialised model: speed and
# memory do not depend on the values. Inputs: MNIST test images when
# data/MNIST/raw has them, else random pixels; normalised as in training and
# written with 4 decimals, as a client would send them.
#
# Needs wrk (Debian: apt-get install wrk), curl, and gunicorn, orjson and
# torch==2.13.0 in the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
DURATION=${DURATION:-60}
ROUNDS=${ROUNDS:-6}
WARMUP=${WARMUP:-30}
CONNECTIONS=${CONNECTIONS:-8}
BATCH_EVERY=${BATCH_EVERY:-8}
SOAK_REQUESTS=${SOAK_REQUESTS:-100000}
HOSTILE_ROUNDS=${HOSTILE_ROUNDS:-4}
declare -A PORT=([aicraft]=${PORT:-8731} [torch]=$((${PORT:-8731} + 1)))

missing() { echo "serve_load: $1 is missing; $2" >&2; exit 1; }
command -v wrk >/dev/null || missing wrk "apt-get install -y wrk"
command -v curl >/dev/null || missing curl "apt-get install -y curl"
"$PY" -c "import gunicorn" 2>/dev/null || missing gunicorn "$PY -m pip install gunicorn"
"$PY" -c "import orjson" 2>/dev/null || missing orjson "$PY -m pip install orjson"
"$PY" -c "import torch" 2>/dev/null || missing torch "$PY -m pip install torch==2.13.0"

WORK=$(mktemp -d)
declare -A MASTER WORKERS R    # per service; R[field,service] holds the results
trap 'stop_service aicraft; stop_service torch; rm -rf "$WORK"' EXIT

WEIGHTS=${AICRAFT_WEIGHTS:-data/mnist_mlp.safetensors}
WEIGHTS_NOTE=$WEIGHTS
if [ ! -f "$WEIGHTS" ]; then
    WEIGHTS=$WORK/random_mlp.safetensors
    WEIGHTS_NOTE="random weights ($WEIGHTS_NOTE not found)"
    "$PY" - "$WEIGHTS" <<'EOF'
import sys
import aicraft as ac
from aicraft import nn
ac.manual_seed(0)
ac.save(nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).state_dict(), sys.argv[1])
EOF
fi

"$PY" - "$WORK" <<'EOF'
import json, os, sys
import numpy as np
images = "data/MNIST/raw/t10k-images-idx3-ubyte"
if os.path.exists(images):
    pixels = np.fromfile(images, np.uint8, offset=16)[:32 * 784].reshape(32, 784) / 255.0
else:
    pixels = np.random.default_rng(0).random((32, 784))
x = np.round((pixels - 0.1307) / 0.3081, 4)
for name, rows in (("one_row.json", x[:1]), ("rows_32.json", x)):
    with open(os.path.join(sys.argv[1], name), "w") as f:
        json.dump({"inputs": rows.tolist()}, f)
EOF

start_service() {   # $1: aicraft or torch
    local b=$1 url=http://127.0.0.1:${PORT[$1]}
    SERVE_BACKEND=$b AICRAFT_WEIGHTS=$WEIGHTS AC_NUM_THREADS=1 \
        "$PY" -m gunicorn -c demos/gunicorn_conf.py --no-control-socket --preload -w 2 --threads 4 -b "127.0.0.1:${PORT[$b]}" \
        demos.serve:app > "$WORK/$b.log" 2>&1 &
    MASTER[$b]=$!
    for _ in $(seq 300); do
        if ! kill -0 "${MASTER[$b]}" 2>/dev/null; then
            cat "$WORK/$b.log" >&2
            missing "a running $b service" "see its log above"
        fi
        if [ "$(pgrep -P "${MASTER[$b]}" | wc -l)" -eq 2 ] && curl -sf "$url/healthz" >/dev/null; then
            WORKERS[$b]=$(pgrep -P "${MASTER[$b]}" | sort -n | tr '\n' ' ')
            return
        fi
        sleep 0.1
    done
    missing "an answer from the $b service within 30 s" "see $WORK/$b.log"
}

# SIGINT to the master alone: gunicorn stops its workers itself.
stop_service() {
    local b=$1
    [ -n "${MASTER[$b]:-}" ] || return 0
    kill -INT "${MASTER[$b]}" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "${MASTER[$b]}" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "${MASTER[$b]}" ${WORKERS[$b]:-} 2>/dev/null || true
    wait "${MASTER[$b]}" 2>/dev/null || true
    MASTER[$b]=
}

cpu_ticks() { # $1: service; CPU time its workers have used, in clock ticks
    for pid in ${WORKERS[$1]}; do sed 's/.*) //' "/proc/$pid/stat"; done | awk '{ s += $12 + $13 } END { print s }'
}

rss_mb() {   # $1: service; each worker's resident memory, MB
    for pid in ${WORKERS[$1]}; do awk '/^VmRSS/ { printf "%.1f ", $2 / 1024 }' "/proc/$pid/status"; done
}

load() {     # $1: service, $2: seconds, $3: wrk's report
    wrk -t1 -c"$CONNECTIONS" -d"${2}s" --timeout 10s --latency -s bench/serve_mix.lua \
        "http://127.0.0.1:${PORT[$1]}" -- "$WORK/one_row.json" "$WORK/rows_32.json" "$BATCH_EVERY" > "$3"
    if grep -qE "Non-2xx|Socket errors" "$3"; then
        echo "serve_load: the $1 service refused or dropped requests:" >&2
        cat "$3" >&2
        exit 1
    fi
}

to_ms() { awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v !~ /ms$/) n *= 1000; printf "%.2f", n }'; }
requests_in() { awk '/requests in/ { print $1 }' "$1"; }
rps_in() { awk '/^Requests\/sec/ { print $2 }' "$1"; }
percentile_in() { to_ms "$(awk -v p="$2" '$1 == p { print $2 }' "$1")"; }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mean() { echo "$1" | awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.1f", s / NF }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
growth() { paste -d' ' <(echo $1 | tr ' ' '\n') <(echo $2 | tr ' ' '\n') | awk '{ printf "%.2f ", $2 - $1 }'; }
json_list() { echo $1 | tr ' ' ','; }

echo "serve_load: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); weights: $WEIGHTS_NOTE"
echo "  wrk: $CONNECTIONS connections; 1-row requests, 32 rows every ${BATCH_EVERY}th;" \
     "${WARMUP} s warm-up, then $ROUNDS rounds of $((DURATION / ROUNDS)) s each, taking turns"

start_service aicraft
"$PY" bench/serve_hostile.py "${PORT[aicraft]}" "$HOSTILE_ROUNDS" ${WORKERS[aicraft]}
stop_service aicraft

for b in aicraft torch; do
    start_service "$b"
    R[start,$b]=$(rss_mb "$b")
done
for b in aicraft torch; do
    load "$b" "$WARMUP" "$WORK/$b.warmup"
    R[warm,$b]=$(rss_mb "$b")
done
round_ratios=
for round in $(seq "$ROUNDS"); do
    for b in aicraft torch; do
        ticks=$(cpu_ticks "$b")
        load "$b" $((DURATION / ROUNDS)) "$WORK/$b.round$round"
        R[ticks,$b]=$((${R[ticks,$b]:-0} + $(cpu_ticks "$b") - ticks))
        R[rps_rounds,$b]="${R[rps_rounds,$b]:-} $(rps_in "$WORK/$b.round$round")"
        R[p50_rounds,$b]="${R[p50_rounds,$b]:-} $(percentile_in "$WORK/$b.round$round" 50%)"
        R[p99_rounds,$b]="${R[p99_rounds,$b]:-} $(percentile_in "$WORK/$b.round$round" 99%)"
        R[requests,$b]=$((${R[requests,$b]:-0} + $(requests_in "$WORK/$b.round$round")))
    done
    round_ratios="$round_ratios $(ratio "$(rps_in "$WORK/aicraft.round$round")" "$(rps_in "$WORK/torch.round$round")")"
done
for b in aicraft torch; do
    R[end,$b]=$(rss_mb "$b")
    R[rps,$b]=$(mean "${R[rps_rounds,$b]}")
    R[p50,$b]=$(echo "${R[p50_rounds,$b]}" | median)
    R[p99,$b]=$(echo "${R[p99_rounds,$b]}" | median)
    R[cpu,$b]=$(awk -v t="${R[ticks,$b]}" -v hz="$(getconf CLK_TCK)" -v n="${R[requests,$b]}" \
        'BEGIN { printf "%.3f", t * 1000 / hz / n }')
done
stop_service torch

# The aicraft service goes on until SOAK_REQUESTS since its warm-up, in
# parts of about 25,000 requests, with its workers' RSS after each.
total=${R[requests,aicraft]}
part=0
soak_trace="RSS MB/worker after the rounds ($total requests): ${R[end,aicraft]}"
while [ "$total" -lt "$SOAK_REQUESTS" ]; do
    seconds=$(awk -v left=$((SOAK_REQUESTS - total)) -v rate="${R[rps,aicraft]}" \
        'BEGIN { if (left > 25000) left = 25000; print int(left / rate * 1.05) + 1 }')
    part=$((part + 1))
    load aicraft "$seconds" "$WORK/aicraft.soak$part"
    total=$((total + $(requests_in "$WORK/aicraft.soak$part")))
    soak_trace="$soak_trace; $total: $(rss_mb aicraft)"
done
soak_end=$(rss_mb aicraft)
stop_service aicraft

throughput_ratio=$(ratio "${R[rps,aicraft]}" "${R[rps,torch]}")
median_ratio=$(echo "$round_ratios" | median)
cpu_ratio=$(ratio "${R[cpu,torch]}" "${R[cpu,aicraft]}")
rss_ratio=$(ratio "$(mean "${R[end,torch]}")" "$(mean "${R[end,aicraft]}")")
soak_growth=$(growth "${R[warm,aicraft]}" "$soak_end")

echo
printf "%-8s %8s %8s %8s %13s   %-22s %-22s %-22s\n" service "req/s" "p50 ms" "p99 ms" "CPU ms/req" \
    "RSS MB/worker: start" "after warm-up" "end of the rounds"
for b in aicraft torch; do
    printf "%-8s %8s %8s %8s %13s   %-22s %-22s %-22s\n" "$b" "${R[rps,$b]}" "${R[p50,$b]}" "${R[p99,$b]}" \
        "${R[cpu,$b]}" "${R[start,$b]}" "${R[warm,$b]}" "${R[end,$b]}"
done
echo
echo "aicraft / PyTorch: throughput x$throughput_ratio (per round:$round_ratios; median x$median_ratio);"
echo "  workers' CPU time per request 1/$cpu_ratio of PyTorch's; RSS per worker 1/$rss_ratio of PyTorch's"
echo "aicraft $soak_trace"
echo "aicraft RSS per worker after $total requests since warm-up: ${soak_end}MB" \
     "(growth since warm-up: ${soak_growth}MB)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

printf '{"bench": "serve_load", "cores": %d, "weights": "%s", "connections": %d, "batch_every": %d, "rounds": %d, "round_s": %d' \
    "$(nproc)" "$WEIGHTS_NOTE" "$CONNECTIONS" "$BATCH_EVERY" "$ROUNDS" $((DURATION / ROUNDS))
for b in aicraft torch; do
    printf ', "%s": {"rps": %s, "p50_ms": %s, "p99_ms": %s, "cpu_ms_per_request": %s, "rss_mb_start": [%s], "rss_mb_warm": [%s], "rss_mb_end": [%s]}' \
        "$b" "${R[rps,$b]}" "${R[p50,$b]}" "${R[p99,$b]}" "${R[cpu,$b]}" \
        "$(json_list "${R[start,$b]}")" "$(json_list "${R[warm,$b]}")" "$(json_list "${R[end,$b]}")"
done
printf ', "throughput_ratio": %s, "round_ratios": [%s], "cpu_ratio": %s, "rss_ratio": %s, "soak_requests": %d, "soak_rss_growth_mb": [%s]}\n' \
    "$throughput_ratio" "$(json_list "$round_ratios")" "$cpu_ratio" "$rss_ratio" "$total" "$(json_list "$soak_growth")"
