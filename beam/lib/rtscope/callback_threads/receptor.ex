defmodule RtScope.CallbackThreads.Receptor do
  @moduledoc """
  Takes requests for a callback-thread runtime and hands them on at once.

  The Receptor accepts the study's raw messages as well as calls:

    * `{:spawn, fun}` (message) or the call `{:spawn, fun}` (replies the
      tid): a new thread whose first callback is `fun.(tid)`;
    * `{:send, tid, msg}` (message or cast): a message for thread `tid`.

  It appends each request to the run queue in ETS and wakes the Worker, so
  a request that arrives while the Worker is being restarted is not lost:
  the new Worker finds it in the queue. The Receptor keeps no state of its
  own beyond the table handles, so it answers immediately.

  When it has been idle for 200 ms it collects its own garbage once (the
  callbacks it received were copied into ETS and are garbage in its heap);
  this is a single timeout, not polling.
  """

  use GenServer

  alias RtScope.CallbackThreads.Store

  @idle_gc_ms 200

  @spec start_link({Store.t(), pid(), atom() | nil}) :: GenServer.on_start()
  def start_link({%Store{}, sup, name} = args) when is_pid(sup) do
    GenServer.start_link(__MODULE__, args, if(name, do: [name: name], else: []))
  end

  @doc "Append a start item for a new thread running `fun`; wake the Worker; return the tid."
  @spec spawn_thread(Store.t(), (Store.tid() -> term())) :: Store.tid()
  def spawn_thread(store, fun) when is_function(fun, 1) do
    tid = Store.new_tid(store)
    Store.push(store, tid, {:start, fun})
    wake(store)
    tid
  end

  @doc "Append a message for thread `tid`; wake the Worker."
  @spec send_message(Store.t(), Store.tid(), term()) :: :ok
  def send_message(store, tid, msg) do
    Store.push(store, tid, {:message, msg})
    wake(store)
    :ok
  end

  # The Worker records its pid before it scans the queue (Worker.init), so
  # an item pushed before this lookup is seen either by the old Worker's
  # wake-up or by the new Worker's first scan.
  defp wake(store) do
    case Store.worker(store) do
      nil -> :ok
      pid -> Kernel.send(pid, :wake)
    end
  end

  @impl true
  def init({store, sup, _name}), do: {:ok, %{store: store, sup: sup}}

  @impl true
  def handle_call({:spawn, fun}, _from, state) when is_function(fun, 1) do
    {:reply, spawn_thread(state.store, fun), state, @idle_gc_ms}
  end

  def handle_call(:store, _from, state), do: {:reply, state.store, state, @idle_gc_ms}
  def handle_call(:supervisor, _from, state), do: {:reply, state.sup, state, @idle_gc_ms}

  def handle_call(other, _from, state),
    do: {:reply, {:error, {:bad_request, other}}, state, @idle_gc_ms}

  @impl true
  def handle_cast({:send, tid, msg}, state) do
    send_message(state.store, tid, msg)
    {:noreply, state, @idle_gc_ms}
  end

  @impl true
  def handle_info({:spawn, fun}, state) when is_function(fun, 1) do
    spawn_thread(state.store, fun)
    {:noreply, state, @idle_gc_ms}
  end

  def handle_info({:send, tid, msg}, state) when is_integer(tid) do
    send_message(state.store, tid, msg)
    {:noreply, state, @idle_gc_ms}
  end

  def handle_info(:timeout, state) do
    :erlang.garbage_collect()
    {:noreply, state}
  end

  def handle_info(other, state) do
    # :logger (kernel), so the library needs no application beyond OTP's own.
    :logger.warning(
      "rtscope callback-thread receptor: ignored #{inspect(other, limit: 5)} " <>
        "(expected {:spawn, fn tid -> ... end} or {:send, tid, msg})"
    )

    {:noreply, state, @idle_gc_ms}
  end
end
