defmodule RtScope.Exec.Workloads do
  @moduledoc """
  The functions whose execution time the `exec` workload measures, exactly
  as in study 1.

      iex> RtScope.Exec.Workloads.sum(4000)
      8002000

      iex> RtScope.Exec.Workloads.fib(20)
      6765
  """

  @doc "Sum of 1..n through `Enum.reduce/2` (local data, allocation of a range walk)."
  @spec sum(pos_integer()) :: pos_integer()
  def sum(n), do: 1..n |> Enum.reduce(fn x, acc -> x + acc end)

  @doc "Naive recursive Fibonacci, fib(0) = 0, fib(1) = 1 (deep call stack)."
  @spec fib(non_neg_integer()) :: non_neg_integer()
  def fib(0), do: 0
  def fib(1), do: 1
  def fib(n), do: fib(n - 1) + fib(n - 2)

  @doc "`:timer.sleep(ms)` (timer accuracy)."
  @spec sleep(non_neg_integer()) :: :ok
  def sleep(ms), do: :timer.sleep(ms)

  @doc """
  A dirty CPU call that returns at once (`erts_debug:dirty_cpu/2`, the
  dirty BIF the VM ships for its own tests): the process hops onto a dirty
  CPU scheduler and back, and waits there when none is free.
  """
  @spec dirty() :: :ok
  def dirty, do: :erts_debug.dirty_cpu(:wait, 0)

  @doc """
  Starts hog processes for `dirty`: one per online dirty CPU scheduler, each
  holding one for `ms` ms (`erts_debug:dirty_cpu(:wait, ms)`) at the same
  time as the others, every 150 to 250 ms; none for ms 0. Returns what
  `stop_dirty_hogs/1` takes.
  """
  @spec start_dirty_hogs(non_neg_integer()) :: pid() | nil
  def start_dirty_hogs(0), do: nil

  def start_dirty_hogs(ms) do
    spawn(fn ->
      hogs =
        for _ <- 1..:erlang.system_info(:dirty_cpu_schedulers_online),
            do: spawn_link(fn -> hog(ms) end)

      pace(hogs)
    end)
  end

  @spec stop_dirty_hogs(pid() | nil) :: :ok
  def stop_dirty_hogs(nil), do: :ok

  def stop_dirty_hogs(pacer) do
    ref = Process.monitor(pacer)
    Process.exit(pacer, :kill)
    receive(do: ({:DOWN, ^ref, _, _, _} -> :ok))
  end

  defp pace(hogs) do
    :timer.sleep(150 + :rand.uniform(100))
    Enum.each(hogs, &send(&1, :go))
    pace(hogs)
  end

  defp hog(ms) do
    receive(do: (:go -> :erts_debug.dirty_cpu(:wait, ms)))
    hog(ms)
  end

  @port_chunk 65_536

  @doc """
  Opens a port for `port_write/1` whose program (`sh`) reads what it is sent
  for 200 ms, then stops reading for `ms` ms, and again until the port is
  closed (its standard input at end of file: it exits, also when the VM is
  killed). While it does not read, the pipe fills and a write finds the port
  busy: the writer is suspended until the program reads again.
  """
  @spec open_stalling_port(non_neg_integer()) :: port()
  def open_stalling_port(ms) do
    stall = if ms > 0, do: "sleep #{ms / 1000}", else: ":"

    # cat ends at end of file (exit 0) or is stopped by timeout (non-zero): read on only in the latter case
    script = "while timeout 0.2 cat > /dev/null; [ $? -ne 0 ]; do #{stall}; done"

    Port.open({:spawn_executable, System.find_executable("sh")}, [
      :binary,
      {:args, ["-c", script]},
      {:busy_limits_port, {4096, 8192}}
    ])
  end

  @doc "Writes #{@port_chunk} bytes to the port (`Port.command/2`): suspended while the port is busy."
  @spec port_write(port()) :: true
  def port_write(port), do: Port.command(port, :binary.copy(<<0>>, @port_chunk))

  @spec close_port(port()) :: :ok
  def close_port(port) do
    Port.close(port)
    :ok
  end

  @doc """
  Spawns `n` processes one after the other (nerves_rt_perf's spawn "each");
  returns when every one of them has run.
  """
  @spec spawn_each(pos_integer()) :: :ok
  def spawn_each(n) do
    me = self()
    for _ <- 1..n, do: spawn(fn -> send(me, :spawned) end)
    await_spawned(n)
  end

  defp await_spawned(0), do: :ok
  defp await_spawned(k), do: receive(do: (:spawned -> await_spawned(k - 1)))

  @doc """
  Spawns a chain of `n` processes, each spawning the next and exiting
  (nerves_rt_perf's spawn "recursive"); returns when the last one has run.
  """
  @spec spawn_recursive(pos_integer()) :: :ok
  def spawn_recursive(n) do
    me = self()
    ref = make_ref()
    spawn(fn -> chain(n - 1, me, ref) end)
    receive(do: ({:spawned_all, ^ref} -> :ok))
  end

  defp chain(0, me, ref), do: send(me, {:spawned_all, ref})
  defp chain(k, me, ref), do: spawn(fn -> chain(k - 1, me, ref) end)

  @doc """
  Connects this node to `peer` (nerves_rt_perf's nodeconnect): the
  distribution handshake, including the port lookup in epmd.
  """
  @spec nodeconnect(node()) :: true
  def nodeconnect(peer) do
    true = Node.connect(peer)
  end

  @doc """
  Starts a peer node on this machine for `nodeconnect`, controlled over its
  standard input and output (so a dropped distribution connection does not
  stop it) and hidden (not in anyone's `Node.list/0`). The cookie is set
  over that control channel: it never appears in the peer's command line.
  """
  @spec start_peer() :: %{pid: pid(), node: node()}
  def start_peer do
    name = :peer.random_name(:rtscope_peer)

    {:ok, pid, node} =
      :peer.start(%{
        name: name,
        host: node() |> Atom.to_string() |> String.split("@") |> List.last() |> to_charlist(),
        longnames: :net_kernel.longnames(),
        connection: :standard_io,
        args: [~c"-hidden", ~c"-setcookie", ~c"rtscope_placeholder"]
      })

    :peer.call(pid, :erlang, :set_cookie, [Node.get_cookie()])
    %{pid: pid, node: node}
  end

  @doc """
  Disconnects from the peer and waits until the peer has dropped the
  connection too: a connect while it still holds the old one is refused.
  """
  @spec disconnect_peer(%{pid: pid(), node: node()}) :: :ok
  def disconnect_peer(%{pid: pid, node: peer}) do
    Node.disconnect(peer)
    await_dropped(pid, 5000)
  end

  defp await_dropped(_pid, 0), do: raise("the peer node still holds its connection to #{node()}")

  defp await_dropped(pid, tries) do
    if node() in :peer.call(pid, :erlang, :nodes, [:connected]) do
      Process.sleep(1)
      await_dropped(pid, tries - 1)
    else
      :ok
    end
  end

  @doc "Stops a peer started by `start_peer/0`."
  @spec stop_peer(%{pid: pid()}) :: :ok
  def stop_peer(%{pid: pid}), do: :peer.stop(pid)

  @doc "An empty call: what the measurement itself costs."
  @spec nothing() :: :ok
  def nothing, do: :ok
end
