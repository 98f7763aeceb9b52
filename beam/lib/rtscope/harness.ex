defmodule RtScope.Harness do
  @moduledoc """
  The flow every workload shares, after the study's eval / output /
  eval_loop processes.

  The calling process plays `eval`: it starts the output process
  (`RtScope.Collector`) and the measuring process (with the spawn options
  under test), waits for both, and assembles the run: header, records,
  trailer. The measuring process runs the workload's `body`, which sends
  samples to the collector and returns what it observed:

      %{process: observed_process_info, counters: %{...}, notes: [...]}

  A measuring process or collector that dies ends the run with
  `{:error, {:failed, message}}`; nothing is written then. An arm of a duet
  first waits at its start gate (`RtScope.DuetGate`).
  """

  alias RtScope.{Collector, DuetGate, SampleFile, SpawnOpts, VmInfo}

  @tool "rtscope-beam"

  @typedoc "What a workload hands to `run/1`."
  @type spec :: %{
          required(:workload) => String.t(),
          required(:variant) => String.t(),
          required(:columns) => [SampleFile.column()],
          required(:params) => map(),
          required(:requested) => SpawnOpts.requested(),
          required(:spawn_options) => keyword(),
          required(:body) => (pid() -> map()),
          optional(:extra_settings) => map()
        }

  @typedoc """
  A finished run: `header` and `trailer` as written to the file (keyword
  lists), `records` the packed record bytes and `count` the number of
  records.
  """
  @type result :: %{
          header: keyword(),
          trailer: keyword(),
          records: binary(),
          count: non_neg_integer()
        }

  @doc "The `tool` name written into headers."
  def tool, do: @tool

  @doc "Runs one measurement as described by `spec`."
  @spec run(spec()) :: {:ok, result()} | {:error, {:failed, String.t()}}
  def run(spec) do
    with :ok <- DuetGate.pass(), do: measure(spec)
  end

  defp measure(spec) do
    ncols = length(spec.columns)
    started_at = SampleFile.now()
    {collector, cref} = Collector.start(ncols)
    parent = self()
    tag = make_ref()
    body = spec.body

    {pid, mref} =
      :erlang.spawn_opt(
        fn ->
          info = body.(collector)
          Collector.finish(collector, parent, tag)
          send(parent, {tag, :done, info})
        end,
        [:monitor | spec.spawn_options]
      )

    case await(tag, pid, mref, collector, cref, nil, nil) do
      {:ok, info, records, count} ->
        {:ok, assemble(spec, started_at, SampleFile.now(), info, records, count)}

      {:error, _} = error ->
        Process.exit(pid, :kill)
        Process.exit(collector, :kill)
        error
    end
  end

  defp await(_tag, _pid, mref, _collector, cref, {info}, {records, count}) do
    Process.demonitor(mref, [:flush])
    Process.demonitor(cref, [:flush])
    {:ok, info, records, count}
  end

  defp await(tag, pid, mref, collector, cref, info, recs) do
    receive do
      {^tag, :done, i} ->
        await(tag, pid, mref, collector, cref, {i}, recs)

      {^tag, :records, records, count} ->
        await(tag, pid, mref, collector, cref, info, {records, count})

      # Each process sends its reply before it exits, and signals between two
      # processes keep their order: a DOWN before the reply means it died.
      {:DOWN, ^mref, :process, ^pid, reason} ->
        if reason == :normal and info != nil,
          do: await(tag, pid, mref, collector, cref, info, recs),
          else:
            {:error, {:failed, "the measuring process died: #{Exception.format_exit(reason)}"}}

      {:DOWN, ^cref, :process, ^collector, reason} ->
        if reason == :normal and recs != nil,
          do: await(tag, pid, mref, collector, cref, info, recs),
          else: {:error, {:failed, "the output process died: #{Exception.format_exit(reason)}"}}
    end
  end

  defp assemble(spec, started_at, finished_at, info, records, count) do
    observed = Map.fetch!(info, :process)

    settings =
      spec.requested
      |> SpawnOpts.settings(observed)
      |> Map.merge(VmInfo.settings())
      |> Map.merge(Map.get(spec, :extra_settings, %{}))

    header = [
      workload: spec.workload,
      variant: spec.variant,
      runtime: "beam",
      tool: @tool,
      tool_version: VmInfo.tool_version(),
      started_at: started_at,
      settings: settings,
      params: spec.params,
      columns: spec.columns,
      process: observed,
      vm: VmInfo.facts()
    ]

    trailer = [
      finished_at: finished_at,
      counters: Map.get(info, :counters, %{}),
      notes: SpawnOpts.notes(spec.requested, observed) ++ Map.get(info, :notes, [])
    ]

    # The explained samples (RtScope.Explain), when the workload recorded them.
    trailer =
      case Map.fetch(info, :explain) do
        {:ok, explained} -> trailer ++ [explain: Map.put(explained, :source, "erlang:trace")]
        :error -> trailer
      end

    %{header: header, trailer: trailer, records: records, count: count}
  end

  @doc "Writes a finished run to `path` as a sample file (atomically); `nil`: no file wanted."
  @spec write(result(), Path.t() | nil) :: :ok | {:error, {:failed, String.t()}}
  def write(_result, nil), do: :ok

  def write(result, path) do
    case SampleFile.write(path, result.header, result.records, result.trailer) do
      :ok -> :ok
      {:error, msg} -> {:error, {:failed, msg}}
    end
  end
end
