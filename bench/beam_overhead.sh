#!/bin/sh
# Overhead of the rtscope BEAM harness: what an empty call measures, and what
# recording one sample costs.
#
#   bench/beam_overhead.sh [ITERATIONS] [VM_FLAGS]
#
# Runs `exec nothing` with no pause, ITERATIONS calls in all (default 100000)
# split over 10 runs, in a fresh VM started the way the Python side starts
# it, and prints:
#   - the empty call's measured time over all calls: median and p99
#     (nearest rank), ns
#   - the per-sample recording cost of each run: measuring-loop wall time per
#     iteration (trailer counter loop_ns) minus the mean measured call time,
#     i.e. clock reads, Process.info and the send to the output process;
#     median and minimum over the runs, ns (a busy machine inflates the
#     per-run means, the median of 10 runs much less so)
# Target: median empty call <= 1000 ns.
set -eu

ITERATIONS=${1:-100000}
VM_FLAGS=${2:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BEAM="$ROOT/beam"
EBIN="$BEAM/_build/prod/lib/rtscope/ebin"

(cd "$BEAM" && MIX_ENV=prod mix compile >/dev/null)

elixir --erl "$VM_FLAGS" -pa "$EBIN" -e '
[iterations] = System.argv()
runs = 10
per_run = max(div(String.to_integer(iterations), runs), 1)

results =
  for _ <- 1..runs do
    {:ok, r} = RtScope.Exec.run(:nothing, iterations: per_run, pause_ms: 0)
    d = for <<x::little-signed-64, _::binary-16 <- r.records>>, do: x
    mean = Enum.sum(d) / length(d)
    {d, r.trailer[:counters].loop_ns / length(d) - mean, r.header[:settings].vm_flags}
  end

sorted = results |> Enum.flat_map(&elem(&1, 0)) |> Enum.sort()
n = length(sorted)
rank = fn list, p -> Enum.at(list, max(ceil(p * length(list)) - 1, 0)) end
costs = results |> Enum.map(&elem(&1, 1)) |> Enum.sort()
{_, _, flags} = hd(results)
{load, 0} = System.cmd("cat", ["/proc/loadavg"])

IO.puts("rtscope BEAM harness overhead: #{n} empty calls in #{runs} runs, pause 0, " <>
          "OTP #{System.otp_release()}, Elixir #{System.version()}, vm flags #{inspect(flags)}, " <>
          "loadavg #{String.trim(load)}")
IO.puts("  empty call measured: median #{rank.(sorted, 0.5)} ns, p99 #{rank.(sorted, 0.99)} ns, " <>
          "min #{hd(sorted)} ns, max #{List.last(sorted)} ns")
IO.puts("  recording one sample: median #{round(rank.(costs, 0.5))} ns, min #{round(hd(costs))} ns " <>
          "(per run: loop time per iteration - mean measured call)")
verdict = if rank.(sorted, 0.5) <= 1000, do: "met", else: "NOT met"
IO.puts("  target median empty call <= 1000 ns: #{verdict}")
' -- "$ITERATIONS"
