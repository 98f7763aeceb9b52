defmodule RtScope.Gpio do
  @moduledoc """
  The `gpio` workload: GPIO latency from the BEAM, as nerves_rt_perf
  measured it with Circuits.GPIO on a Raspberry Pi 3 (study 1). The line is
  driven through `rtprobe gpio port` (`RtScope.Gpio.Line`, docs/gpio.md).

  Variants, each with `heap_size` and `minor_gcs` of the measuring process
  after each call (outside the timed region), like `exec`:

    * `write` – per iteration, set 1 then 0, each timed: columns `write_1`,
      `write_0` (ns). `--csv` writes nerves_rt_perf's
      `count,time_for_write_1,time_for_write_0,heap_size,minor_gcs` (µs)
    * `genserver_write` – the same through a `GenServer.call` to a server
      that owns the line (`RtScope.Gpio.Server`)
    * `read` – one read per iteration, timed: columns `duration` (ns),
      `value`
    * `blink` – an LED loop on an absolute schedule: 1 at the start of
      each `period_ms`, 0 at its middle; columns `period` (ns between
      consecutive rising edges) and `lateness` (ns after the deadline)

  Options: `:rtprobe` (path of the port program, required), `:chip`
  (default "/dev/gpiochip0"), `:line` (0), `:iterations` (1000),
  `:pause_ms` (1; not for blink), `:period_ms` (10; blink only), `:csv`
  (write variants), and the common options of `RtScope.Options`.
  """

  alias RtScope.{Exec.CSV, Gpio.Line, Gpio.Server, Harness, Options, SpawnOpts}

  @variants [:write, :read, :blink, :genserver_write]
  @keys [:rtprobe, :chip, :line, :iterations, :pause_ms, :period_ms, :csv]
  @gc [
    %{name: "heap_size", unit: "words", type: "i64"},
    %{name: "minor_gcs", unit: "count", type: "i64"}
  ]
  @writes [
    %{name: "write_1", unit: "ns", type: "i64"},
    %{name: "write_0", unit: "ns", type: "i64"}
  ]

  # nerves_rt_perf's GPIO CSV
  @csv ["time_for_write_1", "time_for_write_0", "heap_size", "minor_gcs"]

  @doc "The variants `run/2` accepts."
  def variants, do: @variants

  @doc "Validates and runs one gpio measurement; see the module doc."
  @spec run(atom() | String.t(), keyword()) ::
          {:ok, map()} | {:error, {:invalid | :failed, String.t()}}
  def run(variant, opts \\ []) do
    with {:ok, cfg} <- validate(variant, opts),
         :ok <- line_available(cfg),
         {:ok, result} <- Harness.run(spec(cfg)),
         :ok <- CSV.write_run(cfg.csv, result.records, @csv, 2),
         :ok <- Harness.write(result, cfg.output) do
      {:ok, Map.merge(result, %{output: cfg.output, csv: cfg.csv})}
    end
  end

  defp validate(variant, opts) do
    with {:ok, v} <- Options.variant(variant, "gpio variant", @variants),
         :ok <- Options.check_keys(opts, "gpio", @keys),
         :ok <- Options.only_for(opts, :pause_ms, v, @variants -- [:blink], "gpio"),
         :ok <- Options.only_for(opts, :period_ms, v, [:blink], "gpio"),
         :ok <- Options.only_for(opts, :csv, v, [:write, :genserver_write], "gpio"),
         {:ok, rtprobe} <- rtprobe(opts),
         {:ok, line} <- Options.integer(opts, :line, 0, 0),
         {:ok, iterations} <- Options.integer(opts, :iterations, 1000, 1),
         {:ok, pause_ms} <- Options.integer(opts, :pause_ms, 1, 0),
         {:ok, period_ms} <- Options.integer(opts, :period_ms, 10, 2),
         {:ok, csv} <- Options.path(opts, :csv),
         {:ok, common} <- Options.common(opts) do
      {:ok,
       Map.merge(common, %{
         variant: v,
         rtprobe: rtprobe,
         chip: Keyword.get(opts, :chip, "/dev/gpiochip0"),
         line: line,
         iterations: iterations,
         pause_ms: pause_ms,
         period_ms: period_ms,
         csv: csv
       })}
    end
  end

  defp rtprobe(opts) do
    case Keyword.get(opts, :rtprobe) do
      p when is_binary(p) and p != "" ->
        {:ok, p}

      _ ->
        {:error,
         {:invalid, "missing rtprobe: the path of the GPIO port program (rtprobe gpio port)"}}
    end
  end

  # A missing chip or line, a busy line, no permission: said before anything is measured.
  defp line_available(cfg) do
    case Line.open(cfg.rtprobe, cfg.chip, cfg.line) do
      {:ok, port} -> Line.close(port)
      {:error, why} -> {:error, {:failed, why}}
    end
  end

  defp params(cfg) do
    base = %{chip: cfg.chip, line: cfg.line, iterations: cfg.iterations}

    if cfg.variant == :blink,
      do: Map.put(base, :period_ms, cfg.period_ms),
      else: Map.put(base, :pause_ms, cfg.pause_ms)
  end

  defp columns(:read),
    do: [
      %{name: "duration", unit: "ns", type: "i64"},
      %{name: "value", unit: "", type: "i64"} | @gc
    ]

  defp columns(:blink),
    do: [
      %{name: "period", unit: "ns", type: "i64"},
      %{name: "lateness", unit: "ns", type: "i64"} | @gc
    ]

  defp columns(_write), do: @writes ++ @gc

  defp spec(cfg) do
    %{
      workload: "gpio",
      variant: Atom.to_string(cfg.variant),
      columns: columns(cfg.variant),
      params: params(cfg),
      requested: cfg.requested,
      spawn_options: SpawnOpts.spawn_options(cfg.requested),
      body: fn collector ->
        observed = SpawnOpts.observe()
        {set, get, close} = open(cfg)

        try do
          case cfg.variant do
            :blink ->
              blink(set, collector, cfg.iterations, cfg.period_ms)

            :read ->
              loop(fn -> timed_read(get) end, collector, cfg.iterations, cfg.pause_ms, true)

            _write ->
              loop(fn -> timed_write(set) end, collector, cfg.iterations, cfg.pause_ms, true)
          end
        after
          close.()
        end

        %{process: observed, counters: %{warmup_calls: 1}, notes: []}
      end
    }
  end

  # {set(value), get(), close()} on the line, directly or through the GenServer.
  defp open(%{variant: :genserver_write} = cfg) do
    {:ok, server} = Server.start_link(cfg.rtprobe, cfg.chip, cfg.line)
    {&Server.write(server, &1), fn -> raise "not read" end, fn -> Server.stop(server) end}
  end

  defp open(cfg) do
    {:ok, port} = Line.open(cfg.rtprobe, cfg.chip, cfg.line)
    {&Line.set(port, &1), fn -> Line.get(port) end, fn -> Line.close(port) end}
  end

  # The first pass is the warm-up, not recorded.
  defp loop(_measure, _collector, 0, _pause_ms, false), do: :ok

  defp loop(measure, collector, left, pause_ms, warmup) do
    {a, b} = measure.()
    {heap, minor} = gc_state()
    unless warmup, do: send(collector, {:s, a, b, heap, minor})
    if pause_ms > 0, do: :timer.sleep(pause_ms)
    loop(measure, collector, if(warmup, do: left, else: left - 1), pause_ms, false)
  end

  defp gc_state do
    [heap_size: heap, garbage_collection: gc] =
      :erlang.process_info(self(), [:heap_size, :garbage_collection])

    {:minor_gcs, minor} = :lists.keyfind(:minor_gcs, 1, gc)
    {heap, minor}
  end

  # {duration ns, value}
  defp timed_read(get) do
    t0 = :erlang.monotonic_time(:nanosecond)
    value = get.()
    {:erlang.monotonic_time(:nanosecond) - t0, value}
  end

  # {write_1 ns, write_0 ns}
  defp timed_write(set) do
    t0 = :erlang.monotonic_time(:nanosecond)
    :ok = set.(1)
    t1 = :erlang.monotonic_time(:nanosecond)
    :ok = set.(0)
    {t1 - t0, :erlang.monotonic_time(:nanosecond) - t1}
  end

  # The first rising edge has no period before it: not recorded.
  defp blink(set, collector, iterations, period_ms) do
    period = period_ms * 1_000_000
    start = :erlang.monotonic_time(:nanosecond)
    blink(set, collector, iterations, period, start + period, nil)
  end

  defp blink(_set, _collector, 0, _period, _deadline, _previous), do: :ok

  defp blink(set, collector, left, period, deadline, previous) do
    sleep_until(deadline)
    :ok = set.(1)
    rise = :erlang.monotonic_time(:nanosecond)
    {heap, minor} = gc_state()
    if previous, do: send(collector, {:s, rise - previous, rise - deadline, heap, minor})
    sleep_until(deadline + div(period, 2))
    :ok = set.(0)
    blink(set, collector, if(previous, do: left - 1, else: left), period, deadline + period, rise)
  end

  # ERTS timers have ms resolution: sleep the whole ms left, then spin to the deadline.
  defp sleep_until(deadline) do
    ms = div(deadline - :erlang.monotonic_time(:nanosecond), 1_000_000)
    if ms > 0, do: :timer.sleep(ms)
    spin(deadline)
  end

  defp spin(deadline) do
    if :erlang.monotonic_time(:nanosecond) < deadline, do: spin(deadline), else: :ok
  end
end
