#!/usr/bin/env bash
# serve_load.sh - the MNIST MLP served over the Open Inference Protocol v2 under
# gunicorn, loaded with wrk: aicraft against PyTorch and ONNX Runtime.
#
#   bench/serve_load.sh                        # 60 s of load per service and request
#   DURATION=6 ROUNDS=2 WARMUP=3 SOAK_REQUESTS=20000 HOSTILE_ROUNDS=1 \
#       bench/serve_load.sh                    # a quick look (about 3 minutes)
#
# Three services run the same WSGI code (aicraft.serve.make_app) over the same
# model, a 784-128-10 MLP with a softmax, and the same weights: on aicraft, on
# PyTorch and on ONNX Runtime (the MLP as an ONNX graph), bench/serve_backends.py's
# Servables. Each runs as `python -m aicraft.serve` would: gunicorn --preload, 2
# workers of 4 threads, one compute thread (AC_NUM_THREADS=1; torch and ONNX
# Runtime set to 1). wrk drives them from another process over loopback with
# bench/serve_mix.lua, on CONNECTIONS connections, with four requests of
# bench/serve_requests.py: 1 and 32 rows, JSON tensors and binary tensors
# (POST /v2/models/mnist_mlp/infer). First the three must give the same
# probabilities for each (within 1e-5); then, after a warm-up, they take turns,
# ROUNDS rounds of DURATION/ROUNDS seconds per request kind and service, so that a
# machine whose load drifts slows all alike (this shared host's cores run at about
# half speed for stretches of several seconds: 20 rounds of 3 s, and the medians of
# the per-round ratios, keep a stretch from landing on one service). Reported per
# service and request:
# requests/s, the median over rounds of p50 and p99 latency, the CPU time its
# workers spent per request; per service, each worker's RSS (and PSS: its share of
# the pages it shares with the master and the other worker) after start-up, after
# the warm-up and at the end; then the medians of the per-round ratios.
#
# Batching: the aicraft service against one that joins concurrent requests
# (make_app(max_batch_size=32, max_queue_delay_s=0)), in turns: 32 connections
# sending one row each in binary (throughput), and one connection (latency).
#
# Soak: the requests the aicraft service answered since its warm-up (in every round
# above) are counted; it takes a mix of all four requests until SOAK_REQUESTS
# (100,000) is reached, in parts of about 25,000, and its workers' RSS is read after
# each part and compared with the RSS after the warm-up.
#
# Before all that, bench/serve_profile.py shows where a request's CPU time goes in
# process (the app, the model) and what each runtime adds to a worker's RSS; and the
# demo service (demos/serve.py, which `make serve` runs) takes HOSTILE_ROUNDS rounds
# of bench/serve_hostile.py's mix (1,300 valid and bad requests a round, each checked
# for its status), with its workers' RSS after each round.
#
# Weights: $AICRAFT_WEIGHTS, else data/mnist_mlp.safetensors (python
# demos/mnist_mlp.py writes it), else a randomly initialised model: speed and
# memory do not depend on the values. bench/serve_report.py prints the tables and
# the JSON line.
#
# Needs wrk (Debian: apt-get install wrk), curl, and in the venv gunicorn, orjson,
# torch==2.13.0, onnx, onnxruntime and tritonclient[http] (it writes the binary bodies).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
DURATION=${DURATION:-60}
ROUNDS=${ROUNDS:-20}
WARMUP=${WARMUP:-20}
CONNECTIONS=${CONNECTIONS:-8}
SOAK_REQUESTS=${SOAK_REQUESTS:-100000}
HOSTILE_ROUNDS=${HOSTILE_ROUNDS:-4}
BASE=${PORT:-8731}
declare -A PORT=([demo]=$BASE [aicraft]=$((BASE + 1)) [torch]=$((BASE + 2)) [onnxruntime]=$((BASE + 3))
                 [batched]=$((BASE + 4)))
SERVICES="aicraft torch onnxruntime"
REQUESTS="json_1 binary_1 json_32 binary_32"
ROUND_S=$((DURATION / ROUNDS))

missing() { echo "serve_load: $1 is missing; $2" >&2; exit 1; }
command -v wrk >/dev/null || missing wrk "apt-get install -y wrk"
command -v curl >/dev/null || missing curl "apt-get install -y curl"
for module in gunicorn orjson torch onnx onnxruntime tritonclient.http; do
    "$PY" -c "import $module" 2>/dev/null || missing "$module" "see tests/requirements.txt"
done
[ "$ROUND_S" -ge 1 ] || missing "a round of a second or more" "DURATION must be at least ROUNDS"

WORK=$(mktemp -d)
RECORDS=$WORK/records
declare -A MASTER WORKERS
trap 'for s in demo $SERVICES batched; do stop_service $s; done; rm -rf "$WORK"' EXIT

WEIGHTS=${AICRAFT_WEIGHTS:-data/mnist_mlp.safetensors}
WEIGHTS_NOTE=$WEIGHTS
if [ ! -f "$WEIGHTS" ]; then
    WEIGHTS=$WORK/random_mlp.safetensors
    WEIGHTS_NOTE="random weights ($WEIGHTS_NOTE not found)"
    "$PY" - "$WEIGHTS" <<'EOF'
import sys
sys.path.insert(0, "bench")
import aicraft as ac
from serve_backends import random_weights
ac.save(random_weights(), sys.argv[1])
EOF
fi
"$PY" bench/serve_requests.py write "$WORK"

start_service() {   # $1: demo, batched or one of SERVICES
    local s=$1 url=http://127.0.0.1:${PORT[$1]} health=/v2/health/ready
    local app="bench.serve_backends:app_from_env()" conf=python:aicraft.serve.gunicorn_conf backend=$1 batch=1
    case $s in
        demo) app=demos.serve:app conf=demos/gunicorn_conf.py backend=aicraft health=/healthz ;;
        batched) backend=aicraft batch=32 ;;
    esac
    SERVE_BACKEND=$backend SERVE_MAX_BATCH_SIZE=$batch AICRAFT_WEIGHTS=$WEIGHTS AC_NUM_THREADS=1 \
        "$PY" -m gunicorn -c "$conf" --no-control-socket --preload -w 2 --threads 4 \
        -b "127.0.0.1:${PORT[$s]}" "$app" > "$WORK/$s.log" 2>&1 &
    MASTER[$s]=$!
    for _ in $(seq 600); do
        if ! kill -0 "${MASTER[$s]}" 2>/dev/null; then
            cat "$WORK/$s.log" >&2
            missing "a running $s service" "see its log above"
        fi
        if [ "$(pgrep -P "${MASTER[$s]}" | wc -l)" -eq 2 ] && curl -sf "$url$health" >/dev/null; then
            WORKERS[$s]=$(pgrep -P "${MASTER[$s]}" | sort -n | tr '\n' ' ')
            return
        fi
        sleep 0.1
    done
    missing "an answer from the $s service within 60 s" "see $WORK/$s.log"
}

# SIGINT to the master alone: gunicorn stops its workers itself.
stop_service() {
    local s=$1
    [ -n "${MASTER[$s]:-}" ] || return 0
    kill -INT "${MASTER[$s]}" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "${MASTER[$s]}" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "${MASTER[$s]}" ${WORKERS[$s]:-} 2>/dev/null || true
    wait "${MASTER[$s]}" 2>/dev/null || true
    MASTER[$s]=
}

cpu_ticks() { # $1: service; CPU time its workers have used, in clock ticks
    for pid in ${WORKERS[$1]}; do sed 's/.*) //' "/proc/$pid/stat"; done | awk '{ s += $12 + $13 } END { print s }'
}

rss_mb() {   # $1: service; each worker's resident memory, MB
    for pid in ${WORKERS[$1]}; do awk '/^VmRSS/ { printf "%.1f ", $2 / 1024 }' "/proc/$pid/status"; done
}

pss_mb() {   # $1: service; each worker's proportional set size, MB (shared pages split among their users)
    for pid in ${WORKERS[$1]}; do awk '/^Pss:/ { printf "%.1f ", $2 / 1024 }' "/proc/$pid/smaps_rollup"; done
}

record_rss() {   # $1: service, $2: when
    echo "rss $1 $2 $(rss_mb "$1")" >> "$RECORDS"
    echo "pss $1 $2 $(pss_mb "$1")" >> "$RECORDS"
}

# $1: service, $2: seconds, $3: connections, $4: wrk's report, then the request
# files to send in turn. Records the load's CPU ticks and report under the name
# $4 ends with (service.kind.round).
load() {
    local s=$1 seconds=$2 connections=$3 report=$4 ticks
    shift 4
    ticks=$(cpu_ticks "$s")
    wrk -t1 -c"$connections" -d"${seconds}s" --timeout 10s --latency -s bench/serve_mix.lua \
        "http://127.0.0.1:${PORT[$s]}" -- "$@" > "$report"
    echo "load $(basename "$report") $(($(cpu_ticks "$s") - ticks)) $report" >> "$RECORDS"
    if grep -qE "Non-2xx|Socket errors" "$report"; then
        echo "serve_load: the $s service refused or dropped requests:" >&2
        cat "$report" >&2
        exit 1
    fi
}

requests_in() { awk '/requests in/ { print $1 }' "$1"; }
files() { for r in "$@"; do printf '%s ' "$WORK/$r.http"; done; }
MIX=$(files json_1 binary_1 json_1 binary_1 json_1 binary_1 json_32 binary_32)

{
    echo "meta cpu $("$PY" -c 'import sys; sys.path.insert(0, "bench"); import common; print(common.host_line())')"
    echo "meta versions $("$PY" -c 'import torch, onnxruntime as ort
print("PyTorch %s, ONNX Runtime %s" % (torch.__version__, ort.__version__))')"
    echo "meta cores $(nproc)"
    echo "meta load_start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "meta weights $WEIGHTS_NOTE"
    echo "meta settings $CONNECTIONS connections, ${WARMUP} s warm-up," \
         "$ROUNDS rounds of $ROUND_S s per service and request, taking turns"
} > "$RECORDS"
sed 's/^meta [a-z_]* //' "$RECORDS"

"$PY" bench/serve_profile.py | tee "$WORK/profile"
echo "profile $(tail -1 "$WORK/profile")" >> "$RECORDS"

start_service demo
"$PY" bench/serve_hostile.py "${PORT[demo]}" "$HOSTILE_ROUNDS" ${WORKERS[demo]} | tee "$WORK/hostile"
stop_service demo
sed 's/^/hostile /' "$WORK/hostile" >> "$RECORDS"

for s in $SERVICES; do
    start_service "$s"
    record_rss "$s" start
done
"$PY" bench/serve_requests.py check "${PORT[aicraft]}" "${PORT[torch]}" "${PORT[onnxruntime]}"
for s in $SERVICES; do
    load "$s" "$WARMUP" "$CONNECTIONS" "$WORK/$s.mix.warmup" $MIX
    record_rss "$s" warm
done
for round in $(seq "$ROUNDS"); do
    for r in $REQUESTS; do
        for s in $SERVICES; do
            load "$s" "$ROUND_S" "$CONNECTIONS" "$WORK/$s.$r.$round" "$WORK/$r.http"
        done
    done
    echo "  round $round of $ROUNDS done"
done
for s in $SERVICES; do record_rss "$s" end; done
stop_service torch
stop_service onnxruntime

start_service batched
load batched "$WARMUP" 32 "$WORK/batched.mix.warmup" $MIX
for round in $(seq "$ROUNDS"); do
    for s in aicraft batched; do
        load "$s" "$ROUND_S" 32 "$WORK/$s.binary_1_x32.$round" "$WORK/binary_1.http"
        load "$s" "$ROUND_S" 1 "$WORK/$s.binary_1_x1.$round" "$WORK/binary_1.http"
    done
done
stop_service batched

# The aicraft service goes on until SOAK_REQUESTS since its warm-up, in
# parts of about 25,000 requests, with its workers' RSS after each.
total=0
for report in "$WORK"/aicraft.*.[0-9]*; do total=$((total + $(requests_in "$report"))); done
echo "soak $total $(rss_mb aicraft)" >> "$RECORDS"
part=0
while [ "$total" -lt "$SOAK_REQUESTS" ]; do
    rate=$(requests_in "$WORK/aicraft.mix.warmup")
    seconds=$(awk -v left=$((SOAK_REQUESTS - total)) -v rate="$rate" -v warmup="$WARMUP" \
        'BEGIN { if (left > 25000) left = 25000; print int(left / (rate / warmup) * 1.05) + 1 }')
    part=$((part + 1))
    load aicraft "$seconds" "$CONNECTIONS" "$WORK/aicraft.mix.soak$part" $MIX
    total=$((total + $(requests_in "$WORK/aicraft.mix.soak$part")))
    echo "soak $total $(rss_mb aicraft)" >> "$RECORDS"
done
stop_service aicraft
echo "meta load_end $(cut -d' ' -f1-3 /proc/loadavg)" >> "$RECORDS"

echo
"$PY" bench/serve_report.py "$RECORDS"
