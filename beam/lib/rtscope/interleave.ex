defmodule RtScope.Interleave do
  @moduledoc """
  Interleaved arms: several configurations measured in one VM, taking
  turns in blocks, so that whatever drifts on the machine (other jobs, the
  host, the CPU clock) falls on every arm alike (issue 49, docs/beam.md
  "Interleaved arms").

      {:ok, results} =
        RtScope.Interleave.run(
          [
            {:exec, :sum, iterations: 1000, pause_ms: 5, fullsweep_after: 0, output: "a.rts"},
            {:exec, :sum, iterations: 1000, pause_ms: 5, fullsweep_after: 65535, output: "b.rts"}
          ],
          block: 100,
          order: [0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1]
        )

  Each arm is the workload, variant and options of one ordinary run
  (`RtScope.Exec.run/2`, `RtScope.MsgQ.run/1`). Supported: exec `sum`,
  `fib`, `sleep`, `nothing`, `spawn_each`, `spawn_recursive` (one timed call
  per sample, nothing running between calls) and msgq `pmap`. exec `dirty`
  and `port` are not: their hogs and stalling ports would run on during the
  other arms' blocks; `nodeconnect` needs a peer node per arm; timer, gpio
  and msgq fan_in do not measure in separate calls.

  Options: `:block`, the samples of one block (B), and `:order`, one arm
  index per block: the arm that measures in that block. Arm i must have
  `iterations` a multiple of B and appear exactly `iterations / B` times in
  the order; there must be at least 2 arms, the same `:expect_vm_flags` in
  every arm (one VM runs them all) and no two arms writing the same file.
  The caller computes the order (rtscope: randomized and balanced).

  How it runs: each arm goes through the `RtScope.Harness` flow of an
  ordinary run (its own eval, output and measuring process, the measuring
  process with the arm's spawn options), all arms started before the first
  block. The calling process is the conductor: it sends the arm of each
  block a go; that arm makes B timed calls (each followed by its pause, as
  always) and reports done (`RtScope.Interleave.Gate`), while the others
  wait in a `receive`. The warm-up call of an arm is made, untimed, at the
  start of its first block. After an arm's last block the conductor waits
  for its run to be assembled before the next go, so no arm's finishing
  work runs in another arm's block.

  Each arm's result, and its sample file, is exactly that of an ordinary run
  of the arm, plus a header key `pairing`:

    * `arm` (i), `arms` (k), `block_samples` (B)
    * `blocks`: the positions in the order of this arm's blocks, ascending
    * `block_start_ns`: when each of these blocks started (the arm received
      its go), ns after the run's first block started (monotonic clock,
      the same for every arm)
    * `block_ns`: each block's length, go to the end of its last pause
      (the first block's includes the warm-up call)

  The trailer's `loop_ns` counter (exec) counts only the time of the arm's
  own blocks, from the end of its warm-up to the end of its last pause,
  without the waits between its blocks.

  Files are written only when every arm succeeded. An arm whose process
  fails ends the run: the other arms are stopped, nothing is written (a
  file written before a later one could not be is removed) and the result
  is `{:error, {:failed, "arm i (workload variant): message"}}`. Bad options
  give `{:error, {:invalid, message}}` before anything is measured.
  """

  alias RtScope.{Exec, Harness, Interleave.Gate, MsgQ, Options}

  @exec [:sum, :fib, :sleep, :nothing, :spawn_each, :spawn_recursive]
  @msgq [:pmap]

  @typedoc "One arm: the workload, variant and options of one ordinary run."
  @type arm :: {atom() | String.t(), atom() | String.t(), keyword()}

  @doc "The workloads and variants an arm may have."
  def supported, do: [exec: @exec, msgq: @msgq]

  @doc """
  Runs the arms interleaved and writes each arm's file. Returns `{:ok,
  results}`, one per arm in arm order (as `RtScope.Exec.run/2` or
  `RtScope.MsgQ.run/1` returns it), or `{:error, {:invalid | :failed,
  message}}`.
  """
  @spec run([arm()], keyword()) :: {:ok, [map()]} | {:error, {:invalid | :failed, String.t()}}
  def run(arms, opts) do
    with {:ok, plan} <- validate(arms, opts),
         {:ok, results} <- conduct(plan) do
      write(plan, results)
    end
  end

  @doc "Validates the arms and options without measuring anything."
  @spec validate([arm()], keyword()) :: {:ok, map()} | {:error, {:invalid, String.t()}}
  def validate(arms, opts) do
    with :ok <- check_opts(opts),
         {:ok, block} <- block(opts),
         :ok <- arm_count(arms),
         {:ok, arms} <- kinds(arms),
         :ok <- same_vm_flags(arms),
         {:ok, arms} <- configs(arms),
         :ok <- distinct_files(arms),
         :ok <- multiples(arms, block),
         {:ok, order} <- order(Keyword.get(opts, :order), arms, block) do
      {:ok, %{arms: arms, block: block, order: order}}
    end
  end

  defp check_opts(opts) do
    cond do
      not Keyword.keyword?(opts) ->
        invalid("options of interleave must be a keyword list, got #{inspect(opts)}")

      bad = Enum.find(Keyword.keys(opts), &(&1 not in [:block, :order])) ->
        invalid("unknown option #{bad} for interleave; valid options are block, order")

      true ->
        :ok
    end
  end

  defp block(opts) do
    case Keyword.get(opts, :block) do
      nil -> invalid("missing block: the samples of one block (--block B)")
      b when is_integer(b) and b >= 1 -> {:ok, b}
      b -> invalid("invalid block #{inspect(b)}: must be an integer >= 1 (samples per block)")
    end
  end

  defp arm_count(arms) when is_list(arms) and length(arms) >= 2, do: :ok

  defp arm_count(arms) when is_list(arms),
    do: invalid("interleave needs at least 2 arms, got #{length(arms)}")

  defp arm_count(arms),
    do: invalid("the arms must be a list of {workload, variant, options}, got #{inspect(arms)}")

  defp kinds(arms) do
    arms
    |> Enum.with_index()
    |> Options.map_ok(fn
      {{w, v, o}, i} when is_list(o) ->
        with {:ok, w, v} <- kind(w, v, i) do
          {:ok, %{index: i, workload: w, variant: v, opts: o, label: "arm #{i} (#{w} #{v})"}}
        end

      {other, i} ->
        invalid("arm #{i}: must be {workload, variant, options}, got #{inspect(other)}")
    end)
  end

  defp kind(w, v, i) when w in [:exec, "exec"],
    do: supported_variant(:exec, Options.variant(v, "exec workload", Exec.variants()), @exec, i)

  defp kind(w, v, i) when w in [:msgq, "msgq"],
    do: supported_variant(:msgq, Options.variant(v, "msgq variant", MsgQ.variants()), @msgq, i)

  defp kind(w, v, i), do: unsupported(i, "#{w} #{v}")

  defp supported_variant(w, {:ok, v}, valid, i),
    do: if(v in valid, do: {:ok, w, v}, else: unsupported(i, "#{w} #{v}"))

  defp supported_variant(_w, {:error, {:invalid, msg}}, _valid, i),
    do: invalid("arm #{i}: #{msg}")

  defp unsupported(i, what) do
    valid = Enum.map_join(supported(), " and ", fn {w, vs} -> "#{w} #{Enum.join(vs, ", ")}" end)
    invalid("arm #{i} is #{what}: interleave supports #{valid}")
  end

  defp same_vm_flags(arms) do
    flags = Enum.map(arms, &vm_flags(Keyword.get(&1.opts, :expect_vm_flags)))

    case Enum.uniq(flags) do
      [_] ->
        :ok

      _ ->
        have =
          arms
          |> Enum.zip(flags)
          |> Enum.map_join(", ", fn {a, f} ->
            "arm #{a.index} has " <> if(f == nil, do: "none", else: inspect(Enum.join(f, " ")))
          end)

        invalid(
          "the VM flags (--vm-flags) must be the same in every arm, one VM runs them all: " <>
            have
        )
    end
  end

  defp vm_flags(s) when is_binary(s), do: String.split(s)
  defp vm_flags(other), do: other

  defp configs(arms) do
    Options.map_ok(arms, fn arm ->
      case config(arm) do
        {:ok, cfg} -> {:ok, Map.put(arm, :cfg, cfg)}
        {:error, {:invalid, msg}} -> invalid("#{arm.label}: #{msg}")
      end
    end)
  end

  defp config(%{workload: :exec} = arm), do: Exec.validate(arm.variant, arm.opts)

  defp config(%{workload: :msgq} = arm),
    do: MsgQ.validate(Keyword.put(arm.opts, :variant, arm.variant))

  defp distinct_files(arms) do
    files =
      for arm <- arms, key <- [:output, :csv], path = Map.get(arm.cfg, key), path != nil do
        {Path.expand(path), arm.index}
      end

    dup =
      files
      |> Enum.group_by(&elem(&1, 0), &elem(&1, 1))
      |> Enum.find(fn {_path, owners} -> length(owners) > 1 end)

    case dup do
      nil ->
        :ok

      {path, owners} ->
        invalid(
          "#{Enum.map_join(Enum.uniq(owners), " and ", &"arm #{&1}")} would write the same file " <>
            "#{path}: give each arm its own --output (and --csv)"
        )
    end
  end

  defp multiples(arms, block) do
    case Enum.find(arms, &(rem(&1.cfg.iterations, block) != 0)) do
      nil ->
        :ok

      arm ->
        invalid(
          "#{arm.label}: iterations #{arm.cfg.iterations} is not a multiple of the block size " <>
            "#{block}: give every arm a multiple of --block"
        )
    end
  end

  defp order(order, arms, block) do
    k = length(arms)

    cond do
      order == nil ->
        invalid("missing order: one arm index per block (--order 0,1,1,0,...)")

      not is_list(order) or not Enum.all?(order, &is_integer/1) ->
        invalid("invalid order #{inspect(order)}: must be a list of arm indexes")

      bad = Enum.find(Enum.with_index(order), fn {a, _} -> a not in 0..(k - 1) end) ->
        {a, pos} = bad
        invalid("order entry #{a} at position #{pos} is not an arm index: valid are 0..#{k - 1}")

      true ->
        counts = Enum.frequencies(order)

        case Enum.find(arms, &(Map.get(counts, &1.index, 0) != div(&1.cfg.iterations, block))) do
          nil ->
            {:ok, order}

          arm ->
            n = arm.cfg.iterations
            c = Map.get(counts, arm.index, 0)

            invalid(
              "#{arm.label} appears #{c} #{if c == 1, do: "time", else: "times"} in the order, " <>
                "it must appear iterations #{n} / block #{block} = #{div(n, block)} times"
            )
        end
    end
  end

  defp invalid(msg), do: {:error, {:invalid, msg}}

  # ---- the conductor ----

  defp conduct(plan) do
    tag = make_ref()
    me = self()

    refs =
      Map.new(plan.arms, fn arm ->
        gate = %{conductor: me, tag: tag, arm: arm.index, block: plan.block}
        spec = gated(spec(arm), gate)

        {_pid, mref} =
          spawn_monitor(fn -> send(me, {tag, :result, arm.index, Harness.run(spec)}) end)

        {mref, arm.index}
      end)

    st = %{tag: tag, plan: plan, refs: refs, pids: %{}, results: %{}, times: %{}}

    with {:ok, st} <- await_ready(st),
         {:ok, st} <- run_order(st) do
      {:ok, Enum.map(plan.arms, &with_pairing(&1, st))}
    else
      {:failed, st, i, msg} -> abort(st, i, msg)
    end
  end

  defp spec(%{workload: :exec, cfg: cfg}), do: Exec.spec(cfg)
  defp spec(%{workload: :msgq, cfg: cfg}), do: MsgQ.Pmap.spec(cfg)

  defp gated(spec, gate) do
    body = spec.body

    %{
      spec
      | body: fn collector ->
          Gate.install(gate)
          body.(collector)
        end
    }
  end

  defp await_ready(st) do
    if map_size(st.pids) == length(st.plan.arms) do
      {:ok, st}
    else
      case event(st) do
        {:ready, i, pid} -> await_ready(%{st | pids: Map.put(st.pids, i, pid)})
        other -> unexpected(st, other)
      end
    end
  end

  defp run_order(st) do
    left = Enum.frequencies(st.plan.order)

    st.plan.order
    |> Enum.reduce_while({:ok, st, left}, fn arm, {:ok, st, left} ->
      send(Map.fetch!(st.pids, arm), {st.tag, :go})

      with {:ok, st} <- await_done(st, arm),
           left = Map.update!(left, arm, &(&1 - 1)),
           {:ok, st} <- if(left[arm] == 0, do: await_result(st, arm), else: {:ok, st}) do
        {:cont, {:ok, st, left}}
      else
        failed -> {:halt, failed}
      end
    end)
    |> case do
      {:ok, st, _left} -> {:ok, st}
      failed -> failed
    end
  end

  defp await_done(st, arm) do
    case event(st) do
      {:done, ^arm, go, t_end} ->
        {:ok, %{st | times: Map.update(st.times, arm, [{go, t_end}], &[{go, t_end} | &1])}}

      other ->
        unexpected(st, other)
    end
  end

  defp await_result(st, arm) do
    case event(st) do
      {:result, ^arm, {:ok, result}} -> {:ok, resolved(st, arm, result)}
      other -> unexpected(st, other)
    end
  end

  # Anything but what the conductor waits for is an arm that failed.
  defp unexpected(st, {:result, i, {:error, {_kind, msg}}}), do: {:failed, st, i, msg}

  defp unexpected(st, {:result, i, other}),
    do: {:failed, st, i, "its run ended out of turn: #{inspect(other, limit: 5)}"}

  defp unexpected(st, {:down, i, reason}),
    do: {:failed, st, i, "its eval process died: #{Exception.format_exit(reason)}"}

  defp unexpected(st, {kind, i, _, _}),
    do: {:failed, st, i, "it sent #{kind} out of turn"}

  defp unexpected(st, {kind, i, _}),
    do: {:failed, st, i, "it sent #{kind} out of turn"}

  defp event(%{tag: tag, refs: refs}) do
    receive do
      {^tag, :ready, i, pid} ->
        {:ready, i, pid}

      {^tag, :done, i, go, t_end} ->
        {:done, i, go, t_end}

      {^tag, :result, i, result} ->
        {:result, i, result}

      {:DOWN, mref, :process, _pid, reason} when is_map_key(refs, mref) ->
        {:down, Map.fetch!(refs, mref), reason}
    end
  end

  defp resolved(st, arm, result) do
    {mref, _} = Enum.find(st.refs, fn {_ref, i} -> i == arm end)
    Process.demonitor(mref, [:flush])
    %{st | refs: Map.delete(st.refs, mref), results: Map.put(st.results, arm, result)}
  end

  # Stops every arm still running and waits until each has ended, so no
  # process of the run outlives it.
  defp abort(st, failed, msg) do
    Enum.each(st.pids, fn {i, pid} ->
      unless Map.has_key?(st.results, i), do: Process.exit(pid, :kill)
    end)

    drain(st)
    flush(st.tag)
    label = Enum.at(st.plan.arms, failed).label
    {:error, {:failed, "#{label}: #{msg}"}}
  end

  defp drain(st) when map_size(st.refs) == 0, do: :ok

  defp drain(st) do
    case event(st) do
      {:ready, _i, pid} ->
        Process.exit(pid, :kill)
        drain(st)

      {:result, i, _} ->
        {mref, _} = Enum.find(st.refs, fn {_ref, j} -> j == i end)
        Process.demonitor(mref, [:flush])
        drain(%{st | refs: Map.delete(st.refs, mref)})

      {:down, i, _} ->
        drain(%{st | refs: Map.reject(st.refs, fn {_ref, j} -> j == i end)})

      {:done, _, _, _} ->
        drain(st)
    end
  end

  # A block's done sent just before its arm was killed may arrive after the arm's end.
  defp flush(tag) do
    receive do
      {^tag, _, _, _, _} -> flush(tag)
    after
      0 -> :ok
    end
  end

  defp with_pairing(arm, st) do
    [{base, _} | _] = st.times |> Map.values() |> List.flatten() |> Enum.sort()

    times = st.times |> Map.fetch!(arm.index) |> Enum.reverse()

    pairing = %{
      arm: arm.index,
      arms: length(st.plan.arms),
      block_samples: st.plan.block,
      blocks: for({a, pos} <- Enum.with_index(st.plan.order), a == arm.index, do: pos),
      block_start_ns: Enum.map(times, fn {go, _} -> go - base end),
      block_ns: Enum.map(times, fn {go, t_end} -> t_end - go end)
    }

    result = Map.fetch!(st.results, arm.index)
    %{result | header: result.header ++ [pairing: pairing]}
  end

  # ---- the files ----

  defp write(plan, results) do
    plan.arms
    |> Enum.zip(results)
    |> Enum.reduce_while({:ok, [], []}, fn {arm, result}, {:ok, done, written} ->
      case write_arm(arm, result) do
        {:ok, out, files} ->
          {:cont, {:ok, [out | done], files ++ written}}

        {:error, files, {:failed, msg}} ->
          {:halt, {:error, files ++ written, "#{arm.label}: #{msg}"}}
      end
    end)
    |> case do
      {:ok, done, _written} ->
        {:ok, Enum.reverse(done)}

      {:error, written, msg} ->
        Enum.each(written, &File.rm/1)
        {:error, {:failed, msg}}
    end
  end

  # As Exec.run/2 and MsgQ.run/1 write a run; returns the files written.
  defp write_arm(%{workload: :exec, cfg: cfg}, result) do
    csv = if cfg.csv, do: [cfg.csv], else: []

    with {:csv, :ok} <- {:csv, Exec.CSV.write_run(cfg.csv, result.records)},
         {:out, :ok} <- {:out, Harness.write(result, cfg.output)} do
      {:ok, Map.merge(result, %{output: cfg.output, csv: cfg.csv}), csv ++ outputs(cfg)}
    else
      {:csv, {:error, failure}} -> {:error, [], failure}
      {:out, {:error, failure}} -> {:error, csv, failure}
    end
  end

  defp write_arm(%{workload: :msgq, cfg: cfg}, result) do
    case Harness.write(result, cfg.output) do
      :ok -> {:ok, Map.put(result, :output, cfg.output), outputs(cfg)}
      {:error, failure} -> {:error, [], failure}
    end
  end

  defp outputs(%{output: nil}), do: []
  defp outputs(%{output: path}), do: [path]
end
