defmodule RtScope.Timer do
  @moduledoc """
  The `timer` workload: wake-up latency inside the VM, the BEAM's own
  cyclictest.

  A process (with the spawn options under test) wakes on an absolute
  periodic schedule: planned wake-up k is `start + k × interval` on the
  Erlang monotonic clock, so lateness never accumulates as drift. Each
  sample is

    * `latency` (ns, i64): actual wake-up (`:erlang.monotonic_time(:nanosecond)`
      right after the wait returns) − planned wake-up
    * `cycle` (count, i64): k, the index of the planned period

  Variants, i.e. how the process waits:

    * `send_after` – `:erlang.send_after(planned_ms, self(), msg, abs: true)`
      then `receive`: an absolute timer, never fires early
    * `receive_after` – `receive after t` with t the remaining time in whole
      ms, rounded up
    * `timer_sleep` – `:timer.sleep(t)`, t as above

  Timer values are whole ms (ERTS timers have ms resolution), so the
  interval is given in ms; planned times fall on ms boundaries of the
  monotonic clock. A relative timeout of t ms expires no earlier than t ms
  after the call and ERTS rounds it to its next ms tick: `receive_after` and
  `timer_sleep` therefore show up to about 1 ms of rounding on top of the
  scheduling latency, which is what such code gets in practice.

  When a wake-up comes later than the next planned time, the periods it
  overran are skipped (the next wake-up is the first planned time still
  ahead) and counted, never hidden: trailer counters `missed_periods`
  (periods skipped), `late_wakeups` (wake-ups that caused skips),
  `early_wakeups` (negative latencies) and `planned_periods` (the last
  recorded period and any the last wake-up overran). A run records
  exactly `cycles` wake-ups, after one unrecorded warm-up wake-up.

      {:ok, result} = RtScope.Timer.run(variant: :send_after, cycles: 5000, interval_ms: 1,
                                        priority: :high, output: "/data/timer.rts")

  Options: `:variant` (default `:send_after`), `:cycles` (default 10 000),
  `:interval_ms` (default 1) and the common options of `RtScope.Options`.
  """

  alias RtScope.{Harness, Options, SpawnOpts}

  @variants [:send_after, :receive_after, :timer_sleep]
  @keys [:variant, :cycles, :interval_ms]

  @columns [
    %{name: "latency", unit: "ns", type: "i64"},
    %{name: "cycle", unit: "count", type: "i64"}
  ]

  @doc "The variants `run/1` accepts."
  def variants, do: @variants

  @doc "The workload-specific option names."
  def option_keys, do: @keys

  @doc "Validates and runs one timer measurement. See the module doc."
  @spec run(keyword()) :: {:ok, map()} | {:error, {:invalid | :failed, String.t()}}
  def run(opts \\ []) do
    with {:ok, cfg} <- validate(opts),
         {:ok, result} <- Harness.run(spec(cfg)),
         :ok <- Harness.write(result, cfg.output) do
      {:ok, Map.put(result, :output, cfg.output)}
    end
  end

  @doc "Validates the options without measuring anything."
  @spec validate(keyword()) :: {:ok, map()} | {:error, {:invalid, String.t()}}
  def validate(opts) do
    with :ok <- Options.check_keys(opts, "timer", @keys),
         {:ok, variant} <-
           Options.variant(Keyword.get(opts, :variant, :send_after), "timer variant", @variants),
         {:ok, cycles} <- Options.integer(opts, :cycles, 10_000, 1),
         {:ok, interval_ms} <- Options.integer(opts, :interval_ms, 1, 1),
         {:ok, common} <- Options.common(opts) do
      {:ok, Map.merge(common, %{variant: variant, cycles: cycles, interval_ms: interval_ms})}
    end
  end

  defp spec(cfg) do
    %{variant: variant, cycles: cycles, interval_ms: interval_ms} = cfg

    %{
      workload: "timer",
      variant: Atom.to_string(variant),
      columns: @columns,
      params: %{
        cycles: cycles,
        interval_ms: interval_ms,
        interval_ns: interval_ms * 1_000_000,
        warmup_cycles: 1
      },
      requested: cfg.requested,
      spawn_options: SpawnOpts.spawn_options(cfg.requested),
      body: fn collector ->
        observed = SpawnOpts.observe()
        start_ms = :erlang.monotonic_time(:millisecond) + 1
        # Warm-up: one unrecorded wake-up at planned period 0.
        wait(variant, start_ms)
        first = next_period(:erlang.monotonic_time(:nanosecond), start_ms, interval_ms, 0)
        counters = %{missed_periods: 0, late_wakeups: 0, early_wakeups: 0}

        {last, counters} =
          cycle(variant, collector, first, cycles, start_ms, interval_ms, counters)

        %{process: observed, counters: Map.put(counters, :planned_periods, last), notes: []}
      end
    }
  end

  # Returns {planned periods passed, counters}: the last recorded period and
  # any the last wake-up overran.
  defp cycle(variant, collector, k, left, start_ms, interval_ms, counters) do
    planned_ms = start_ms + k * interval_ms
    wait(variant, planned_ms)
    now = :erlang.monotonic_time(:nanosecond)
    latency = now - planned_ms * 1_000_000
    send(collector, {:s, latency, k})
    next = next_period(now, start_ms, interval_ms, k)
    skipped = next - k - 1

    counters = %{
      counters
      | missed_periods: counters.missed_periods + skipped,
        late_wakeups: counters.late_wakeups + if(skipped > 0, do: 1, else: 0),
        early_wakeups: counters.early_wakeups + if(latency < 0, do: 1, else: 0)
    }

    if left == 1,
      do: {next - 1, counters},
      else: cycle(variant, collector, next, left - 1, start_ms, interval_ms, counters)
  end

  # The first planned period after k whose time is not yet past at `now`
  # (a wake-up exactly at a planned time does not miss it).
  defp next_period(now, start_ms, interval_ms, k) do
    interval_ns = interval_ms * 1_000_000
    last_past = Integer.floor_div(now - start_ms * 1_000_000 - 1, interval_ns)
    max(k, last_past) + 1
  end

  defp wait(:send_after, planned_ms) do
    :erlang.send_after(planned_ms, self(), {:rtscope_tick, planned_ms}, abs: true)

    receive do
      {:rtscope_tick, ^planned_ms} -> :ok
    end
  end

  defp wait(:receive_after, planned_ms) do
    t = remaining_ms(planned_ms)

    receive do
    after
      t -> :ok
    end
  end

  defp wait(:timer_sleep, planned_ms), do: :timer.sleep(remaining_ms(planned_ms))

  defp remaining_ms(planned_ms) do
    left = planned_ms * 1_000_000 - :erlang.monotonic_time(:nanosecond)
    if left > 0, do: div(left + 999_999, 1_000_000), else: 0
  end
end
