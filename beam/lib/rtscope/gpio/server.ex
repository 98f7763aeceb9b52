defmodule RtScope.Gpio.Server do
  @moduledoc """
  The GenServer of nerves_rt_perf's GPIO GenServer measurement: it owns a
  GPIO line (`RtScope.Gpio.Line`) and writes it on `write/2`, a
  `GenServer.call`.
  """
  use GenServer

  alias RtScope.Gpio.Line

  @doc "Starts the server (linked) on `line` of `chip` through `rtprobe`."
  @spec start_link(String.t(), String.t(), non_neg_integer()) ::
          {:ok, pid()} | {:error, String.t()}
  def start_link(rtprobe, chip, line), do: GenServer.start_link(__MODULE__, {rtprobe, chip, line})

  @doc "Writes `value` to the line; returns when it is written."
  @spec write(pid(), 0 | 1) :: :ok
  def write(server, value), do: GenServer.call(server, {:write, value})

  @doc "Stops the server; its line is released."
  @spec stop(pid()) :: :ok
  def stop(server), do: GenServer.stop(server)

  @impl true
  def init({rtprobe, chip, line}) do
    case Line.open(rtprobe, chip, line) do
      {:ok, port} -> {:ok, port}
      {:error, why} -> {:stop, why}
    end
  end

  @impl true
  def handle_call({:write, value}, _from, port), do: {:reply, Line.set(port, value), port}

  @impl true
  def terminate(_reason, port), do: Line.close(port)
end
