#!/usr/bin/env bash
# Coverage-guided fuzzing of the bolero harnesses (*/tests/fuzz*.rs) with
# libFuzzer and AddressSanitizer, through `cargo bolero test`. Not part of
# scripts/test.sh (which runs the same harnesses for 3 s each under plain
# `cargo test`, replaying the committed corpora): the instrumented builds take
# minutes per crate on a 2-core machine.
#
#   bash scripts/fuzz-long.sh                 # every harness, 60 s each
#   SLESS_FUZZ_SECONDS=300 bash scripts/fuzz-long.sh sless-wire
#
# Arguments: the packages to fuzz (default: sless-wire sless-operator
# terraform-provider-sless). New inputs that reach new coverage land in
# <crate>/tests/__fuzz__/<harness>/corpus (commit them: `cargo test` replays
# them); a crash lands in .../crashes and fails the run. Figures go to
# build/fuzz-long/summary.txt; docs/reliability.md records a real run.
set -euo pipefail
source "$(dirname "$0")/lib/tools.sh"
cd "$SLESS_ROOT"
ensure_all
ensure_cargo_bolero

seconds="${SLESS_FUZZ_SECONDS:-60}"
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(sless-wire sless-operator terraform-provider-sless)

harnesses_of() {
  case "$1" in
    sless-wire) echo "wire cron_schedules_from_tokens cron_schedules_from_bytes create_function_requests create_trigger_requests create_job_requests create_service_requests" ;;
    sless-operator) echo "operator zip_entries_structured zip_bytes_mutated zip_bytes_raw local_tokens_mutated token_text_raw jwks_documents" ;;
    terraform-provider-sless) echo "provider snapshot_is_independent_of_order_mtime_and_umask" ;;
    *) die "unknown package $1 (sless-wire, sless-operator, terraform-provider-sless)" ;;
  esac
}

files_in() { # files_in DIR: how many files DIR holds (0 when missing)
  if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi
}

out="$SLESS_ROOT/build/fuzz-long"
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
failed=0
for pkg in "${packages[@]}"; do
  read -r dir names <<<"$(harnesses_of "$pkg")"
  for h in $names; do
    say "fuzzing $pkg::$h for ${seconds} s (libFuzzer + ASan)"
    log="$out/$h.log"
    crashes="$dir/tests/__fuzz__/$h/crashes"
    before=$(files_in "$crashes")
    rc=0
    cargo bolero test -p "$pkg" --rustc-bootstrap "$h" -T "${seconds}s" >"$log" 2>&1 || rc=$?
    after=$(files_in "$crashes")
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n1 || true)
    runs=$(grep -Eo '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n1 || true)
    corpus=$(files_in "$dir/tests/__fuzz__/$h/corpus")
    line="$pkg::$h rc=$rc new_crashes=$((after - before)) corpus_files=$corpus ${runs:-no run} | ${done_line:-}"
    echo "$line" | tee -a "$summary" >&2
    if [ "$rc" != 0 ] || [ "$after" != "$before" ]; then
      failed=1
      tail -n 40 "$log" >&2
    fi
  done
done
say "summary: $summary"
exit "$failed"
