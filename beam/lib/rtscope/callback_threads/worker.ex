defmodule RtScope.CallbackThreads.Worker do
  @moduledoc """
  Runs callback threads, one callback at a time, in FIFO order.

  Two run queues feed the Worker: the shared one in ETS
  (`RtScope.CallbackThreads.Store`), where the Receptor appends what other
  processes ask for, and the Worker's own, in its process memory, where
  everything a callback queues goes (`spawn/1`, `send/2`, a `:yield`
  continuation, a delivery to a thread that waits). A switch between two
  threads of one runtime is then a function call in this process with no
  trip through a shared table. Items carry a node-wide increasing number;
  the Worker takes the older head of the two queues, looking at the shared
  queue at least every 16 items of its own, so a request from outside
  waits behind at most that many items queued later. When both are empty
  it blocks in `receive` until the Receptor wakes it: an idle Worker uses
  no CPU at all.

  Fault handling:

    * a callback that raises, throws or exits is caught: that thread ends
      (counted as `crashed`, logged) and the queue goes on;
    * if the Worker itself dies (killed from outside, or a callback that
      kills its process), its supervisor restarts it; the shared queue and
      the threads live in ETS tables owned by the supervisor, so what other
      processes queued is kept, and so is every thread that waits for a
      message. Lost with the Worker are the thread whose callback was
      running and the threads with an item in the Worker's own queue (each
      marked crashed), and the messages callbacks had sent that were not yet
      delivered (dead letters, uncounted). A Worker killed from outside
      between taking an item from the shared queue and running it loses
      that one item.

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

  # Look at the shared queue at least once per this many items of the Worker's own queue.
  @own_run 16

  @context :"$rtscope_callback_thread"
  # The Worker's own run queue, an Erlang :queue of {seq, tid, item}.
  @own :"$rtscope_callback_thread_queue"

  @spec start_link(Store.t()) :: GenServer.on_start()
  def start_link(%Store{} = store), do: GenServer.start_link(__MODULE__, store)

  @doc false
  def context_key, do: @context

  @doc false
  # Inside a callback (the Worker's process): queue an item on the Worker's own run queue.
  @spec push_own(Store.tid(), Store.item()) :: :ok
  def push_own(tid, item) do
    Process.put(
      @own,
      :queue.in({:erlang.unique_integer([:monotonic]), tid, item}, Process.get(@own))
    )

    :ok
  end

  @impl true
  def init(store) do
    Store.set_worker(store, self())
    recover(store)
    Process.put(@context, {store, nil})
    Process.put(@own, :queue.new())
    Kernel.send(self(), :wake)
    {:ok, %{store: store, waiters: [], since_gc: 0}}
  end

  # Threads left :running or :ready by a Worker that died: their callback was in
  # flight, or their next item was in its own queue.
  defp recover(store) do
    for {tid, mailbox} <- Store.running(store) do
      log_crash(tid, "the worker died while running it or with its next callback queued")
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
    if Store.empty?(state.store) and :queue.is_empty(Process.get(@own)) do
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

  defp run(store, budget), do: run(store, budget, 0)

  defp run(_store, 0, _own_left), do: :more

  defp run(store, budget, own_left) do
    case next(store, Process.get(@own), own_left) do
      :empty ->
        {:empty, budget}

      {tid, item, own_left} ->
        step(store, tid, item)
        run(store, budget - 1, own_left)
    end
  end

  # The older head of the two run queues; the shared one is looked at when the
  # Worker's own queue is empty or `own_left` items of it have run since the last look.
  defp next(store, own, own_left) do
    case :queue.peek(own) do
      {:value, {_seq, tid, item}} when own_left > 0 ->
        Process.put(@own, :queue.drop(own))
        {tid, item, own_left - 1}

      {:value, {seq, tid, item}} ->
        case Store.pop(store, seq) do
          :empty ->
            Process.put(@own, :queue.drop(own))
            {tid, item, @own_run - 1}

          {shared_tid, shared_item} ->
            {shared_tid, shared_item, 0}
        end

      :empty ->
        case Store.pop(store) do
          :empty -> :empty
          {tid, item} -> {tid, item, @own_run}
        end
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
        push_own(tid, {:deliver, fun, msg})
    end
  end

  defp settle(store, tid, {:ok, {:yield, fun}}, mailbox)
       when is_function(fun, 0) or is_function(fun, 1) do
    Store.put_thread(store, tid, :ready, mailbox)
    push_own(tid, {:continue, fun})
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
