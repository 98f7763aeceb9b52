#!/bin/sh
# `make bench`: cbtask dispatch timings and memory per idle task, then the
# taskmem measurements of every model (sample files in BUILD/bench/).
#   run.sh BUILD
set -eu
build=$1
out=$build/bench
mkdir -p "$out"

echo "== dispatch_bench"
"$build/dispatch_bench"

echo
echo "== taskmem memory (bytes per idle task: least-squares slope over the counts)"
for model in cbtask cbtask_receive pthread std_thread; do
    "$build/taskmem" memory --model "$model" --output "$out/memory-$model.rts" 2>&1 | grep -v '^taskmem: .* tasks: ' || true
done

echo
echo "== taskmem switch (ping-pong, both sides on one CPU)"
for model in cbtask pthread_pipe pthread_futex std_thread; do
    "$build/taskmem" switch --model "$model" --iterations 100 --output "$out/switch-$model.rts"
done
echo
echo "== taskmem switch (threads on two CPUs)"
for model in pthread_pipe pthread_futex std_thread; do
    "$build/taskmem" switch --model "$model" --pin split --iterations 30 --batch 200 --output "$out/switch-$model-split.rts" \
        || echo "(skipped: needs two CPUs)"
done
