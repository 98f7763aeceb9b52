defmodule RtScope.DuetGate do
  @moduledoc """
  A duet's start gate (src/rtscope/experiment/duet.py): with
  `RTSCOPE_DUET_GATE` set, this VM is one arm of configurations measured
  side by side. `pass/0` creates `GATE.ARM`, then waits until every arm's
  file is there, so that the arms measure from the same moment whatever
  each VM took to start; it gives up when `GATE.abort` appears (another
  arm failed) or after `RTSCOPE_DUET_GATE_S` seconds (default 120).
  Without the variable it returns `:ok` at once.
  """

  @poll_ms 1

  @doc "Waits at the gate when this VM is an arm of a duet."
  @spec pass() :: :ok | {:error, {:failed | :invalid, String.t()}}
  def pass do
    case System.get_env("RTSCOPE_DUET_GATE") do
      gate when gate in [nil, ""] ->
        :ok

      gate ->
        arrive(gate, System.get_env("RTSCOPE_DUET_ARM"), System.get_env("RTSCOPE_DUET_ARMS"))
    end
  end

  defp arrive(gate, arm, arms_text) do
    wait_s = String.to_integer(System.get_env("RTSCOPE_DUET_GATE_S") || "120")

    with {arms, ""} when arms in 1..64 <- Integer.parse(arms_text || ""),
         {_, ""} <- Integer.parse(arm || "") do
      case File.touch("#{gate}.#{arm}") do
        :ok ->
          await(gate, arms, System.monotonic_time(:millisecond) + wait_s * 1000, wait_s)

        {:error, why} ->
          {:error, {:failed, "duet: cannot create #{gate}.#{arm}: #{:file.format_error(why)}"}}
      end
    else
      _ ->
        {:error,
         {:invalid, "RTSCOPE_DUET_GATE needs RTSCOPE_DUET_ARM and RTSCOPE_DUET_ARMS (1..64)"}}
    end
  end

  defp await(gate, arms, until, wait_s) do
    ready = Enum.count(0..(arms - 1), &File.exists?("#{gate}.#{&1}"))

    cond do
      ready == arms ->
        :ok

      File.exists?("#{gate}.abort") ->
        {:error, {:failed, "duet: another arm failed before the start"}}

      System.monotonic_time(:millisecond) > until ->
        {:error,
         {:failed, "duet: #{ready} of #{arms} arms reached the start gate within #{wait_s} s"}}

      true ->
        Process.sleep(@poll_ms)
        await(gate, arms, until, wait_s)
    end
  end
end
