#!/usr/bin/env bash
# The process benchmark three times in a row (the machine is noisy: one run proves little), each
# run's report kept as target/bench-process-run{1,2,3}.md, then one table: per workload, the
# ratio to the best peer in each run and their median, and procsched's time per unit.
#
# Usage: benches/scripts/three_runs.sh [extra args for the bench, e.g. --quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
for run in 1 2 3; do
    echo "run $run of 3" >&2
    cargo bench --quiet -p procsched-benches --bench process -- "$@" >&2
    cp target/bench-process.md "target/bench-process-run$run.md"
done
# Rows of the main table: | workload | procsched | native | actors | vs native | vs actors |
# **vs best** | procsched per unit | best per unit |; rows of the async-fn table: | workload |
# state machine | async fn | per unit | vs state machine | vs native | vs actors |.
awk -F' *\\| *' '
    FNR == 1 { run++; table = "" }
    /^\| workload \| procsched \|.*vs best peer/ { table = "main"; next }
    /^\| workload \| state machine \|/ { table = "async"; next }
    /^\|---/ { next }
    !/^\|/ { table = ""; next }
    table == "main" {
        gsub(/\*/, "", $8)
        key = $2; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
        ratio[key, run] = $8; unit[key, run] = $9
    }
    table == "async" {
        key = $2 " (async fn vs state machine)"
        if (!(key in aseen)) { aseen[key] = 1; aorder[an++] = key }
        ratio[key, run] = $6; unit[key, run] = $5
        akey = $2 " (async fn vs actors)"
        ratio[akey, run] = $8
    }
    function median(a, b, c) {
        if ((a <= b && b <= c) || (c <= b && b <= a)) return b
        if ((b <= a && a <= c) || (c <= a && a <= b)) return a
        return c
    }
    END {
        print "| workload | run 1 | run 2 | run 3 | median | procsched per unit (runs 1, 2, 3) |"
        print "|---|---:|---:|---:|---:|---|"
        for (i = 0; i < n; i++) {
            k = order[i]
            printf "| %s | %s | %s | %s | **%.2f** | %s; %s; %s |\n", k, ratio[k,1], ratio[k,2], ratio[k,3],
                median(ratio[k,1] + 0, ratio[k,2] + 0, ratio[k,3] + 0), unit[k,1], unit[k,2], unit[k,3]
        }
        for (i = 0; i < an; i++) {
            k = aorder[i]
            printf "| %s | %s | %s | %s | **%.2f** | %s; %s; %s |\n", k, ratio[k,1], ratio[k,2], ratio[k,3],
                median(ratio[k,1] + 0, ratio[k,2] + 0, ratio[k,3] + 0), unit[k,1], unit[k,2], unit[k,3]
            sub(/ \(async fn vs state machine\)/, " (async fn vs actors)", k)
            printf "| %s | %s | %s | %s | **%.2f** | |\n", k, ratio[k,1], ratio[k,2], ratio[k,3],
                median(ratio[k,1] + 0, ratio[k,2] + 0, ratio[k,3] + 0)
        }
    }
' target/bench-process-run1.md target/bench-process-run2.md target/bench-process-run3.md
