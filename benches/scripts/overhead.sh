#!/usr/bin/env bash
# What observability costs when nobody looks: the same fixed workloads (`examples/probe.rs`)
# built three ways, counted in instructions under callgrind (repeatable to a few parts per
# million whatever else the machine runs, unlike wall time on a shared 2-core VM):
#   full        the normal build: tracing instrumentation (no subscriber installed) + counters
#   tracing-off every tracing macro compiled out (tracing's `max_level_off`)
#   no-counters the hot paths' metric counters and step timing compiled out
#               (`--cfg procsched_no_counters`)
# Prints instructions per unit and the overhead of full over each baseline.
#
# Usage: benches/scripts/overhead.sh            (from the repository root; ~3 min)
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }

build() { # name, extra cargo args..., (RUSTFLAGS from the environment)
    local name=$1; shift
    CARGO_TARGET_DIR="target/overhead-$name" cargo build --quiet --release \
        -p procsched-benches --example probe "$@"
}
build full
build tracing-off --features tracing-off
RUSTFLAGS="--cfg procsched_no_counters" build no-counters

count() { # build, workload, n
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        "target/overhead-$1/release/examples/probe" "$2" "$3" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

# workload, units per run, unit name, runs per unit
workloads=(
    "single_step 40000 process"
    "many_yields 2000 yield:100"
    "async_fn_single_step 40000 process"
    "async_fn_many_yields 2000 yield:100"
)
printf '| workload | full (instr/unit) | tracing-off | no-counters | tracing overhead | counters overhead |\n'
printf '|---|---:|---:|---:|---:|---:|\n'
for spec in "${workloads[@]}"; do
    read -r workload n unit <<<"$spec"
    per=1
    if [[ $unit == *:* ]]; then per=${unit#*:}; unit=${unit%%:*}; fi
    full=$(count full "$workload" "$n")
    notrace=$(count tracing-off "$workload" "$n")
    nocount=$(count no-counters "$workload" "$n")
    awk -v w="$workload" -v n="$n" -v per="$per" -v u="$unit" \
        -v f="$full" -v t="$notrace" -v c="$nocount" 'BEGIN {
        units = n * per
        printf "| %s | %.0f /%s | %.0f | %.0f | %+.2f %% | %+.2f %% |\n",
            w, f / units, u, t / units, c / units, (f / t - 1) * 100, (f / c - 1) * 100
    }'
done
