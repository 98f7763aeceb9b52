defmodule RtScope.Interleave.Gate do
  @moduledoc """
  The arm's side of an interleaved run (`RtScope.Interleave`): what a
  measuring loop calls so that it measures only in its own blocks.

  A workload's body calls `open/1` once, before its warm-up call, and runs
  its timed calls through `blocks/4`. In an ordinary run the measuring
  process has no gate in its process dictionary: `open/1` returns `nil`
  (one `Process.get/1`), and `blocks(nil, n, acc, fun)` is `fun.(n, acc)`,
  the loop of all `n` calls as before, so nothing runs inside the loop and
  nothing is added between the clock reads.

  In an interleaved run the conductor put the gate (`install/1`) into the
  measuring process before the body starts. `open/1` then tells the
  conductor the arm is ready and waits for the first go; `blocks/4` runs
  `fun.(block, acc)` once per block and between two blocks

    1. waits until the arm's output process has taken every sample sent so
       far (`RtScope.Collector.sync/1`), so no arm's output work runs
       inside another arm's block,
    2. reports the block done to the conductor, with its start (the go)
       and end on the monotonic clock,
    3. waits for its next go.

  After the last block it syncs and reports done the same way and returns
  `{acc, waited_ns}`: the time spent from the end of a block to the next go
  (and after the last block), which the workload subtracts from its loop
  time.

  Messages (all carry the run's tag): arm → conductor `{tag, :ready, arm,
  pid}` and `{tag, :done, arm, go_ns, end_ns}`; conductor → arm `{tag,
  :go}`. The conductor ends a failed run by killing the measuring
  processes.
  """

  alias RtScope.Collector

  @key :rtscope_interleave_gate

  @typedoc "What the conductor installs: its pid, the run's tag, the arm index, the block size."
  @type t :: %{conductor: pid(), tag: reference(), arm: non_neg_integer(), block: pos_integer()}

  @typedoc "An open gate, as `blocks/4` uses it."
  @type open :: %{
          conductor: pid(),
          tag: reference(),
          arm: non_neg_integer(),
          block: pos_integer(),
          collector: pid(),
          go: integer()
        }

  @doc "The process dictionary key of the gate (tests look for it)."
  def key, do: @key

  @doc "Puts `gate` into the calling (measuring) process; called by the conductor's body wrapper."
  @spec install(t()) :: :ok
  def install(gate) do
    Process.put(@key, gate)
    :ok
  end

  @doc """
  `nil` in an ordinary run. In an interleaved one: reports the arm ready,
  waits for its first go and returns the open gate.
  """
  @spec open(pid()) :: open() | nil
  def open(collector) do
    case Process.get(@key) do
      nil ->
        nil

      gate ->
        send(gate.conductor, {gate.tag, :ready, gate.arm, self()})
        gate |> Map.put(:collector, collector) |> Map.put(:go, await_go(gate.tag))
    end
  end

  @doc """
  Runs `n` calls: `fun.(n, acc)` in an ordinary run (`gate` nil), else
  `fun.(block, acc)` once per block with the handshake between blocks (see
  the module doc). Returns `{acc, waited_ns}` (0 in an ordinary run).
  """
  @spec blocks(open() | nil, pos_integer(), acc, (pos_integer(), acc -> acc)) ::
          {acc, non_neg_integer()}
        when acc: term()
  def blocks(nil, n, acc, fun), do: {fun.(n, acc), 0}

  def blocks(%{block: b} = gate, n, acc, fun) when rem(n, b) == 0,
    do: run_blocks(gate, div(n, b), acc, fun, gate.go, 0)

  defp run_blocks(gate, left, acc, fun, go, waited) do
    acc = fun.(gate.block, acc)
    t_end = now()
    Collector.sync(gate.collector)
    send(gate.conductor, {gate.tag, :done, gate.arm, go, t_end})

    if left == 1 do
      {acc, waited + now() - t_end}
    else
      next = await_go(gate.tag)
      run_blocks(gate, left - 1, acc, fun, next, waited + next - t_end)
    end
  end

  defp await_go(tag) do
    receive do
      {^tag, :go} -> now()
    end
  end

  defp now, do: :erlang.monotonic_time(:nanosecond)
end
