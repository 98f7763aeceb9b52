#!/bin/sh
# Benchmark of rtscope's callback-thread library (beam/lib/rtscope/callback_threads):
#   - spawn throughput: threads spawned from another process (through the Receptor) and from a callback;
#   - yield and switch cost: a thread that yields, and ping-pong between two threads, beside two Erlang
#     processes (median and p99 ns per switch over 30 batches of 1,000 round trips), and the floor of any
#     Elixir-level dispatcher (the same ping-pong with a map of callbacks and a try, nothing else);
#   - memory per waiting thread against an Erlang process, in one VM run (least-squares slope of the
#     :erlang.memory(:total) delta over 1,000 .. 50,000 tasks).
#
# usage: bench/callback_threads.sh [--check]
#   --check   exit 1 if a callback thread costs more than 10% of an Erlang process (the target)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CHECK=false
case "${1:-}" in
--check) CHECK=true ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if ! command -v mix >/dev/null 2>&1; then
  echo "callback_threads: Elixir is not installed (apt-get install elixir erlang-dev); skipped"
  exit 0
fi
if [ ! -f "$ROOT/beam/mix.exs" ]; then
  echo "callback_threads: $ROOT/beam/mix.exs is missing" >&2
  exit 1
fi

SCRIPT=$(mktemp "${TMPDIR:-/tmp}/rtscope-cbt-bench-XXXXXX.exs")
trap 'rm -f "$SCRIPT"' EXIT
cat > "$SCRIPT" <<'ELIXIR'
alias RtScope.CallbackThreads, as: CT

check? = System.get_env("RTSCOPE_BENCH_CHECK") == "true"
n = 100_000

ns = fn fun ->
  t0 = System.monotonic_time(:nanosecond)
  fun.()
  System.monotonic_time(:nanosecond) - t0
end

rt = CT.new()

t = ns.(fn ->
  for _ <- 1..n, do: CT.spawn(rt, fn _ -> :ok end)
  :ok = CT.await_idle(rt, 120_000)
end)
IO.puts("spawn from another process, run, finish: #{round(n * 1.0e9 / t)} threads/s (#{round(t / n)} ns each)")

t = ns.(fn ->
  CT.spawn(rt, fn _ -> for _ <- 1..n, do: CT.spawn(fn _ -> :ok end) end)
  :ok = CT.await_idle(rt, 120_000)
end)
IO.puts("spawn from a callback, run, finish:     #{round(n * 1.0e9 / t)} threads/s (#{round(t / n)} ns each)")

defmodule YieldLoop do
  def run(0, parent), do: Kernel.send(parent, :done)
  def run(left, parent), do: {:yield, fn -> run(left - 1, parent) end}
end

parent = self()
t = ns.(fn ->
  CT.spawn(rt, fn _ -> YieldLoop.run(n, parent) end)
  receive do: (:done -> :ok)
end)
IO.puts("yield (one thread, queue of one):       #{round(t / n)} ns per yield")
CT.stop(rt)

pct = fn values, p ->
  s = Enum.sort(values)
  h = (length(s) - 1) * p / 100
  lo = Enum.at(s, floor(h))
  lo + (Enum.at(s, ceil(h)) - lo) * (h - floor(h))
end

medians =
  for model <- RtScope.Tasks.models(), into: %{} do
    b = RtScope.Tasks.switch(model, 30)
    IO.puts("switch, #{String.pad_trailing(model, 16)}        median #{round(pct.(b, 50))} ns, p99 #{round(pct.(b, 99))} ns")
    {model, pct.(b, 50)}
  end

IO.puts("switch, callback thread / Erlang process:  #{Float.round(medians["callback_thread"] / medians["erlang_process"], 2)}x (medians, this VM run; goal <= 1.0x)")

# The floor of an Elixir-level dispatcher, for comparison: the same ping-pong with the receivers'
# callbacks in a map and one try per callback; no run queue, no sequence numbers, no ETS, no Worker.
defmodule Floor do
  def send(tid, msg), do: :erlang.put(:floor_out, [{tid, msg} | :erlang.get(:floor_out)])

  def run(_waiting, 0), do: :ok

  def run(waiting, n) do
    [{tid, msg}] = :erlang.put(:floor_out, [])
    %{^tid => fun} = waiting

    try do
      fun.(msg)
    catch
      kind, reason -> {kind, reason}
    else
      {:receive, next} -> run(Map.put(waiting, tid, next), n - 1)
    end
  end

  def pong({:ping, from}) do
    Floor.send(from, :pong)
    {:receive, &pong/1}
  end

  def ping(pong, me) do
    Floor.send(pong, {:ping, me})
    {:receive, fn :pong -> ping(pong, me) end}
  end

  def batch do
    :erlang.put(:floor_out, [])
    {:receive, ping} = ping(1, 0)
    t0 = System.monotonic_time(:nanosecond)
    run(%{0 => ping, 1 => &pong/1}, 2000)
    (System.monotonic_time(:nanosecond) - t0) / 2000
  end
end

b = tl(for _ <- 0..30, do: Floor.batch())
IO.puts("switch, floor (a map of callbacks, a try; no queue, no ETS): median #{round(pct.(b, 50))} ns")

slope = fn records ->
  xs = Enum.map(records, & &1["tasks"])
  ys = Enum.map(records, & &1["bytes"])
  mx = Enum.sum(xs) / length(xs)
  my = Enum.sum(ys) / length(ys)
  sxy = Enum.zip(xs, ys) |> Enum.map(fn {x, y} -> (x - mx) * (y - my) end) |> Enum.sum()
  sxx = Enum.map(xs, fn x -> (x - mx) * (x - mx) end) |> Enum.sum()
  sxy / sxx
end

counts = [1000, 2000, 5000, 10_000, 20_000, 50_000]
[process, callback] = for model <- ["erlang_process", "callback_thread"], do: slope.(RtScope.Tasks.memory(model, counts))
ratio = callback / process
IO.puts("memory per waiting task: Erlang process #{round(process)} B, callback thread #{round(callback)} B " <>
        "(#{Float.round(100 * ratio, 1)}% of a process; target <= 10%)")

if check? and ratio > 0.10 do
  IO.puts(:stderr, "callback_threads: memory target missed")
  System.halt(1)
end
ELIXIR

cd "$ROOT/beam"
MIX_ENV=prod mix compile >/dev/null
RTSCOPE_BENCH_CHECK=$CHECK MIX_ENV=prod mix run "$SCRIPT"
