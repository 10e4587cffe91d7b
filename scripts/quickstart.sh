#!/usr/bin/env bash
# Quick start on a fresh machine: builds the operator and the provider, starts the
# operator with its embedded local backend, points Terraform at the freshly built
# provider (dev_overrides in a CLI config under build/, never ~/.terraformrc),
# applies examples/hello-python and calls the function. The operator keeps running;
# the script ends by saying how to destroy and stop.
#
# Usage: scripts/quickstart.sh [EXAMPLE]   (default: hello-python; or hello-node)
set -euo pipefail
source "$(dirname "$0")/lib/tools.sh"
cd "$SLESS_ROOT"
example="${1:-hello-python}"
[ -d "examples/$example" ] || die "no such example: examples/$example"

ensure_all

say "building sless-operator and terraform-provider-sless"
cargo build --quiet -p sless-operator -p terraform-provider-sless

qs="$SLESS_ROOT/build/quickstart"
mkdir -p "$qs/plugins"
data_dir="$qs/data"
port="${SLESS_PORT:-8080}"

# (Re)start the operator in the background, on loopback only.
if [ -f "$qs/operator.pid" ] && kill -0 "$(cat "$qs/operator.pid")" 2>/dev/null; then
  say "stopping the operator left running by a previous quick start"
  kill "$(cat "$qs/operator.pid")" && sleep 1
fi
rm -f "$data_dir/operator.addr"
# Strict isolation (the default: every function in a bubblewrap sandbox under
# its own uid, with cgroup limits) needs root.
isolation=strict
if [ "$(id -u)" != 0 ]; then
  isolation=none
  say "not root: starting with --isolation none (your functions run unsandboxed as $(id -un)); run as root for the sandbox"
fi
say "starting sless-operator on 127.0.0.1:$port (isolation $isolation, data in $data_dir, log in $qs/operator.log)"
nohup target/debug/sless-operator serve --listen "127.0.0.1:$port" --data-dir "$data_dir" \
  --isolation "$isolation" >"$qs/operator.log" 2>&1 &
echo $! >"$qs/operator.pid"
for _ in $(seq 1 100); do
  [ -s "$data_dir/operator.addr" ] && break
  kill -0 "$(cat "$qs/operator.pid")" 2>/dev/null || { cat "$qs/operator.log" >&2; die "the operator exited; its log is above (is port $port taken? set SLESS_PORT)"; }
  sleep 0.1
done
[ -s "$data_dir/operator.addr" ] || die "the operator did not report its address within 10 s; see $qs/operator.log"
endpoint="http://$(cat "$data_dir/operator.addr")"

export SLESS_ENDPOINT="$endpoint"
SLESS_TOKEN="$(target/debug/sless-operator token --sub "${USER:-dev}@localhost" --data-dir "$data_dir")"
export SLESS_TOKEN

# Terraform uses the provider binary we just built.
ln -sf "$SLESS_ROOT/target/debug/terraform-provider-sless" "$qs/plugins/terraform-provider-sless"
cat >"$qs/terraformrc" <<TFRC
provider_installation {
  dev_overrides {
    "sless.example/sless/sless" = "$qs/plugins"
  }
  direct {}
}
TFRC
export TF_CLI_CONFIG_FILE="$qs/terraformrc" CHECKPOINT_DISABLE=1

say "terraform apply in examples/$example"
cd "examples/$example"
"$TERRAFORM" apply -auto-approve -input=false

url="$("$TERRAFORM" output -raw invoke_url)"
say "calling $url"
curl -fsS -X POST -H "Authorization: Bearer $SLESS_TOKEN" -H 'content-type: application/json' \
  -d '{"name": "quick start"}' "$url"
echo

cat <<MSG

The function is running. Try it again:
  export SLESS_TOKEN=\$($SLESS_ROOT/target/debug/sless-operator token --sub ${USER:-dev}@localhost --data-dir $data_dir)
  curl -X POST -H "Authorization: Bearer \$SLESS_TOKEN" -d '{"name": "you"}' $url

To remove it and stop the operator:
  (cd $SLESS_ROOT/examples/$example && SLESS_ENDPOINT=$endpoint SLESS_TOKEN=\$SLESS_TOKEN TF_CLI_CONFIG_FILE=$qs/terraformrc $TERRAFORM destroy -auto-approve)
  kill \$(cat $qs/operator.pid)
MSG
