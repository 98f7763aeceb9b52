defmodule RtScope.Relay do
  @moduledoc """
  rtscope's end of an Erlang-distribution target (`erlang://NAME@HOST`): a
  hidden node on rtscope's host that talks to the target node for the
  Python side (docs/nerves.md).

  rtscope starts it as

      elixir --erl "-hidden -dist_listen false" -pa EBIN -e "RtScope.Relay.main()"

  with HOME a private temporary directory and none of ERL_FLAGS & co. It
  reads one JSON request per line on stdin and answers each with one line
  `rtscope-relay: JSON` on stdout: `{"ok": value}` or `{"error": message}`.
  The cookie arrives in the `connect` request, never in argv or a file.

      {"op": "connect", "node": "rtscope@nerves.local", "cookie": "..."}
      {"op": "load", "ebin": "/path/to/ebin", "session_dir": "/tmp/rtscope/rtscope-XXXX"}
                                                   # object code -> node, starts the guard
      {"op": "call", "fun": "read_files", "args": [[...]], "timeout_ms": 60000}
      {"op": "get", "remote": "/tmp/x/run.rts", "local": "/tmp/y/run.rts"}
      {"op": "unload"}                             # modules gone, their processes stopped

  `dist_listen false`: the relay connects out and accepts nothing, so it
  needs no epmd of its own. When stdin closes (rtscope exits, even killed)
  the relay exits at once, even in the middle of a call; the node's guard
  (`RtScope.Remote.guard/2`) sees the connection go and unloads.
  """

  alias RtScope.JSON

  @prefix "rtscope-relay: "
  # Modules that stay on rtscope's side.
  @host_only [__MODULE__]

  @doc "Serves requests from stdin until it closes."
  @spec main() :: no_return()
  def main do
    relay = self()
    spawn_link(fn -> read_requests(relay) end)
    loop(%{node: nil, modules: [], guard: nil})
  end

  # Stdin is read apart from the requests: its end is seen at once, even in the middle of a run. Then the
  # relay stops and so drops the connection, and the node's guard removes the modules and their processes.
  defp read_requests(relay) do
    case IO.binread(:stdio, :line) do
      line when is_binary(line) ->
        send(relay, {:request, line})
        read_requests(relay)

      _eof ->
        System.halt(0)
    end
  end

  defp loop(state) do
    receive do
      {:request, line} ->
        {reply, state} =
          case JSON.decode(line) do
            {:ok, %{"op" => op} = req} -> safely(op, req, state)
            _ -> {{:error, "not a request: #{String.slice(line, 0, 80)}"}, state}
          end

        IO.binwrite(:stdio, [@prefix, JSON.encode!(wire(reply)), "\n"])
        loop(state)
    end
  end

  defp wire({:ok, value}), do: %{"ok" => value}
  defp wire({:error, msg}), do: %{"error" => msg}

  defp safely(op, req, state) do
    handle(op, req, state)
  catch
    kind, reason -> {{:error, explain(kind, reason, state.node)}, state}
  end

  defp handle("connect", %{"node" => name, "cookie" => cookie}, state) do
    node = String.to_atom(name)
    [_, host] = String.split(name, "@", parts: 2)
    start_distribution(String.contains?(host, "."))
    :erlang.set_cookie(node, String.to_atom(cookie))

    if Node.connect(node) == true do
      {{:ok, true}, %{state | node: node}}
    else
      {{:error, why_not_connected(name, host)}, state}
    end
  end

  defp handle("load", %{"ebin" => ebin, "session_dir" => dir}, %{node: node} = state)
       when node != nil do
    modules = harness_modules(ebin)

    case Enum.find(modules, fn {mod, _} -> loaded?(node, mod) end) do
      {mod, _} ->
        {{:error,
          "node #{node} already has module #{inspect(mod)} loaded: another rtscope is measuring " <>
            "there, or the firmware carries its own rtscope harness; rtscope will not replace it"},
         state}

      nil ->
        load_all(node, modules, dir, state)
    end
  end

  defp handle("call", %{"fun" => fun, "args" => args} = req, %{node: node} = state)
       when node != nil do
    case Enum.find(RtScope.Remote.calls(), fn {f, a} ->
           Atom.to_string(f) == fun and a == length(args)
         end) do
      {f, _arity} ->
        timeout = Map.get(req, "timeout_ms") || :infinity
        {{:ok, :erpc.call(node, RtScope.Remote, f, args, timeout)}, state}

      nil ->
        {{:error, "RtScope.Remote has no function #{fun}/#{length(args)}"}, state}
    end
  end

  defp handle("get", %{"remote" => remote, "local" => local}, %{node: node} = state)
       when node != nil do
    case :erpc.call(node, :file, :read_file, [remote], 600_000) do
      {:ok, bin} ->
        File.write!(local, bin)
        {{:ok, byte_size(bin)}, state}

      {:error, reason} ->
        {{:error, "cannot read #{remote} on #{node}: #{:file.format_error(reason)}"}, state}
    end
  end

  defp handle("unload", _req, state), do: {{:ok, unload(state)}, %{state | modules: []}}

  defp handle(op, _req, %{node: nil} = state) when op in ["load", "call", "get"],
    do: {{:error, "not connected: send connect first"}, state}

  defp handle(op, _req, state),
    do: {{:error, "unknown request #{inspect(op)}: connect, load, call, get, unload"}, state}

  defp start_distribution(longnames) do
    if node() == :nonode@nohost do
      me = "rtscope_relay_#{System.pid()}"
      name = if longnames, do: :"#{me}@127.0.0.1", else: String.to_atom(me)
      {:ok, _} = :net_kernel.start([name, if(longnames, do: :longnames, else: :shortnames)])
    end
  end

  # Node.connect says only false; epmd on the node's host tells why.
  defp why_not_connected(name, host) do
    [short, _] = String.split(name, "@", parts: 2)

    case :erl_epmd.names(String.to_charlist(host)) do
      {:ok, names} ->
        running = Enum.map(names, fn {n, _port} -> List.to_string(n) end)

        if short in running,
          do:
            "node #{name} refused the connection: wrong cookie (the node's log says " <>
              "\"Connection attempt from node ... rejected\")",
          else:
            "no node named #{short} on #{host}; nodes running there: " <>
              if(running == [], do: "none", else: Enum.join(running, ", "))

      {:error, reason} ->
        "cannot reach #{host}: no Erlang port mapper (epmd) answers there (#{inspect(reason)}); " <>
          "is the device up and distribution started?"
    end
  end

  defp harness_modules(ebin) do
    for file <- Path.wildcard(Path.join(ebin, "*.beam")),
        mod = file |> Path.basename(".beam") |> String.to_atom(),
        mod not in @host_only,
        do: {mod, File.read!(file)}
  end

  defp loaded?(node, mod), do: :erpc.call(node, :code, :is_loaded, [mod]) != false

  defp load_all(node, modules, session_dir, state) do
    loaded =
      Enum.reduce_while(modules, [], fn {mod, bin}, done ->
        case :erpc.call(node, :code, :load_binary, [mod, ~c"rtscope:#{mod}", bin]) do
          {:module, ^mod} ->
            {:cont, [mod | done]}

          {:error, reason} ->
            remove(node, done)
            {:halt, {:error, mod, reason}}
        end
      end)

    case loaded do
      {:error, mod, reason} ->
        {{:error,
          "node #{node} cannot load #{inspect(mod)}: #{inspect(reason)} (its OTP " <>
            "#{otp(node)} is older than the #{otp(node())} rtscope compiled the harness with?)"},
         state}

      mods ->
        guard = Node.spawn(node, RtScope.Remote, :guard, [self(), mods, session_dir])
        {{:ok, length(mods)}, %{state | modules: mods, guard: guard}}
    end
  end

  defp otp(node), do: :erpc.call(node, :erlang, :system_info, [:otp_release]) |> List.to_string()

  # The guard removes the modules (and so stops their processes); then make sure from here, with OTP
  # code only, and report what is left.
  defp unload(%{node: nil}), do: []
  defp unload(%{modules: []}), do: []

  defp unload(%{node: node, modules: mods, guard: guard}) do
    send(guard, {:stop, self()})
    remove(node, mods)
    Enum.filter(mods, &(loaded?(node, &1) or :erpc.call(node, :erlang, :check_old_code, [&1])))
  catch
    _, _ -> []
  end

  defp remove(node, mods) do
    for m <- mods, f <- [:purge, :delete, :purge], do: :erpc.call(node, :code, f, [m])
    :ok
  end

  defp explain(:error, {:erpc, :noconnection}, node),
    do: "node #{node} is down or the connection to it was lost"

  defp explain(:error, {:erpc, :timeout}, node), do: "node #{node} did not answer in time"

  defp explain(:error, {:exception, reason, stack}, node) do
    message = Exception.message(Exception.normalize(:error, reason, stack))

    case stack do
      [entry | _] ->
        "on node #{node}: #{message} (in #{Exception.format_stacktrace_entry(entry)})"

      _ ->
        "on node #{node}: #{message}"
    end
  end

  defp explain(:exit, {:exception, reason}, node),
    do: "on node #{node}: the call exited: #{Exception.format_exit(reason)}"

  defp explain(kind, reason, _node), do: Exception.format_banner(kind, reason)
end
