#!/usr/bin/env bash
# API fuzzing from the OpenAPI document: schemathesis against the real
# `sless-operator` (local backend, temp data dir, a free loopback port).
#
#  1. With a valid token for the namespace in every path: every phase
#     (examples, coverage, fuzzing, stateful: create → get/update/delete chains
#     inferred from the Location headers and the response schemas), checks
#     not_a_server_error, status_code_conformance, content_type_conformance,
#     response_schema_conformance. Goal: 0 failures.
#  2. Without a token, with a token for another namespace, with a token signed
#     by another key and with an unsigned (alg none) token, against every /v1 and
#     /funcs operation: only 401 (403 for the other namespace) is accepted.
#
# Budget: SLESS_API_FUZZ_SECONDS (default 75) for run 1, a quarter of it for
# each run of 2 (the whole script stays under 3 minutes by default). The
# figures (requests made, statuses) are written to build/api-fuzz/summary.txt.
# SLESS_API_FUZZ_SEED fixes the seed (to replay a failure); SLESS_API_FUZZ_NO_BUILD=1
# uses the operator binary already built (scripts/test.sh builds it first).
set -euo pipefail
source "$(dirname "$0")/lib/tools.sh"
cd "$SLESS_ROOT"
ensure_cargo
ensure_build_tools
ensure_schemathesis

budget="${SLESS_API_FUZZ_SECONDS:-75}"
deny_budget=$(( budget / 4 > 5 ? budget / 4 : 5 ))
target="${CARGO_TARGET_DIR:-$SLESS_ROOT/target}"
bin="$target/debug/sless-operator"
if [ -z "${SLESS_API_FUZZ_NO_BUILD:-}" ] || [ ! -x "$bin" ]; then
  say "cargo build -p sless-operator"
  cargo build -p sless-operator --bin sless-operator --quiet
fi

out="$SLESS_ROOT/build/api-fuzz"
rm -rf "$out"
mkdir -p "$out"
data="$(mktemp -d)"
other_key_dir="$(mktemp -d)"
op_pid=""
cleanup() {
  if [ -n "$op_pid" ] && kill -0 "$op_pid" 2>/dev/null; then
    kill -TERM "$op_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$op_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$op_pid" 2>/dev/null || true
  fi
  rm -rf "$data" "$other_key_dir"
}
trap cleanup EXIT

say "starting sless-operator (data dir $data)"
"$bin" serve --listen 127.0.0.1:0 --data-dir "$data" --isolation none \
  >"$out/operator.log" 2>&1 &
op_pid=$!
base=""
for _ in $(seq 1 300); do
  if [ -s "$data/operator.addr" ]; then
    addr="$(tr -d '[:space:]' <"$data/operator.addr")"
    if curl -fsS "http://$addr/healthz" >/dev/null 2>&1; then base="http://$addr"; break; fi
  fi
  kill -0 "$op_pid" 2>/dev/null || { cat "$out/operator.log" >&2; die "the operator exited early"; }
  sleep 0.1
done
[ -n "$base" ] || { cat "$out/operator.log" >&2; die "the operator did not come up in 30 s"; }

sub="api-fuzz"
SLESS_FUZZ_NS="sless-$(printf '%s' "$sub" | sha256sum | cut -c1-8)"
export SLESS_FUZZ_NS
token="$("$bin" token --sub "$sub" --data-dir "$data")"
other_ns_token="$("$bin" token --sub someone-else --data-dir "$data")"
# Same claims, signed with a key the operator does not have.
forged_token="$("$bin" token --sub "$sub" --data-dir "$other_key_dir")"
# The operator's own token with its header replaced by {"alg":"none"}, signature dropped.
unsigned_token="$(printf '%s' '{"alg":"none","typ":"JWT"}' | base64 -w0 | tr '+/' '-_' | tr -d '=').$(cut -d. -f2 <<<"$token")."

seed="${SLESS_API_FUZZ_SEED:-$(( (RANDOM << 15) | RANDOM ))}"
failed=0

# run_schemathesis NAME [ARGS...]: one schemathesis run, its output in $out/NAME.log.
run_schemathesis() {
  local name="$1"; shift
  say "schemathesis: $name (seed $seed)"
  local rc=0
  SCHEMATHESIS_HOOKS=api_fuzz_hooks \
  PYTHONPATH="$SCHEMATHESIS_PYTHONPATH:$SLESS_ROOT/scripts/lib" \
  SLESS_FUZZ_STATS="$out/$name.requests" SLESS_FUZZ_RUN="$name" \
    python3 -m schemathesis.cli --config-file "$SLESS_ROOT/scripts/lib/schemathesis.toml" \
      run "$base/openapi.json" --no-color --seed "$seed" \
      --generation-database none --request-timeout 15 --workers 2 \
      --suppress-health-check all "$@" >"$out/$name.log" 2>&1 || rc=$?
  tail -n 25 "$out/$name.log" >&2
  if [ "$rc" != 0 ]; then
    failed=1
    printf 'schemathesis run %s FAILED (exit %s); full output: %s\n' "$name" "$rc" "$out/$name.log" >&2
  fi
}

run_schemathesis valid-token \
  -H "Authorization: Bearer $token" \
  --max-time "$budget" \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance

deny_args=(--include-path-regex '^/(v1|funcs)(/|$)' --max-time "$deny_budget"
  --generation-with-security-parameters false --phases examples,coverage,fuzzing
  --checks not_a_server_error,only_expected_denial)
SLESS_FUZZ_EXPECT=401 run_schemathesis no-token "${deny_args[@]}"
SLESS_FUZZ_EXPECT=403 run_schemathesis other-namespace -H "Authorization: Bearer $other_ns_token" "${deny_args[@]}"
SLESS_FUZZ_EXPECT=401 run_schemathesis forged-signature -H "Authorization: Bearer $forged_token" "${deny_args[@]}"
SLESS_FUZZ_EXPECT=401 run_schemathesis unsigned-alg-none -H "Authorization: Bearer $unsigned_token" "${deny_args[@]}"

# The figures: requests per run and their statuses; 5xx counted from the
# operator's answers, whatever schemathesis decided.
{
  printf 'seed %s, budget %ss (+%ss per denial run)\n' "$seed" "$budget" "$deny_budget"
  for f in "$out"/*.requests; do
    [ -f "$f" ] || continue
    name="$(basename "$f" .requests)"
    total="$(wc -l <"$f")"
    statuses="$(awk '{print $3}' "$f" | sort | uniq -c | awk '{printf "%s×%s ", $2, $1}')"
    ops="$(awk '{print $1" "$2}' "$f" | sort -u | wc -l)"
    printf '%-18s %6s requests over %2s operations: %s\n' "$name" "$total" "$ops" "$statuses"
  done
} | tee "$out/summary.txt" >&2
if grep -h ' 5[0-9][0-9]$' "$out"/*.requests >/dev/null 2>&1; then
  printf 'the operator answered 5xx:\n' >&2
  grep -h ' 5[0-9][0-9]$' "$out"/*.requests | sort | uniq -c >&2
  failed=1
fi
if grep -qiE 'panicked' "$out/operator.log"; then
  printf 'the operator panicked:\n' >&2
  grep -iE -A3 'panicked' "$out/operator.log" >&2
  failed=1
fi
[ "$failed" = 0 ] || die "API fuzzing found failures (see $out)"
say "API fuzzing: no failures"
