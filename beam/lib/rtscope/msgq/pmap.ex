defmodule RtScope.MsgQ.Pmap do
  @moduledoc """
  `msgq pmap`: study 3's parallel map, with the receiving process's message
  queue `on_heap` or `off_heap`.

  Each pmap call (iteration) spawns a fresh receiver process (with the spawn options
  under test, except `message_queue_data`), which sets
  `Process.flag(:message_queue_data, mqd)` as the study did and runs

      list |> Enum.map(&Task.async(fn -> f.(&1) end)) |> Enum.map(&Task.await(&1, :infinity))

  with `f = fn i -> [i, i * i] end` over `1..elements`. (The study used
  `Task.await/1`, whose 5 s timeout only turns a slow board's run into a
  crash; the work is the same.) One unrecorded warm-up call comes first.
  Samples, one per call:

    * `duration` (ns): wall time of the pmap in the receiver (monotonic
      clock), less the time of the mid-way memory reading below
    * `memory_delta` (bytes): `:erlang.memory(:total)` when the pmap is
      done (the result list still alive) minus before it started; whole-VM
      memory, so other activity counts too
    * `receiver_memory` (bytes): the receiver's `Process.info(:memory)`
      (heap, stack, queued messages, internal structures), the larger of
      two readings: right after all tasks were spawned (replies queued,
      none taken yet) and after all replies were taken. Not a continuous
      peak: reading it more often would disturb what is measured.
    * `queue_len` (count): the receiver's `message_queue_len` right after
      all tasks were spawned
    * `minor_gcs`, `major_gcs` (count): collections of the receiver during
      the pmap (`RtScope.GcCounter`)
  """

  alias RtScope.{GcCounter, Interleave.Gate, Options, SpawnOpts}

  @keys [:elements, :iterations]

  @columns [
    %{name: "duration", unit: "ns", type: "i64"},
    %{name: "memory_delta", unit: "bytes", type: "i64"},
    %{name: "receiver_memory", unit: "bytes", type: "i64"},
    %{name: "queue_len", unit: "count", type: "i64"},
    %{name: "minor_gcs", unit: "count", type: "i64"},
    %{name: "major_gcs", unit: "count", type: "i64"}
  ]

  @doc "The option names of this variant."
  def option_keys, do: @keys

  @doc false
  def validate(opts) do
    with {:ok, elements} <- Options.integer(opts, :elements, 10_000, 1),
         {:ok, iterations} <- Options.integer(opts, :iterations, 10, 1) do
      {:ok, %{elements: elements, iterations: iterations}}
    end
  end

  @doc false
  def spec(cfg) do
    mqd = Map.get(cfg.requested, :message_queue_data, :on_heap)
    receiver_opts = cfg.requested |> Map.delete(:message_queue_data) |> SpawnOpts.spawn_options()
    %{elements: elements, iterations: iterations} = cfg

    %{
      workload: "msgq",
      variant: "pmap",
      columns: @columns,
      params: %{elements: elements, iterations: iterations, warmup_iterations: 1},
      requested: Map.put(cfg.requested, :message_queue_data, mqd),
      # The driver only spawns receivers; the options under test go to them.
      spawn_options: [],
      body: fn collector -> drive(collector, elements, iterations, mqd, receiver_opts) end
    }
  end

  defp drive(collector, elements, iterations, mqd, receiver_opts) do
    # nil in an ordinary run; an interleaved arm waits here for its first block.
    gate = Gate.open(collector)
    {_, observed} = call(elements, mqd, receiver_opts)

    {{max_q, max_mem}, _waited} =
      Gate.blocks(gate, iterations, {0, 0}, fn calls, acc ->
        Enum.reduce(1..calls, acc, fn _, {max_q, max_mem} ->
          {{d, md, rm, q, minor, major}, _} = call(elements, mqd, receiver_opts)
          send(collector, {:s, d, md, rm, q, minor, major})
          {max(max_q, q), max(max_mem, rm)}
        end)
      end)

    %{
      process: observed,
      counters: %{warmup_iterations: 1, max_queue_len: max_q, max_receiver_memory: max_mem},
      notes: []
    }
  end

  defp call(elements, mqd, receiver_opts) do
    parent = self()
    tag = make_ref()

    {pid, mref} =
      :erlang.spawn_opt(
        fn ->
          Process.flag(:message_queue_data, mqd)
          send(parent, {tag, measure(elements), SpawnOpts.observe()})
        end,
        [:monitor | receiver_opts]
      )

    receive do
      {^tag, sample, observed} ->
        Process.demonitor(mref, [:flush])
        {sample, observed}

      {:DOWN, ^mref, :process, ^pid, reason} ->
        exit({:receiver_died, reason})
    end
  end

  defp measure(elements) do
    f = fn i -> [i, i * i] end
    list = Enum.to_list(1..elements)
    gc = GcCounter.start_self()
    total0 = :erlang.memory(:total)
    t0 = :erlang.monotonic_time(:nanosecond)
    tasks = Enum.map(list, fn i -> Task.async(fn -> f.(i) end) end)
    t1 = :erlang.monotonic_time(:nanosecond)
    # Reading the memory walks the queue: its time is left out of duration.
    [memory: mem_spawned, message_queue_len: queue_len] =
      Process.info(self(), [:memory, :message_queue_len])

    t2 = :erlang.monotonic_time(:nanosecond)
    results = Enum.map(tasks, &Task.await(&1, :infinity))
    t3 = :erlang.monotonic_time(:nanosecond)
    total1 = :erlang.memory(:total)
    {:memory, mem_done} = Process.info(self(), :memory)
    %{minor: minor, major: major} = GcCounter.stop_self(gc)
    # Keep the results alive up to the readings above.
    ^elements = length(results)
    {t1 - t0 + (t3 - t2), total1 - total0, max(mem_spawned, mem_done), queue_len, minor, major}
  end
end
