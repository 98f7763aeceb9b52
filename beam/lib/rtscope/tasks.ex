defmodule RtScope.Tasks do
  @moduledoc """
  Workload `tasks` on the BEAM (study 5): memory per task and switch cost,
  for Erlang processes (`erlang_process`) and callback threads
  (`callback_thread`, `RtScope.CallbackThreads`), measured in this VM.

  ## memory

  For each task count, from the same starting point: collect garbage, take
  a snapshot, start that many tasks that each wait for a message (a process
  blocked in `receive`; a callback thread that returned `{:receive, f}`),
  wait until all of them wait, collect garbage, take a second snapshot, then
  end the tasks and check that the memory came back. One record per count:

  | column | meaning |
  | --- | --- |
  | `bytes` | primary: delta of `:erlang.memory(:total)` (everything the VM allocated: process heaps and ETS alike, so it is comparable across models) |
  | `tasks` | the task count |
  | `processes_bytes` | delta of `:erlang.memory(:processes)` (misses ETS, where callback threads live) |
  | `ets_bytes` | delta of `:erlang.memory(:ets)` |
  | `process_info_bytes` | the model's own accounting: the sum of `process_info(p, :memory)` of the task processes; for callback threads the growth of the Worker's and Receptor's `process_info` memory plus the runtime's ETS tables |
  | `rss_bytes` | delta of the OS resident set size (`/proc/self/status` VmRSS; omitted where there is no /proc). Coarse: the VM's allocators keep carriers |
  | `residual_bytes` | `:erlang.memory(:total)` after the tasks ended minus before they started: memory not given back |

  ## switch

  Two tasks of the model ping-pong a message; one round trip is two
  switches. Each record is one batch of 1,000 round trips:
  `ns_per_switch` (primary, f64) and `switches` per batch. One unrecorded
  batch warms up first. Erlang processes may sit on different schedulers;
  callback threads always share their runtime's Worker.

  ## From the command line

  `cli/1` takes the harness's argv after the workload name:
  `["memory", "--model", "callback_thread", "--counts", "1,10,100", "--output", "f.rts"]`
  or `["switch", "--model", "erlang_process", "--iterations", "100", "--output", "f.rts"]`.
  """

  alias RtScope.CallbackThreads, as: CT

  @models ~w(erlang_process callback_thread)
  @variants ~w(memory switch)
  @params %{"memory" => ["counts"], "switch" => ["iterations"]}
  @round_trips 1000
  @settle_reads 200
  # Starting or stopping tens of thousands of callback threads on a loaded
  # machine can take seconds: the runtime's interactive 5 s default is too short.
  @await_idle_ms 120_000

  @typedoc "A memory record: column name => integer value."
  @type record :: %{String.t() => integer()}

  @doc "The task models this harness measures."
  @spec models() :: [String.t()]
  def models, do: @models

  # --- command line --------------------------------------------------------------------------

  @doc """
  Run one `tasks` measurement from the harness's argv (everything after the
  workload name) and write its sample file. Returns `:ok`, or
  `{:error, message}` for bad arguments (the caller exits with status 2);
  raises if the file cannot be written (the VM exits with status 1).
  Options: `--model`, `--counts` (memory) or `--iterations` (switch),
  `--output FILE`, and `--vm-flags "FLAGS"` (flags this VM must have been
  started with; checked, as in the other workloads).

      iex> RtScope.Tasks.cli(["memory", "--model", "thread", "--output", "x.rts"])
      {:error, "unknown model \\"thread\\"; valid models: erlang_process, callback_thread"}
  """
  @spec cli([String.t()]) :: :ok | {:error, String.t()}
  def cli(argv) do
    with {:ok, variant, opts} <- parse(argv) do
      run(variant, opts)
    end
  end

  @doc false
  def parse([variant | rest]) when variant in @variants do
    with {:ok, flags} <- flags(rest, %{}),
         :ok <- known_flags(variant, flags),
         {:ok, model} <- model(flags),
         {:ok, output} <- output(flags),
         :ok <- vm_flags(flags),
         {:ok, values} <- values(variant, flags) do
      {:ok, variant, Map.merge(values, %{model: model, output: output})}
    end
  end

  def parse([variant | _]),
    do:
      {:error,
       "unknown tasks variant #{inspect(variant)}; valid variants: #{Enum.join(@variants, ", ")}"}

  def parse([]),
    do: {:error, "missing tasks variant; valid variants: #{Enum.join(@variants, ", ")}"}

  defp flags([], acc), do: {:ok, acc}

  defp flags(["--" <> name, value | rest], acc) when name != "",
    do: flags(rest, Map.put(acc, String.replace(name, "-", "_"), value))

  defp flags([arg | _], _),
    do: {:error, "unexpected argument #{inspect(arg)} (flags are --name value)"}

  defp known_flags(variant, flags) do
    valid = @params[variant] ++ ["model", "output", "vm_flags"]

    case Enum.reject(Map.keys(flags), &(&1 in valid)) do
      [] ->
        :ok

      [bad | _] ->
        {:error,
         "unknown option #{flag(bad)} for tasks #{variant}; valid: " <>
           Enum.map_join(valid, ", ", &flag/1)}
    end
  end

  defp flag(name), do: "--" <> String.replace(name, "_", "-")

  defp model(flags) do
    case flags do
      %{"model" => m} when m in @models ->
        {:ok, m}

      %{"model" => m} ->
        {:error, "unknown model #{inspect(m)}; valid models: #{Enum.join(@models, ", ")}"}

      _ ->
        {:error, "missing --model; valid models: #{Enum.join(@models, ", ")}"}
    end
  end

  defp output(flags) do
    with {:ok, path} <- fetch(flags, "output", "--output FILE") do
      case RtScope.Options.path([output: path], :output) do
        {:ok, path} -> {:ok, path}
        {:error, {:invalid, msg}} -> {:error, msg}
      end
    end
  end

  defp vm_flags(%{"vm_flags" => text}) do
    with {:ok, pairs} <- RtScope.VmFlags.parse(text), do: RtScope.VmFlags.check_in_force(pairs)
  end

  defp vm_flags(_flags), do: :ok

  defp fetch(flags, name, usage) do
    case flags do
      %{^name => v} -> {:ok, v}
      _ -> {:error, "missing #{usage}"}
    end
  end

  defp values("memory", flags) do
    with {:ok, text} <- fetch(flags, "counts", "--counts N,N,..."), do: parse_counts(text)
  end

  defp values("switch", flags) do
    with {:ok, text} <- fetch(flags, "iterations", "--iterations N") do
      case Integer.parse(text) do
        {n, ""} when n >= 1 -> {:ok, %{iterations: n}}
        _ -> {:error, "invalid --iterations #{inspect(text)}: an integer >= 1"}
      end
    end
  end

  @doc false
  def parse_counts(text) do
    parsed = for item <- String.split(text, ","), do: Integer.parse(String.trim(item))

    if parsed != [] and Enum.all?(parsed, &match?({n, ""} when n >= 1, &1)) do
      {:ok, %{counts: Enum.map(parsed, &elem(&1, 0))}}
    else
      {:error, "invalid --counts #{inspect(text)}: comma-separated integers >= 1"}
    end
  end

  defp run("memory", %{model: model, counts: counts, output: output}) do
    started = RtScope.SampleFile.now()
    records = memory(model, counts)
    columns = Enum.map(memory_columns(), fn {name, unit} -> {name, unit, :i64} end)

    columns =
      if rss_bytes() == nil,
        do: Enum.reject(columns, &(elem(&1, 0) == "rss_bytes")),
        else: columns

    rows = for r <- records, do: for({name, _, _} <- columns, do: r[name])

    unstable = Enum.count(records, &(not &1.stable))
    trailer = %{"counters" => %{"unsettled_counts" => unstable}}

    trailer =
      if unstable > 0,
        do:
          Map.put(trailer, "notes", [
            "memory did not settle (same total 3 times in a row) for #{unstable} task counts: other activity in the VM"
          ]),
        else: trailer

    write(
      output,
      "memory",
      model,
      %{"counts" => Enum.join(counts, ",")},
      started,
      columns,
      rows,
      trailer
    )
  end

  defp run("switch", %{model: model, iterations: n, output: output}) do
    started = RtScope.SampleFile.now()
    batches = switch(model, n)
    columns = [{"ns_per_switch", "ns", :f64}, {"switches", "count", :i64}]
    rows = for ns <- batches, do: [ns, 2 * @round_trips]
    counters = %{"schedulers_online" => :erlang.system_info(:schedulers_online)}

    write(output, "switch", model, %{"iterations" => n}, started, columns, rows, %{
      "counters" => counters
    })
  end

  defp write(output, variant, model, params, started, columns, rows, trailer) do
    # As the other workloads' headers (RtScope.Harness): the VM's settings and facts.
    header = [
      workload: "tasks",
      variant: variant,
      started_at: started,
      settings: Map.put(RtScope.VmInfo.settings(), :model, model),
      params: params,
      vm: RtScope.VmInfo.facts()
    ]

    trailer = Map.put(trailer, "finished_at", RtScope.SampleFile.now())

    case RtScope.SampleFile.write(output, header, columns, rows, trailer) do
      :ok -> :ok
      {:error, msg} -> raise "tasks #{variant}: #{msg}"
    end
  end

  defp memory_columns do
    [
      {"bytes", "bytes"},
      {"tasks", "count"},
      {"processes_bytes", "bytes"},
      {"ets_bytes", "bytes"},
      {"process_info_bytes", "bytes"},
      {"rss_bytes", "bytes"},
      {"residual_bytes", "bytes"}
    ]
  end

  # --- memory --------------------------------------------------------------------------------

  @doc """
  Measure the memory of `count` waiting tasks of `model`, for each count;
  one record per count (see the module doc for the columns).
  """
  @spec memory(String.t(), [pos_integer()]) :: [record()]
  def memory("erlang_process", counts) do
    # One unrecorded count first: the first measurement in a VM pays for one-time allocations.
    process_memory(1)
    Enum.map(counts, &process_memory/1)
  end

  def memory("callback_thread", counts) do
    rt = CT.new()

    try do
      callback_memory(rt, 1)
      Enum.map(counts, &callback_memory(rt, &1))
    after
      CT.stop(rt)
    end
  end

  defp process_memory(count) do
    before = settled_snapshot([])
    parent = self()
    for _ <- 1..count, do: :erlang.spawn(__MODULE__, :park, [parent])
    await_ready(count)
    later = settled_snapshot([])
    # Found after the snapshot, so the list of pids is not counted.
    pids = parked()
    own = Enum.sum(for p <- pids, do: process_memory_of(p))
    stop_all(pids)
    record(count, before, later, own, settled_snapshot([]))
  end

  @doc false
  def park(parent) do
    Kernel.send(parent, :ready)

    receive do
      :stop -> :ok
    end
  end

  defp await_ready(0), do: :ok

  defp await_ready(n) do
    receive do
      :ready -> await_ready(n - 1)
    after
      30_000 -> raise "tasks memory: #{n} processes did not start within 30 s"
    end
  end

  defp parked do
    for p <- Process.list(),
        Process.info(p, :initial_call) == {:initial_call, {__MODULE__, :park, 1}},
        do: p
  end

  defp process_memory_of(pid) do
    case Process.info(pid, :memory) do
      {:memory, bytes} -> bytes
      nil -> 0
    end
  end

  defp stop_all(pids) do
    refs = for p <- pids, do: {Process.monitor(p), Kernel.send(p, :stop)}

    for {ref, _} <- refs do
      receive do
        {:DOWN, ^ref, :process, _, _} -> :ok
      end
    end
  end

  defp callback_memory(rt, count) do
    :ok = CT.await_idle(rt, @await_idle_ms)
    runtime = runtime_pids(rt)
    before = settled_snapshot(runtime)
    own_before = runtime_memory(rt)
    first = CT.spawn(rt, &park_thread/1)
    for _ <- 2..count//1, do: CT.spawn(rt, &park_thread/1)
    :ok = CT.await_idle(rt, @await_idle_ms)
    later = settled_snapshot(runtime)
    own = runtime_memory(rt) - own_before
    %{threads: ^count} = CT.info(rt)
    # Tids are consecutive: no other thread is spawned meanwhile.
    for tid <- first..(first + count - 1), do: CT.send(rt, tid, :stop)
    :ok = CT.await_idle(rt, @await_idle_ms)
    %{threads: 0} = CT.info(rt)
    record(count, before, later, own, settled_snapshot(runtime))
  end

  defp runtime_pids(rt) do
    %{worker: worker, receptor: receptor} = CT.info(rt)
    [worker, receptor]
  end

  # A waiting callback thread: an anonymous receive callback, as in the study's examples.
  defp park_thread(_tid), do: {:receive, fn :stop -> :stopped end}

  defp runtime_memory(rt) do
    %{worker: worker, receptor: receptor, ets_bytes: ets} = CT.info(rt)
    process_memory_of(worker) + process_memory_of(receptor) + ets
  end

  # Memory readings settle after the tasks start or end (processes are freed
  # after their exit is seen, allocator caches...). As study 5 did, read
  # until the total is the same three times in a row. Before each reading
  # the garbage of this process and of `pids` (a callback-thread runtime)
  # is collected: the harness's own garbage is not the tasks' memory. (Not
  # every process's: some heaps alternate between two sizes on repeated
  # collections, and the total would never settle.) Give up after
  # @settle_reads readings.
  defp settled_snapshot(pids, last \\ nil, same \\ 0, reads \\ 0)

  defp settled_snapshot(_pids, _last, _same, @settle_reads),
    do: Map.put(snapshot(), :stable, false)

  defp settled_snapshot(pids, last, same, reads) do
    for p <- [self() | pids], do: :erlang.garbage_collect(p)
    total = :erlang.memory(:total)
    same = if total == last, do: same + 1, else: 1

    if same >= 3 do
      Map.put(snapshot(), :stable, true)
    else
      Process.sleep(1)
      settled_snapshot(pids, total, same, reads + 1)
    end
  end

  defp snapshot do
    mem = :erlang.memory([:total, :processes, :ets])
    Map.put(Map.new(mem), :rss, rss_bytes())
  end

  defp record(count, before, later, own, final) do
    %{
      "bytes" => later.total - before.total,
      "tasks" => count,
      "processes_bytes" => later.processes - before.processes,
      "ets_bytes" => later.ets - before.ets,
      "process_info_bytes" => own,
      "rss_bytes" => if(later.rss && before.rss, do: later.rss - before.rss),
      "residual_bytes" => final.total - before.total,
      stable: before.stable and later.stable and final.stable
    }
  end

  @doc "Resident set size of this OS process in bytes, or nil where /proc is not available."
  @spec rss_bytes() :: non_neg_integer() | nil
  def rss_bytes do
    with {:ok, status} <- File.read("/proc/self/status"),
         [_, kb] <- Regex.run(~r/^VmRSS:\s+(\d+) kB/m, status) do
      String.to_integer(kb) * 1024
    else
      _ -> nil
    end
  end

  # --- switch --------------------------------------------------------------------------------

  @doc """
  Ping-pong between two tasks of `model`: `batches` recorded batches of
  1,000 round trips after one warm-up batch; returns ns per switch for
  each batch.
  """
  @spec switch(String.t(), pos_integer()) :: [float()]
  def switch("erlang_process", batches) do
    parent = self()
    pong = :erlang.spawn(__MODULE__, :pong_process, [])
    ping = :erlang.spawn(fn -> ping_process(parent, pong, batches + 1) end)
    results = collect_batches(batches + 1)
    Process.exit(ping, :kill)
    Process.exit(pong, :kill)
    tl(results)
  end

  def switch("callback_thread", batches) do
    rt = CT.new()

    try do
      parent = self()
      pong = CT.spawn(rt, fn _ -> {:receive, &__MODULE__.pong_thread/2} end)
      CT.spawn(rt, fn tid -> ping_thread(tid, pong, parent, batches + 1) end)
      tl(collect_batches(batches + 1))
    after
      CT.stop(rt)
    end
  end

  defp collect_batches(n) do
    for _ <- 1..n do
      receive do
        {:batch, ns} -> ns
      after
        60_000 -> raise "tasks switch: no batch finished within 60 s"
      end
    end
  end

  @doc false
  def pong_process do
    receive do
      {:ping, from} ->
        Kernel.send(from, :pong)
        pong_process()
    end
  end

  defp ping_process(_parent, _pong, 0), do: :ok

  defp ping_process(parent, pong, batches) do
    t0 = System.monotonic_time(:nanosecond)
    ping_round(pong, @round_trips)
    Kernel.send(parent, {:batch, (System.monotonic_time(:nanosecond) - t0) / (2 * @round_trips)})
    ping_process(parent, pong, batches - 1)
  end

  defp ping_round(_pong, 0), do: :ok

  defp ping_round(pong, n) do
    Kernel.send(pong, {:ping, self()})

    receive do
      :pong -> ping_round(pong, n - 1)
    end
  end

  @doc false
  def pong_thread({:ping, from}, _tid) do
    CT.send(from, :pong)
    {:receive, &__MODULE__.pong_thread/2}
  end

  defp ping_thread(_tid, _pong, _parent, 0), do: :done

  defp ping_thread(tid, pong, parent, batches) do
    ping_batch(tid, pong, parent, batches, @round_trips, System.monotonic_time(:nanosecond))
  end

  defp ping_batch(tid, pong, parent, batches, 0, t0) do
    Kernel.send(parent, {:batch, (System.monotonic_time(:nanosecond) - t0) / (2 * @round_trips)})
    ping_thread(tid, pong, parent, batches - 1)
  end

  defp ping_batch(tid, pong, parent, batches, left, t0) do
    CT.send(pong, {:ping, tid})
    {:receive, fn :pong -> ping_batch(tid, pong, parent, batches, left - 1, t0) end}
  end
end
