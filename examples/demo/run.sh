#!/usr/bin/env bash
# make demo: random source -> embedded broker -> S3 sink -> local S3 server.
#
# Builds pico-connectors, starts versitygw (a local S3 server) from
# .tools/bin (installing it there when missing), creates the bucket, runs
# the runtime for a few seconds, stops it with SIGTERM and prints what
# landed in the bucket.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
DEMO=$ROOT/examples/demo
RUN_SECONDS=${DEMO_SECONDS:-8}
S3_PORT=${DEMO_S3_PORT:-7070}
BUCKET=pico-demo
export DEMO_S3_ACCESS=demo-access
export DEMO_S3_SECRET=demo-secret-key

if [ -t 1 ]; then
  say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
else
  say() { printf '==> %s\n' "$*"; }
fi
indent() { while IFS= read -r line; do printf '    %s\n' "$line"; done; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pico-demo.XXXXXX")
VGW_PID=""
RT_PID=""
cleanup() {
  [ -n "$RT_PID" ] && kill "$RT_PID" 2>/dev/null || true
  [ -n "$VGW_PID" ] && kill "$VGW_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

VGW=${PICO_VERSITYGW:-$ROOT/.tools/bin/versitygw}
if [ ! -x "$VGW" ]; then
  if command -v versitygw >/dev/null 2>&1; then
    VGW=$(command -v versitygw)
  else
    say "installing versitygw v1.8.0 into .tools/bin (one time, about a minute)"
    GOBIN=$ROOT/.tools/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
    VGW=$ROOT/.tools/bin/versitygw
  fi
fi

say "building pico-connectors and the demo's S3 client"
mkdir -p "$ROOT/bin"
go build -o "$ROOT/bin/pico-connectors" ./cmd/pico-connectors
go build -o "$WORK/s3demo" ./examples/demo/s3demo

for p in 9092 8081; do
  if port_busy "$p"; then
    echo "port 127.0.0.1:$p is in use (embedded broker 9092, API 8081); stop what uses it, or override with" >&2
    echo "PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS / PICOMQ_CONNECTORS_HTTP_ADDRESS" >&2
    [ -z "${PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS:-}${PICOMQ_CONNECTORS_HTTP_ADDRESS:-}" ] && exit 1
  fi
done
while port_busy "$S3_PORT"; do S3_PORT=$((S3_PORT + 1)); done
ENDPOINT=http://127.0.0.1:$S3_PORT

say "starting versitygw on $ENDPOINT (data in $WORK/s3)"
mkdir -p "$WORK/s3"
"$VGW" --access "$DEMO_S3_ACCESS" --secret "$DEMO_S3_SECRET" --port "127.0.0.1:$S3_PORT" posix "$WORK/s3" >"$WORK/versitygw.log" 2>&1 &
VGW_PID=$!
if ! "$WORK/s3demo" wait "$ENDPOINT"; then
  cat "$WORK/versitygw.log" >&2
  exit 1
fi

say "creating bucket $BUCKET"
"$WORK/s3demo" mkbucket "$ENDPOINT" "$BUCKET"

say "validating the demo config"
export PICOMQ_CONNECTORS_SINK_DEMO_S3_ENABLED=true
export PICOMQ_CONNECTORS_SINK_DEMO_S3_PLUGIN_CONFIG_ENDPOINT=$ENDPOINT
export PICOMQ_CONNECTORS_SINK_DEMO_S3_PLUGIN_CONFIG_ACCESS_KEY_ID=$DEMO_S3_ACCESS
export PICOMQ_CONNECTORS_SINK_DEMO_S3_PLUGIN_CONFIG_SECRET_ACCESS_KEY=$DEMO_S3_SECRET
"$ROOT/bin/pico-connectors" validate --config "$DEMO/runtime.toml"

say "running pico-connectors for ${RUN_SECONDS}s: random source -> embedded broker -> S3 sink"
"$ROOT/bin/pico-connectors" run --config "$DEMO/runtime.toml" > >(indent) 2>&1 &
RT_PID=$!
sleep $((RUN_SECONDS / 2))
API=${PICOMQ_CONNECTORS_HTTP_ADDRESS:-127.0.0.1:8081}
if command -v curl >/dev/null 2>&1; then
  say "live status: curl $API/sources/demo_random"
  curl -fsS "http://$API/sources/demo_random" | indent || true
  echo
  say "live status: curl $API/sinks/demo_s3"
  curl -fsS "http://$API/sinks/demo_s3" | indent || true
  echo
fi
BROKER=${PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS:-127.0.0.1:9092}
say "what the embedded broker holds (kept in examples/demo/.broker-data across runs)"
"$WORK/s3demo" topic "$BROKER" demo.numbers "$DEMO/.broker-data/embedded-password" | indent || true
sleep $((RUN_SECONDS - RUN_SECONDS / 2))

say "stopping with SIGTERM (sources finish their batch, the S3 sink flushes its files)"
kill -TERM "$RT_PID" 2>/dev/null || true
RT_STATUS=0
wait "$RT_PID" || RT_STATUS=$?
RT_PID=""
sleep 0.2
say "pico-connectors exited with status $RT_STATUS"

say "what landed in s3://$BUCKET"
"$WORK/s3demo" show "$ENDPOINT" "$BUCKET" 3
say "state checkpoint of the random source: $(cat "$DEMO/.state/demo_random.state" 2>/dev/null || echo none)"
say "done (run it again: the random source continues from its checkpoint, and the topic keeps this run's records)"
