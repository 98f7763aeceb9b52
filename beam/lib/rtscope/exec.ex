defmodule RtScope.Exec do
  @moduledoc """
  The `exec` workload: execution-time jitter of Elixir code (study 1).

  The calling process (eval) starts an output process and the measuring
  process (eval_loop) with the spawn options under test. The measuring
  process makes one unrecorded warm-up call, then `iterations` timed calls,
  pausing `pause_ms` between them. Each sample:

    * `duration` (ns, i64): `:erlang.monotonic_time(:nanosecond)` after the
      call minus before it
    * `heap_size` (words, i64) and `minor_gcs` (count, i64) of the measuring
      process right after the call, read with `Process.info/2` outside the
      timed region. `minor_gcs` is what the VM reports: minor collections
      since the last full sweep (it drops to 0 at each full sweep, and stays
      0 with `fullsweep_after: 0`)

  ## Example (on a device, no Python needed)

      {:ok, result} =
        RtScope.Exec.run(:sum,
          iterations: 10_000,
          pause_ms: 5,
          fullsweep_after: 0,
          priority: :high,
          output: "/data/sum.rts",
          csv: "/data/sum.csv"
        )

      result.count   #=> 10000

  ## Options

    * `:iterations` – timed calls (default 10 000, >= 1)
    * `:pause_ms` – pause between calls in ms (default 5, 0 = none)
    * `:n` – the problem size: `sum` 1..n (default 4000), `fib(n)`
      (default 20), `sleep` n ms (default 5), `dirty`: a dirty CPU call
      that returns at once, while hog processes hold every dirty CPU
      scheduler for n ms together about every 200 ms (default 10; 0 = no
      hogs), `port`: 64 KiB written to a port whose program stops reading
      for n ms about every 200 ms (default 10; 0 = it never stops), `spawn_each` and
      `spawn_recursive` n processes (default 1000: one by one from the
      measuring process, or each spawning the next; timed until the last
      one has run)
    * `:csv` – also write the study's CSV (`RtScope.Exec.CSV`)
    * `:explain` – the number of worst samples whose causes (GCs, times
      scheduled out) are recorded in the trailer's `explain` (`RtScope.Explain`;
      default 0 = none)
    * the common options of `RtScope.Options` (`:output`, spawn options,
      `:expect_vm_flags`)

  Trailer counters: `warmup_calls` (1) and `loop_ns`, the wall time of the
  whole measuring loop; `loop_ns / iterations − mean duration` is what
  recording one sample costs (clock reads, `Process.info/2`, the send to
  the output process, and the pause when there is one). In an interleaved
  arm (`RtScope.Interleave`) `loop_ns` counts only the arm's own blocks,
  not the waits between them.

  Returns `{:ok, result}` (see `RtScope.Harness.result/0`; also `:output`
  and `:csv` paths) or `{:error, {:invalid | :failed, message}}`.
  """

  alias RtScope.{Exec.CSV, Exec.Workloads, Explain, Harness, Interleave.Gate, Options, SpawnOpts}

  @variants [
    :sum,
    :fib,
    :sleep,
    :nothing,
    :dirty,
    :port,
    :spawn_each,
    :spawn_recursive,
    :nodeconnect
  ]
  @keys [:iterations, :pause_ms, :n, :csv, :explain]

  @columns [
    %{name: "duration", unit: "ns", type: "i64"},
    %{name: "heap_size", unit: "words", type: "i64"},
    %{name: "minor_gcs", unit: "count", type: "i64"}
  ]

  @doc "The workloads (variants) `run/2` accepts."
  def variants, do: @variants

  @doc "The workload-specific option names."
  def option_keys, do: @keys

  @doc "Validates and runs one exec measurement. See the module doc."
  @spec run(atom() | String.t(), keyword()) ::
          {:ok, map()} | {:error, {:invalid | :failed, String.t()}}
  def run(workload, opts \\ []) do
    with {:ok, cfg} <- validate(workload, opts),
         {:ok, result} <- Harness.run(spec(cfg)),
         :ok <- CSV.write_run(cfg.csv, result.records),
         :ok <- Harness.write(result, cfg.output) do
      {:ok, Map.merge(result, %{output: cfg.output, csv: cfg.csv})}
    end
  end

  @doc "Validates the workload name and options without measuring anything."
  @spec validate(atom() | String.t(), keyword()) ::
          {:ok, map()} | {:error, {:invalid, String.t()}}
  def validate(workload, opts) do
    with {:ok, variant} <- Options.variant(workload, "exec workload", @variants),
         :ok <- Options.check_keys(opts, "exec", @keys),
         :ok <-
           Options.only_for(opts, :n, variant, @variants -- [:nothing, :nodeconnect], "exec"),
         :ok <- distributed(variant),
         {:ok, iterations} <- Options.integer(opts, :iterations, 10_000, 1),
         {:ok, pause_ms} <- Options.integer(opts, :pause_ms, 5, 0),
         {:ok, explain} <- Options.integer(opts, :explain, 0, 0),
         {:ok, arg} <- argument(variant, opts),
         {:ok, csv} <- Options.path(opts, :csv),
         {:ok, common} <- Options.common(opts) do
      {:ok,
       Map.merge(common, %{
         variant: variant,
         iterations: iterations,
         pause_ms: pause_ms,
         explain: explain,
         arg: arg,
         csv: csv
       })}
    end
  end

  defp argument(:sum, opts), do: Options.integer(opts, :n, 4000, 1)
  defp argument(:fib, opts), do: Options.integer(opts, :n, 20, 0)
  defp argument(:sleep, opts), do: Options.integer(opts, :n, 5, 0)
  defp argument(:dirty, opts), do: Options.integer(opts, :n, 10, 0)
  defp argument(:port, opts), do: Options.integer(opts, :n, 10, 0)
  defp argument(:nothing, _opts), do: {:ok, nil}
  defp argument(:nodeconnect, _opts), do: {:ok, nil}

  defp argument(spawn, opts) when spawn in [:spawn_each, :spawn_recursive],
    do: Options.integer(opts, :n, 1000, 1)

  defp params(%{variant: v, arg: arg} = cfg) do
    base = %{iterations: cfg.iterations, pause_ms: cfg.pause_ms, warmup_calls: 1}

    if v in [:nothing, :nodeconnect], do: base, else: Map.put(base, :n, arg)
  end

  defp distributed(:nodeconnect) do
    if Node.alive?(),
      do: :ok,
      else:
        {:error,
         {:invalid,
          "exec nodeconnect needs a VM with distribution started (a BEAM node target, " <>
            "docs/nerves.md): this VM has no node name"}}
  end

  defp distributed(_variant), do: :ok

  @doc false
  # The run's `RtScope.Harness.spec/0`, for `run/2` and `RtScope.Interleave`.
  def spec(cfg) do
    variant = cfg.variant
    arg = cfg.arg
    iterations = cfg.iterations
    pause_ms = cfg.pause_ms
    explain = cfg.explain

    %{
      workload: "exec",
      variant: Atom.to_string(cfg.variant),
      columns: @columns,
      params: params(cfg),
      requested: cfg.requested,
      spawn_options: SpawnOpts.spawn_options(cfg.requested),
      body: fn collector ->
        observed = SpawnOpts.observe()
        {fun, after_call, finish} = workload(variant, arg)

        try do
          # nil in an ordinary run; an interleaved arm waits here for its first block.
          gate = Gate.open(collector)
          _warmup = fun.()
          after_call.()
          {mark, explained} = explaining(explain)
          t0 = :erlang.monotonic_time(:nanosecond)

          {:ok, waited} =
            Gate.blocks(gate, iterations, :ok, fn n, :ok ->
              loop(fun, after_call, collector, n, pause_ms, mark)
            end)

          loop_ns = :erlang.monotonic_time(:nanosecond) - t0 - waited
          info = %{process: observed, counters: %{warmup_calls: 1, loop_ns: loop_ns}, notes: []}
          if explain > 0, do: Map.put(info, :explain, explained.()), else: info
        after
          finish.()
        end
      end
    }
  end

  # What the loop calls with each sample's interval, and what returns the explained samples.
  defp explaining(0), do: {fn _t0, _t1 -> :ok end, fn -> [] end}

  defp explaining(k) do
    tracer = Explain.start(k)
    {fn t0, t1 -> Explain.sample(tracer, t0, t1) end, fn -> Explain.stop(tracer) end}
  end

  # The timed call; what follows each call, untimed; what ends the run.
  defp workload(:nodeconnect, nil) do
    peer = Workloads.start_peer()

    {fn -> Workloads.nodeconnect(peer.node) end, fn -> Workloads.disconnect_peer(peer) end,
     fn -> Workloads.stop_peer(peer) end}
  end

  defp workload(:dirty, ms) do
    hogs = Workloads.start_dirty_hogs(ms)
    {fn -> Workloads.dirty() end, fn -> :ok end, fn -> Workloads.stop_dirty_hogs(hogs) end}
  end

  defp workload(:port, ms) do
    port = Workloads.open_stalling_port(ms)
    {fn -> Workloads.port_write(port) end, fn -> :ok end, fn -> Workloads.close_port(port) end}
  end

  defp workload(variant, arg), do: {workload_fun(variant, arg), fn -> :ok end, fn -> :ok end}

  defp workload_fun(:sum, n), do: fn -> Workloads.sum(n) end
  defp workload_fun(:fib, n), do: fn -> Workloads.fib(n) end
  defp workload_fun(:sleep, ms), do: fn -> Workloads.sleep(ms) end
  defp workload_fun(:nothing, nil), do: fn -> Workloads.nothing() end
  defp workload_fun(:spawn_each, n), do: fn -> Workloads.spawn_each(n) end
  defp workload_fun(:spawn_recursive, n), do: fn -> Workloads.spawn_recursive(n) end

  # The measuring loop. Only the call sits between the two clock reads;
  # Process.info, the send to the output process and the pause come after.
  defp loop(_fun, _after_call, _collector, 0, _pause_ms, _mark), do: :ok

  defp loop(fun, after_call, collector, left, pause_ms, mark) do
    t0 = :erlang.monotonic_time(:nanosecond)
    fun.()
    t1 = :erlang.monotonic_time(:nanosecond)
    mark.(t0, t1)

    [heap_size: heap, garbage_collection: gc] =
      :erlang.process_info(self(), [:heap_size, :garbage_collection])

    {:minor_gcs, minor} = :lists.keyfind(:minor_gcs, 1, gc)
    send(collector, {:s, t1 - t0, heap, minor})
    after_call.()
    if pause_ms > 0, do: :timer.sleep(pause_ms)
    loop(fun, after_call, collector, left - 1, pause_ms, mark)
  end
end
