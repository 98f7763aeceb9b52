defmodule RtScope.CLI do
  @moduledoc """
  The command line of the BEAM harness, as the rtscope Python side starts it:

      elixir --erl "+sbwt none" -pa beam/_build/prod/lib/rtscope/ebin \\
        -e 'RtScope.CLI.main(System.argv())' -- \\
        exec sum --iterations 100 --pause-ms 0 --priority high --output F.rts

  `main/1` runs and halts the VM with the exit status: 0 done, 1 the
  measurement failed (nothing written), 2 bad usage (nothing measured,
  nothing written). `run/1` does the same but returns the status, for tests.
  `execute/1` prints nothing: it returns the status and the text for stdout
  and stderr, for a node that runs the harness on rtscope's behalf
  (`RtScope.Remote`), whose standard error is the device's console.
  See `usage/0` for the commands and options; `interleave` runs several
  arms in one VM, taking turns in blocks (`RtScope.Interleave`).
  """

  alias RtScope.{Exec, Gpio, Harness, Interleave, MsgQ, Options, Timer, VmFlags, VmInfo}

  @common [
    output: :string,
    fullsweep_after: :integer,
    min_heap_size: :integer,
    priority: :string,
    message_queue_data: :string,
    vm_flags: :string
  ]

  @switches %{
    "exec" => [
      iterations: :integer,
      pause_ms: :integer,
      n: :integer,
      csv: :string,
      explain: :integer
    ],
    "timer" => [cycles: :integer, interval_ms: :integer],
    "gpio" => [
      rtprobe: :string,
      chip: :string,
      line: :integer,
      iterations: :integer,
      pause_ms: :integer,
      period_ms: :integer,
      csv: :string
    ],
    {"msgq", "pmap"} => [elements: :integer, iterations: :integer],
    {"msgq", "fan_in"} => [
      senders: :integer,
      messages: :integer,
      iterations: :integer,
      message_words: :integer,
      work: :integer,
      send_interval_ms: :integer,
      queue_sample_every: :integer
    ]
  }

  @workloads ["exec", "timer", "msgq", "gpio", "tasks"]
  @measured ["exec", "timer", "msgq", "gpio"]

  @doc "Runs the command line in `argv` and halts the VM with its exit status."
  @spec main([String.t()]) :: no_return()
  def main(argv), do: argv |> run() |> System.halt()

  @doc "Runs the command line in `argv`; returns the exit status."
  @spec run([String.t()]) :: 0 | 1 | 2
  def run(argv) do
    {status, out, err} = execute(argv)
    IO.write(out)
    IO.write(:stderr, err)
    status
  end

  @typedoc "An exit status with what goes to stdout and to stderr."
  @type outcome :: {0 | 1 | 2, String.t(), String.t()}

  @doc "Runs the command line in `argv` without printing: `{status, stdout_text, stderr_text}`."
  @spec execute([String.t()]) :: outcome()
  def execute(["--" | argv]), do: execute(argv)
  def execute([h | _]) when h in ["help", "--help", "-h"], do: say(usage())

  def execute([v | _]) when v in ["version", "--version"],
    do: say("#{Harness.tool()} #{VmInfo.tool_version()}")

  def execute(["vm-flags" | _]), do: say(RtScope.JSON.encode!(VmFlags.allowlist()))

  def execute(["tasks" | rest]) do
    case RtScope.Tasks.cli(rest) do
      :ok -> {0, "", ""}
      {:error, msg} -> usage_error(msg)
    end
  end

  def execute(["interleave" | rest]) do
    with {:ok, opts, arms} <- interleave_args(rest),
         {:ok, arms} <- Options.map_ok(Enum.with_index(arms), &interleave_arm/1) do
      report_interleave(arms, Interleave.run(arms, opts))
    else
      {:error, msg} -> usage_error(msg)
    end
  end

  def execute([workload, variant | rest]) when workload in @measured do
    case measured(workload, variant, rest) do
      {:ok, opts} -> report(workload, variant, call(workload, variant, opts))
      {:error, msg} -> usage_error(msg)
    end
  end

  def execute([workload]) when workload in @measured,
    do:
      usage_error(
        "missing #{workload} variant: valid choices are #{Enum.join(variants(workload), ", ")}"
      )

  def execute([other | _]),
    do:
      usage_error(
        "unknown workload #{inspect(other)}: valid choices are #{Enum.join(@workloads, ", ")}"
      )

  def execute([]),
    do: usage_error("missing workload: valid choices are #{Enum.join(@workloads, ", ")}")

  # The options of one measured run (or of one interleaved arm), as the API takes them.
  defp measured(workload, variant, rest) do
    with {:ok, switches} <- switches(workload, variant),
         {:ok, opts} <- parse(rest, switches, "#{workload} #{variant}"),
         :ok <- require_output(opts) do
      {:ok, rename(opts, :vm_flags, :expect_vm_flags)}
    end
  end

  # interleave --block B --order I,J,... --arm ARGV... --arm ARGV...
  defp interleave_args(args) do
    {own, arms} = Enum.split_while(args, &(&1 != "--arm"))

    with {:ok, opts} <- parse(own, [block: :integer, order: :string], "interleave"),
         {:ok, opts} <- interleave_order(opts) do
      arms = arms |> Enum.chunk_by(&(&1 == "--arm")) |> Enum.reject(&(&1 == ["--arm"]))

      cond do
        own == args ->
          {:error,
           "missing --arm: interleave needs at least 2 arms, each --arm WORKLOAD VARIANT OPTIONS"}

        length(arms) < Enum.count(args, &(&1 == "--arm")) ->
          {:error, "an --arm without WORKLOAD VARIANT OPTIONS"}

        Enum.any?(arms, &Enum.any?(&1, fn a -> a in ["--block", "--order"] end)) ->
          {:error, "--block and --order go before the first --arm"}

        true ->
          {:ok, opts, arms}
      end
    end
  end

  defp interleave_order(opts) do
    case Keyword.fetch(opts, :order) do
      :error ->
        {:ok, opts}

      {:ok, text} ->
        parts = String.split(text, ",")

        case Options.map_ok(parts, &arm_index/1) do
          {:ok, order} ->
            {:ok, Keyword.put(opts, :order, order)}

          {:error, _} ->
            {:error,
             "invalid value #{inspect(text)} for --order: expected arm indexes separated by commas, like 0,1,1,0"}
        end
    end
  end

  defp arm_index(s) do
    case Integer.parse(s) do
      {i, ""} when i >= 0 -> {:ok, i}
      _ -> {:error, s}
    end
  end

  defp interleave_arm({[workload, variant | rest], i}) when workload in @measured do
    case measured(workload, variant, rest) do
      {:ok, opts} -> {:ok, {workload, variant, opts}}
      {:error, msg} -> {:error, "arm #{i}: #{msg}"}
    end
  end

  defp interleave_arm({argv, i}),
    do:
      {:error,
       "arm #{i}: expected WORKLOAD VARIANT OPTIONS with a workload of #{Enum.join(@measured, ", ")}, got #{inspect(Enum.join(argv, " "))}"}

  defp variants("exec"), do: Exec.variants()
  defp variants("timer"), do: Timer.variants()
  defp variants("msgq"), do: MsgQ.variants()
  defp variants("gpio"), do: Gpio.variants()

  defp switches(workload, variant) do
    valid = Enum.map(variants(workload), &Atom.to_string/1)
    label = if workload == "exec", do: "exec workload", else: "#{workload} variant"

    cond do
      variant not in valid ->
        {:error,
         "unknown #{label} #{inspect(variant)}: valid choices are #{Enum.join(valid, ", ")}"}

      workload == "msgq" ->
        {:ok, @switches[{workload, variant}] ++ @common}

      true ->
        {:ok, @switches[workload] ++ @common}
    end
  end

  defp parse(args, switches, what) do
    case OptionParser.parse(args, strict: switches) do
      {opts, [], []} ->
        {:ok, opts}

      {_, [extra | _], []} ->
        {:error, "unexpected argument #{inspect(extra)} for #{what}"}

      {_, _, [{name, value} | _]} ->
        key = name |> String.trim_leading("-") |> String.replace("-", "_")
        known = Enum.find(switches, fn {k, _} -> Atom.to_string(k) == key end)

        cond do
          known == nil ->
            {:error,
             "unknown option #{name} for #{what}; valid options are #{options_list(switches)}"}

          value == nil ->
            {:error, "option #{name} needs a value"}

          true ->
            {:error, "invalid value #{inspect(value)} for #{name}: expected an #{elem(known, 1)}"}
        end
    end
  end

  defp options_list(switches),
    do: Enum.map_join(switches, ", ", fn {k, _} -> "--" <> String.replace("#{k}", "_", "-") end)

  defp require_output(opts) do
    if Keyword.has_key?(opts, :output),
      do: :ok,
      else: {:error, "missing --output FILE (the sample file to write)"}
  end

  defp rename(opts, from, to) do
    case Keyword.pop(opts, from) do
      {nil, opts} -> opts
      {v, opts} -> Keyword.put(opts, to, v)
    end
  end

  defp call("exec", variant, opts), do: Exec.run(variant, opts)
  defp call("timer", variant, opts), do: Timer.run([{:variant, variant} | opts])
  defp call("msgq", variant, opts), do: MsgQ.run([{:variant, variant} | opts])
  defp call("gpio", variant, opts), do: Gpio.run(variant, opts)

  defp report(workload, variant, {:ok, result}) do
    notes = Enum.map(result.trailer[:notes], &"#{Harness.tool()}: note: #{&1}\n")

    {0,
     "#{Harness.tool()}: #{workload} #{variant}: #{result.count} samples written to #{result.output}\n",
     Enum.join(notes)}
  end

  defp report(_workload, _variant, {:error, {:invalid, msg}}), do: usage_error(msg)

  defp report(workload, variant, {:error, {:failed, msg}}),
    do: {1, "", "#{Harness.tool()}: #{workload} #{variant} failed: #{msg}\n"}

  defp report_interleave(arms, {:ok, results}) do
    lines =
      for {{{workload, variant, _}, result}, i} <- Enum.with_index(Enum.zip(arms, results)) do
        notes = Enum.map(result.trailer[:notes], &"#{Harness.tool()}: note: arm #{i}: #{&1}\n")

        {"#{Harness.tool()}: interleave arm #{i}: #{workload} #{variant}: #{result.count} samples written to #{result.output}\n",
         notes}
      end

    {0, Enum.map_join(lines, &elem(&1, 0)), lines |> Enum.flat_map(&elem(&1, 1)) |> Enum.join()}
  end

  defp report_interleave(_arms, {:error, {:invalid, msg}}), do: usage_error(msg)

  defp report_interleave(_arms, {:error, {:failed, msg}}),
    do: {1, "", "#{Harness.tool()}: interleave failed: #{msg}\n"}

  defp say(text), do: {0, text <> "\n", ""}

  defp usage_error(msg),
    do:
      {2, "", "#{Harness.tool()}: error: #{msg}\n#{Harness.tool()}: run with 'help' for usage\n"}

  @doc "The usage text."
  @spec usage() :: String.t()
  def usage do
    """
    usage: #{Harness.tool()} WORKLOAD VARIANT [OPTIONS] --output FILE.rts

    workloads and variants:
      exec  sum | fib | sleep | nothing | dirty | port | spawn_each | spawn_recursive
            execution time of a call
            --iterations N (10000)  --pause-ms MS (5)
            --n N (sum 4000, fib 20, sleep 5 ms, dirty 10 ms the dirty schedulers are held,
                   port 10 ms the port is not read, spawn_* 1000 processes)
            --csv FILE.csv (also write count,time,heap_size,minor_gcs)
            --explain K (0: the K worst samples' GCs and times scheduled out, in the trailer)
      timer send_after | receive_after | timer_sleep    wake-up latency
            --cycles N (10000)  --interval-ms MS (1)
      msgq  pmap                            Task.async/await parallel map
            --elements N (10000)  --iterations N (10 pmap calls)
      msgq  fan_in                          many senders, one busy receiver
            --senders N (100)  --messages N (100, per sender and round)  --iterations N (1 round)
            --message-words N (16)
            --work N (1000)  --send-interval-ms MS (0)  --queue-sample-every N (100)
      gpio  write | read | blink | genserver_write    GPIO latency (see RtScope.Gpio)
            --rtprobe PATH (the port program)  --chip PATH (/dev/gpiochip0)  --line N (0)
            --iterations N (1000)  --pause-ms MS (1)  --period-ms MS (blink, 10)  --csv FILE.csv
      tasks memory | switch                 memory per task, switch cost (see RtScope.Tasks)

    options of the measuring process (exec, timer, msgq, gpio):
      --fullsweep-after N   --min-heap-size WORDS
      --priority #{Enum.join(RtScope.SpawnOpts.priorities(), "|")}
      --message-queue-data #{Enum.join(RtScope.SpawnOpts.message_queue_data_values(), "|")}
      --vm-flags "FLAGS"    flags this VM must have been started with (checked, recorded)

    interleaved arms (RtScope.Interleave): one VM, the arms take turns in blocks
      #{Harness.tool()} interleave --block B --order I,J,... --arm ARM0... --arm ARM1... [--arm ...]
            each ARM is the WORKLOAD VARIANT [OPTIONS] --output FILE.rts of one run
            (exec sum, fib, sleep, nothing, spawn_each, spawn_recursive; msgq pmap);
            --order: the arm measuring in each block; arm i appears iterations_i / B times

    other commands: help, version, vm-flags (the allowed VM flags, JSON)
    exit status: 0 done, 1 measurement failed, 2 bad usage
    """
  end
end
