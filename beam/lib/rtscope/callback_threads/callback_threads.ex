defmodule RtScope.CallbackThreads do
  @moduledoc """
  Light-weight callback threads: Node.js-style non-preemptive tasks on the
  Erlang VM, many of them in one process.

  A runtime is a Receptor process (takes requests), a Worker process (runs
  callbacks, one at a time, in FIFO order) and three ETS tables, under one
  supervisor. A callback thread is a tid (an integer, 0, 1, 2, ... per
  runtime) and the callback it runs next; it costs an ETS row, not a
  process.

  ## Callbacks

  A thread starts with `fun.(tid)`. What a callback returns decides what
  the thread does next:

    * `{:receive, fn msg -> ... end}` or `{:receive, fn msg, tid -> ... end}`:
      wait for a message, then run that callback with it;
    * `{:yield, fn -> ... end}` or `{:yield, fn tid -> ... end}`: let the
      other queued threads run first, then continue (a loop that yields
      after each iteration);
    * anything else: the thread has finished and its memory is released.

  Callbacks must not block (no `receive`, no long computation): while one
  runs, no other thread can. A callback that raises, throws or exits ends
  its own thread only (see `RtScope.CallbackThreads.Worker`).

  Inside a callback, `spawn/1`, `send/2` and `self_tid/0` work without the
  runtime handle; from any other process use `spawn/2` and `send/3`. The
  study's raw protocol works too: `Kernel.send(rt, {:spawn, fn tid -> ... end})`
  and `Kernel.send(rt, {:send, tid, msg})`, where `rt` is the Receptor
  that `new/1` returns.

  ## Example

      iex> rt = RtScope.CallbackThreads.new()
      iex> parent = self()
      iex> echo = RtScope.CallbackThreads.spawn(rt, fn _tid ->
      ...>   {:receive, fn msg -> Kernel.send(parent, {:echo, msg}) end}
      ...> end)
      iex> RtScope.CallbackThreads.spawn(rt, fn tid ->
      ...>   RtScope.CallbackThreads.send(echo, {:hello_from, tid})
      ...> end)
      1
      iex> receive do {:echo, msg} -> msg end
      {:hello_from, 1}
      iex> RtScope.CallbackThreads.stop(rt)
      :ok
  """

  import Kernel, except: [send: 2, spawn: 1]

  alias RtScope.CallbackThreads.{Receptor, Store, Worker}

  @typedoc "A runtime: its Receptor's pid or registered name."
  @type runtime :: pid() | atom()
  @type tid :: Store.tid()
  @type result ::
          {:receive, (term() -> result()) | (term(), tid() -> result())}
          | {:yield, (() -> result()) | (tid() -> result())}
          | term()

  @doc """
  Start a runtime under a new supervisor linked to the caller; return the
  supervisor's pid (use this in a supervision tree, `receptor/1` gives the
  handle). Options: `:name` registers the Receptor, `:max_restarts` and
  `:max_seconds` bound the restarts (see `RtScope.CallbackThreads.Supervisor`).
  """
  @spec start_link([RtScope.CallbackThreads.Supervisor.option()]) :: Supervisor.on_start()
  def start_link(opts \\ []), do: RtScope.CallbackThreads.Supervisor.start_link(opts)

  @doc "Child spec, so that `{RtScope.CallbackThreads, name: MyThreads}` can be supervised."
  @spec child_spec(keyword()) :: Supervisor.child_spec()
  def child_spec(opts),
    do: %{id: __MODULE__, start: {__MODULE__, :start_link, [opts]}, type: :supervisor}

  @doc "Start a runtime linked to the caller and return its handle (the Receptor)."
  @spec new([RtScope.CallbackThreads.Supervisor.option()]) :: runtime()
  def new(opts \\ []) do
    {:ok, sup} = start_link(opts)
    opts[:name] || receptor(sup)
  end

  @doc "The Receptor of the runtime supervised by `sup`."
  @spec receptor(pid()) :: pid()
  def receptor(sup) do
    Enum.find_value(Supervisor.which_children(sup), fn
      {Receptor, pid, _, _} when is_pid(pid) -> pid
      _ -> nil
    end) || raise ArgumentError, "#{inspect(sup)} has no running callback-thread receptor"
  end

  @doc "Stop a runtime: its threads and queued work are discarded."
  @spec stop(runtime()) :: :ok
  def stop(rt), do: Supervisor.stop(GenServer.call(rt, :supervisor))

  @doc "Start a thread running `fun.(tid)` and return its tid."
  @spec spawn(runtime(), (tid() -> result())) :: tid()
  def spawn(rt, fun) when is_function(fun, 1), do: GenServer.call(rt, {:spawn, fun})

  def spawn(_rt, fun),
    do: raise(ArgumentError, "a callback thread needs fn tid -> ... end, got #{inspect(fun)}")

  @doc "Inside a callback: start a thread in the same runtime and return its tid."
  @spec spawn((tid() -> result())) :: tid()
  def spawn(fun) when is_function(fun, 1) do
    {store, _} = context!(:spawn)
    tid = Store.new_tid(store)
    :ok = Worker.push(tid, {:start, fun})
    tid
  end

  def spawn(fun),
    do: raise(ArgumentError, "a callback thread needs fn tid -> ... end, got #{inspect(fun)}")

  @doc """
  Send `msg` to thread `tid` of runtime `rt`. Like `Kernel.send/2` it
  always succeeds; a message for a thread that has finished is counted as
  a dead letter (see `info/1`).
  """
  @spec send(runtime(), tid(), term()) :: :ok
  def send(rt, tid, msg) when is_integer(tid), do: GenServer.cast(rt, {:send, tid, msg})

  @doc "Inside a callback: send `msg` to thread `tid` of the same runtime."
  @spec send(tid(), term()) :: :ok
  def send(tid, msg) when is_integer(tid) do
    with :error <- Worker.push(tid, {:message, msg}), do: outside!(:send)
  end

  @doc "Inside a callback: the tid of the thread it belongs to."
  @spec self_tid() :: tid()
  def self_tid do
    {_, tid} = context!(:self_tid)
    tid
  end

  @doc """
  Wait until the runtime's run queue is empty (every thread has finished or
  waits for a message). Returns `:ok`, or exits after `timeout` ms.
  """
  @spec await_idle(runtime(), timeout()) :: :ok
  def await_idle(rt, timeout \\ 5000) do
    deadline = System.monotonic_time(:millisecond) + timeout
    # Through the Receptor first: requests it received before this call are
    # queued by the time it answers, so they count as work still to do.
    await_worker(GenServer.call(rt, :store, timeout), deadline)
  end

  # A Worker being restarted has no pid yet or a dead one: retry until the deadline.
  defp await_worker(store, deadline) do
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    try do
      GenServer.call(Store.worker(store), :await_idle, left)
    catch
      :exit, {reason, _} when reason in [:noproc, :normal, :killed] and left > 10 ->
        Process.sleep(5)
        await_worker(store, deadline)
    end
  end

  @doc """
  Counters and sizes: `threads` (alive), `queued` (run-queue items),
  `finished`, `crashed`, `dead_letters`, `ets_bytes` (the tables' memory),
  `worker` and `receptor` (pids).
  """
  @spec info(runtime()) :: map()
  def info(rt) do
    store = GenServer.call(rt, :store)
    Map.merge(Store.stats(store), %{worker: Store.worker(store), receptor: GenServer.whereis(rt)})
  end

  @doc "The Worker's pid (it changes when the Worker is restarted)."
  @spec worker(runtime()) :: pid() | nil
  def worker(rt), do: Store.worker(GenServer.call(rt, :store))

  defp context!(what), do: Worker.current() || outside!(what)

  defp outside!(what) do
    raise ArgumentError,
          "RtScope.CallbackThreads.#{what} works only inside a callback thread; " <>
            "from other processes use the runtime handle (spawn/2, send/3)"
  end
end
