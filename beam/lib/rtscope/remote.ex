defmodule RtScope.Remote do
  @moduledoc """
  The harness's side of a BEAM node target: what rtscope calls inside a
  running node (a Nerves device, a production service) after loading the
  harness's object code into it (docs/nerves.md).

  rtscope reaches these functions over Erlang distribution (through
  `RtScope.Relay` on its host) or through nerves_ssh's exec channel. Every
  argument and result is plain data (strings, lists, maps, integers), so
  both ways carry them as JSON.

  Nothing here stops, restarts or reconfigures the node: runs execute in
  processes of their own; the guard started by `guard/2` removes every
  module rtscope loaded — which kills whatever process still runs their
  code — when rtscope says so or when its connection goes away.
  """

  import Bitwise
  alias RtScope.{CLI, JSON}

  @reply "rtscope-remote: "
  # What json_call may call.
  @calls [
    harness: 1,
    read_files: 1,
    write_file: 2,
    unwritable: 1,
    mkdtemp: 2,
    remove_tree: 1,
    uname: 0,
    place_program: 2
  ]

  @doc "The functions rtscope may call here, with their arities."
  def calls, do: @calls

  @doc """
  Runs the harness's command line `argv` (as `RtScope.CLI`) on this node;
  what it would print is returned, never written to the node's console.
  """
  @spec harness([String.t()]) :: map()
  def harness(argv) do
    # Output of the workload's processes (they inherit the group leader)
    # must not reach rtscope's connection or the device's console.
    {:ok, sink} = StringIO.open("")
    previous = Process.group_leader()
    Process.group_leader(self(), sink)

    try do
      {status, out, err} = CLI.execute(argv)
      {_, stray} = StringIO.contents(sink)
      %{"status" => status, "stdout" => stray <> out, "stderr" => err}
    after
      Process.group_leader(self(), previous)
      StringIO.close(sink)
    end
  end

  @doc "The text of each file, `nil` where it cannot be read (as the target's read_files)."
  @spec read_files([String.t()]) :: map()
  def read_files(paths) do
    Map.new(paths, fn path ->
      case File.read(path) do
        {:ok, text} -> {path, if(String.valid?(text), do: text, else: nil)}
        {:error, _} -> {path, nil}
      end
    end)
  end

  @doc "Writes `text` into an existing file such as a sysfs attribute (no temporary file)."
  @spec write_file(String.t(), String.t()) :: String.t()
  def write_file(path, text) do
    # Only files that exist (sysfs attributes): a typo must not create a file on the device.
    with true <- File.exists?(path) || {:error, :enoent},
         :ok <- File.write(path, text) do
      "ok"
    else
      {:error, reason} -> raise "cannot write #{path}: #{:file.format_error(reason)}"
    end
  end

  @doc "Those of `paths` this node may not write."
  @spec unwritable([String.t()]) :: [String.t()]
  def unwritable(paths) do
    Enum.reject(paths, fn path ->
      match?(
        {:ok, %File.Stat{access: access}} when access in [:write, :read_write],
        File.stat(path)
      )
    end)
  end

  @doc """
  Writes a program (base64) to `path`, executable: the GPIO port program,
  into the session's directory, which the guard removes.
  """
  @spec place_program(String.t(), String.t()) :: String.t()
  def place_program(path, b64) do
    File.mkdir_p!(Path.dirname(path))
    File.write!(path, Base.decode64!(b64))
    File.chmod!(path, 0o755)
    "ok"
  end

  @doc "Makes a fresh directory below `parent`; returns its path."
  @spec mkdtemp(String.t(), String.t()) :: String.t()
  def mkdtemp(parent, prefix) do
    File.mkdir_p!(parent)
    name = prefix <> Integer.to_string(:erlang.unique_integer([:positive])) <> "-" <> random()
    path = Path.join(parent, name)
    File.mkdir!(path)
    path
  end

  @doc "Removes a directory tree (nothing when it is gone)."
  @spec remove_tree(String.t()) :: String.t()
  def remove_tree(path) do
    File.rm_rf!(path)
    "ok"
  end

  @doc "The node's uname: from /proc where the kernel has it, else from the VM."
  @spec uname() :: map()
  def uname do
    proc = fn name, default ->
      case File.read("/proc/sys/kernel/" <> name) do
        {:ok, text} -> String.trim(text)
        {:error, _} -> default
      end
    end

    {_family, os} = :os.type()
    arch = List.to_string(:erlang.system_info(:system_architecture))

    %{
      "sysname" => proc.("ostype", os |> Atom.to_string() |> String.capitalize()),
      "nodename" => proc.("hostname", List.to_string(elem(:inet.gethostname(), 1))),
      "release" => proc.("osrelease", os_version()),
      "version" => proc.("version", ""),
      "machine" => machine(arch)
    }
  end

  defp os_version do
    case :os.version() do
      {a, b, c} -> "#{a}.#{b}.#{c}"
      other -> to_string(other)
    end
  end

  # `uname -m` from the VM's architecture triple, e.g. aarch64-unknown-linux-gnu -> aarch64.
  defp machine(arch) do
    case String.split(arch, "-") do
      ["arm" <> _ | rest] ->
        if Enum.any?(rest, &String.ends_with?(&1, "hf")), do: "armv7l", else: "armv6l"

      [cpu | _] ->
        cpu
    end
  end

  @doc """
  The guard: waits until `owner` (rtscope's relay process, or the SSH
  channel that `hold/1` keeps open) says `:stop` or goes away — rtscope
  exited, the connection dropped — then removes `modules` from this node,
  and the directory `session_dir` where the session's runs wrote.
  """
  @spec guard(pid(), [module()], String.t()) :: :ok
  def guard(owner, modules, session_dir) do
    ref = Process.monitor(owner)

    receive do
      {:DOWN, ^ref, :process, ^owner, _reason} -> :ok
      {:stop, ^owner} -> :ok
    end

    File.rm_rf(session_dir)
    remove(modules)
  end

  @doc """
  For nerves_ssh: keeps this exec channel's process waiting, with a guard
  on it, until rtscope closes the channel (or loses the connection).
  """
  @spec hold([String.t()], String.t()) :: :ok
  def hold(module_names, session_dir) do
    # The exec runs in a process of its own that outlives the channel; the channel's IO server, its
    # group leader, ends with the channel.
    channel = Process.group_leader()
    modules = Enum.map(module_names, &String.to_existing_atom/1)
    spawn(fn -> guard(channel, modules, session_dir) end)
    IO.puts(@reply <> JSON.encode!(%{"ok" => true}))
    # Stopped by the guard, which removes this module.
    receive do
      :never -> :ok
    end
  end

  @doc """
  For nerves_ssh: calls `fun` of this module with the JSON array `args`
  (base64, so the exec command needs no quoting) and prints one line
  `rtscope-remote: {"ok": result}` or `{"error": message}` on the channel.
  Printed, not returned: nerves_ssh shows a result through `inspect`,
  which shortens long strings.
  """
  @spec json_call(String.t(), String.t()) :: :ok
  def json_call(fun, args_b64) do
    reply =
      try do
        {:ok, args} = args_b64 |> Base.decode64!() |> JSON.decode()

        case Enum.find(calls(), fn {f, a} -> Atom.to_string(f) == fun and a == length(args) end) do
          {f, _} -> %{"ok" => apply(__MODULE__, f, args)}
          nil -> %{"error" => "RtScope.Remote has no call #{fun}/#{length(args)}"}
        end
      rescue
        e -> %{"error" => "on node #{node()}: " <> Exception.message(e)}
      end

    IO.puts(@reply <> JSON.encode!(reply))
  end

  @doc """
  Removes `modules`: each becomes old code at once, and a process running
  only OTP code purges them, killing every process that still runs them —
  this guard included, so it never outlives its modules.
  """
  @spec remove([module()]) :: :ok
  def remove(modules) do
    Enum.each(modules, fn m ->
      :code.purge(m)
      :code.delete(m)
    end)

    :erlang.spawn(:lists, :foreach, [&:code.purge/1, modules])
    :ok
  end

  defp random, do: Integer.to_string(:rand.uniform(1 <<< 40), 36)
end
