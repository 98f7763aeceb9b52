defmodule RtScope.Gpio.Line do
  @moduledoc """
  A GPIO line driven from the BEAM through `rtprobe gpio port`, a small
  port program on the GPIO character device (uAPI v2).

  Why a port program and not a NIF or sysfs (docs/gpio.md): a crash in a
  NIF takes the whole VM down — on a Nerves device, the firmware — which
  rtscope must never do, and a NIF would have to be built against the
  device's ERTS; the sysfs GPIO interface is deprecated and absent from
  newer kernels. A port pays a round trip through a pipe per call, which is
  what an Elixir application driving GPIO through a port pays too.

  Frames are `{:packet, 2}`: "1" / "0" set the line ("k" back), "r" reads
  it ("0" / "1" back). The port program's first frame is "ready", or "E"
  and the reason (no such chip or line, the line busy, no permission).
  """

  @startup_ms 10_000

  @doc "Opens `line` of `chip` as an output through the port program `rtprobe`; the caller owns it."
  @spec open(String.t(), String.t(), non_neg_integer()) :: {:ok, port()} | {:error, String.t()}
  def open(rtprobe, chip, line) do
    port =
      Port.open({:spawn_executable, rtprobe}, [
        :binary,
        {:packet, 2},
        :exit_status,
        args: ["gpio", "port", "--chip", chip, "--line", Integer.to_string(line)]
      ])

    receive do
      {^port, {:data, "ready"}} -> {:ok, port}
      {^port, {:data, "E" <> why}} -> close_with(port, why)
      {^port, {:exit_status, status}} -> {:error, "#{rtprobe} gpio port exited #{status}"}
    after
      @startup_ms -> close_with(port, "#{rtprobe} gpio port did not answer")
    end
  rescue
    e in ErlangError ->
      {:error,
       "cannot start #{rtprobe}: #{:file.format_error(e.original)} (the GPIO port program)"}
  end

  defp close_with(port, why) do
    close(port)
    {:error, why}
  end

  @doc "Sets the line to `value` (0 or 1)."
  @spec set(port(), 0 | 1) :: :ok
  def set(port, 1), do: command(port, "1", "k")
  def set(port, 0), do: command(port, "0", "k")

  @doc "The line's value."
  @spec get(port()) :: 0 | 1
  def get(port) do
    Port.command(port, "r")

    receive do
      {^port, {:data, "1"}} -> 1
      {^port, {:data, "0"}} -> 0
      {^port, other} -> failed(other)
    end
  end

  defp command(port, cmd, expect) do
    Port.command(port, cmd)

    receive do
      {^port, {:data, ^expect}} -> :ok
      {^port, other} -> failed(other)
    end
  end

  defp failed(other), do: raise("the GPIO port program failed: #{inspect(other)}")

  @doc "Closes the port: the port program releases the line."
  @spec close(port()) :: :ok
  def close(port) do
    Port.close(port)
    :ok
  catch
    :error, :badarg -> :ok
  end
end
