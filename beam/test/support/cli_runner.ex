defmodule RtScope.Test.CLIRunner do
  @moduledoc """
  Runs `RtScope.CLI.run/1` in the test process and returns `{status,
  stdout, stderr}`, both outputs captured.
  """

  import ExUnit.CaptureIO

  alias RtScope.CLI

  @spec cli([String.t()]) :: {integer(), String.t(), String.t()}
  def cli(argv) do
    parent = self()

    err =
      capture_io(:stderr, fn ->
        out = capture_io(fn -> send(parent, {:status, CLI.run(argv)}) end)
        send(parent, {:out, out})
      end)

    receive do
      {:status, status} ->
        receive do
          {:out, out} -> {status, out, err}
        end
    end
  end
end
