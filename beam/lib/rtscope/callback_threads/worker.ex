defmodule RtScope.CallbackThreads.Worker do
  @moduledoc """
  Runs callback threads, one callback at a time, in FIFO order.

  The Worker takes the oldest item from the run queue
  (`RtScope.CallbackThreads.Store`), runs the callback it names and settles
  the thread by what the callback returned (see `RtScope.CallbackThreads`
  for the protocol). When the queue is empty it blocks in `receive` until
  the Receptor wakes it: an idle Worker uses no CPU at all.

  Fault handling:

    * a callback that raises, throws or exits is caught: that thread ends
      (counted as `crashed`, logged) and the queue goes on;
    * if the Worker itself dies (killed from outside, or a callback that
      kills its process), its supervisor restarts it; the queue and the
      threads live in ETS tables owned by the supervisor, so queued work
      is kept. The thread whose callback was running is marked crashed.
      A Worker killed from outside between taking an item and marking its
      thread running loses that one item.

  When it goes idle after 1,000 callbacks or more since its last
  collection, or with a heap grown beyond 1,598 words, the Worker collects
  its garbage, so the memory that finished callbacks used is given back
  rather than kept until some later collection; a Worker that handles a
  trickle of work does not collect on every wake-up.
  """

  use GenServer

  alias RtScope.CallbackThreads.Store

  # Callbacks run per turn before the Worker looks at its own mailbox
  # again (keeps calls such as await_idle answerable under endless work).
  @slice 1000
  # Idle garbage collection: after this many callbacks, or when the heap grew
  # beyond this many words (four growth steps above the default 233).
  @gc_callbacks 1000
  @gc_words 1598

  @context :"$rtscope_callback_thread"

  @spec start_link(Store.t()) :: GenServer.on_start()
  def start_link(%Store{} = store), do: GenServer.start_link(__MODULE__, store)

  @doc false
  def context_key, do: @context

  @impl true
  def init(store) do
    Store.set_worker(store, self())
    recover(store)
    Process.put(@context, {store, nil})
    Kernel.send(self(), :wake)
    {:ok, %{store: store, waiters: [], since_gc: 0}}
  end

  # Threads left :running by a Worker that died: their callback was in flight.
  defp recover(store) do
    for {tid, mailbox} <- Store.running(store) do
      log_crash(tid, "the worker died while running it")
      Store.delete_thread(store, tid)
      Store.count(store, :crashed)
      drop_mailbox(store, mailbox)
    end
  end

  @impl true
  def handle_info(:wake, state) do
    flush_wakes()

    case run(state.store, @slice) do
      :more ->
        Kernel.send(self(), :wake)
        {:noreply, %{state | since_gc: state.since_gc + @slice}}

      {:empty, left} ->
        {:noreply, idle(%{state | since_gc: state.since_gc + @slice - left})}
    end
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def handle_call(:await_idle, from, state) do
    if Store.empty?(state.store) do
      {:reply, :ok, state}
    else
      {:noreply, %{state | waiters: [from | state.waiters]}}
    end
  end

  defp flush_wakes do
    receive do
      :wake -> flush_wakes()
    after
      0 -> :ok
    end
  end

  defp idle(state) do
    Enum.each(state.waiters, &GenServer.reply(&1, :ok))

    if state.since_gc >= @gc_callbacks or heap_words() > @gc_words do
      :erlang.garbage_collect()
      %{state | waiters: [], since_gc: 0}
    else
      %{state | waiters: []}
    end
  end

  defp heap_words do
    {:total_heap_size, words} = Process.info(self(), :total_heap_size)
    words
  end

  defp run(_store, 0), do: :more

  defp run(store, budget) do
    case Store.pop(store) do
      :empty ->
        {:empty, budget}

      {tid, item} ->
        step(store, tid, item)
        run(store, budget - 1)
    end
  end

  defp step(store, tid, {:start, fun}) do
    Store.put_thread(store, tid, :running, :empty)
    settle(store, tid, invoke(store, tid, fun, [tid]), :empty)
  end

  defp step(store, tid, {:message, msg}) do
    case Store.thread(store, tid) do
      nil ->
        Store.count(store, :dead_letters)

      {_, fun, :empty} when is_function(fun) ->
        Store.mark_running(store, tid)
        settle(store, tid, invoke(store, tid, fun, receive_args(fun, msg, tid)), :empty)

      {_, thread_state, mailbox} ->
        # Not waiting yet: keep the message until the thread returns {:receive, f}.
        Store.put_thread(store, tid, thread_state, enqueue(mailbox, msg))
    end
  end

  defp step(store, tid, {:continue, fun}) do
    case Store.thread(store, tid) do
      {_, :ready, mailbox} ->
        Store.mark_running(store, tid)

        settle(
          store,
          tid,
          invoke(store, tid, fun, if(is_function(fun, 1), do: [tid], else: [])),
          mailbox
        )

      _ ->
        :ok
    end
  end

  defp step(store, tid, {:deliver, fun, msg}) do
    case Store.thread(store, tid) do
      {_, :ready, mailbox} ->
        Store.mark_running(store, tid)
        settle(store, tid, invoke(store, tid, fun, receive_args(fun, msg, tid)), mailbox)

      _ ->
        :ok
    end
  end

  defp receive_args(fun, msg, tid), do: if(is_function(fun, 2), do: [msg, tid], else: [msg])

  defp invoke(store, tid, fun, args) do
    Process.put(@context, {store, tid})

    try do
      {:ok, apply(fun, args)}
    catch
      kind, reason -> {:crashed, kind, reason, __STACKTRACE__}
    end
  end

  defp settle(store, tid, {:ok, {:receive, fun}}, mailbox)
       when is_function(fun, 1) or is_function(fun, 2) do
    case mailbox do
      :empty ->
        Store.put_thread(store, tid, fun, :empty)

      queue ->
        {{:value, msg}, rest} = :queue.out(queue)
        Store.put_thread(store, tid, :ready, if(:queue.is_empty(rest), do: :empty, else: rest))
        Store.push(store, tid, {:deliver, fun, msg})
    end
  end

  defp settle(store, tid, {:ok, {:yield, fun}}, mailbox)
       when is_function(fun, 0) or is_function(fun, 1) do
    Store.put_thread(store, tid, :ready, mailbox)
    Store.push(store, tid, {:continue, fun})
  end

  defp settle(store, tid, {:ok, {tag, _} = bad}, mailbox) when tag in [:receive, :yield] do
    crashed(store, tid, :error, {:bad_return, bad}, [], mailbox)
  end

  defp settle(store, tid, {:ok, _done}, mailbox) do
    Store.delete_thread(store, tid)
    Store.count(store, :finished)
    drop_mailbox(store, mailbox)
  end

  defp settle(store, tid, {:crashed, kind, reason, stack}, mailbox) do
    crashed(store, tid, kind, reason, stack, mailbox)
  end

  defp crashed(store, tid, kind, reason, stack, mailbox) do
    log_crash(tid, Exception.format(kind, reason, stack))
    Store.delete_thread(store, tid)
    Store.count(store, :crashed)
    drop_mailbox(store, mailbox)
  end

  # :logger (kernel), so the library needs no application beyond OTP's own.
  defp log_crash(tid, why), do: :logger.error("rtscope callback thread #{tid} crashed: " <> why)

  defp enqueue(:empty, msg), do: :queue.from_list([msg])
  defp enqueue(queue, msg), do: :queue.in(msg, queue)

  # Messages left for a thread that ended are dead letters.
  defp drop_mailbox(_store, :empty), do: :ok
  defp drop_mailbox(store, queue), do: Store.count(store, :dead_letters, :queue.len(queue))
end
