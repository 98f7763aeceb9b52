defmodule RtScope.CallbackThreads.Worker do
  @moduledoc """
  Runs callback threads, one callback at a time, in FIFO order.

  Two run queues feed the Worker: the shared one in ETS
  (`RtScope.CallbackThreads.Store`), where the Receptor appends what other
  processes ask for, and the Worker's own, two lists it passes from call to
  call, where everything a callback queues goes (`spawn/1`, `send/2`, a
  `:yield` continuation, a delivery to a thread that waits). A callback
  appends to an outbox in the process dictionary, which the Worker takes
  when the callback returns. Items carry a node-wide increasing number; the
  Worker takes the older head of the two queues, looking at the shared
  queue at least every 16 items of its own, so a request from outside
  waits behind at most that many items queued later. When a callback
  queued exactly one item and the own queue is otherwise empty, that item
  is the next one anyway: it runs at once without being queued (the direct
  path of a message to a thread that waits, or of a `:yield`). When both
  queues are empty the Worker blocks in `receive` until the Receptor wakes
  it: an idle Worker uses no CPU at all.

  Thread rows: every thread has a row in the Store's ETS table. The Worker
  runs in turns of at most 1,000 callbacks (between two looks at its
  mailbox; a turn also ends when the Worker runs out of work). A thread
  that runs in a turn is checked out once: its ETS row is marked `:running`
  and the Worker works on a copy in its own memory, written back in one
  insert when the turn ends. A switch between threads that already ran in
  the turn therefore touches no ETS table. A new thread's row is written
  as soon as its first callback returns.

  Fault handling:

    * a callback that raises, throws or exits is caught: that thread ends
      (counted as `crashed`, logged) and the queue goes on;
    * if the Worker itself dies (killed from outside, or a callback that
      kills its process), its supervisor restarts it; the shared queue and
      the threads' rows live in ETS tables owned by the supervisor, so what
      other processes queued is kept, and so is every thread that waits for
      a message and has not run in the Worker's current turn. Lost with the
      Worker, each counted as crashed and logged, are the thread whose
      callback was running, every thread that ran in the current turn (even
      if it waits again: its row says `:running` until the turn ends, the
      price of switches without ETS writes) and the threads with an item in
      the Worker's own queue. Lost uncounted are the messages callbacks had
      sent that were not yet delivered, the messages kept for the threads
      lost, and threads a callback spawned that had not started yet. A
      Worker killed from outside between taking an item from the shared
      queue and running it loses that one item.

  Memory: when it goes idle after 1,000 callbacks or more since its last
  collection, or with a heap grown beyond 1,598 words, the Worker collects
  its garbage, so the memory that finished callbacks used is given back
  rather than kept until some later collection; a Worker that handles a
  trickle of work does not collect on every wake-up. While busy (a turn
  ended with work left) it runs with a minimum heap of 4,181 words (33 KB
  on 64 bits) and collects less often; going idle, it returns to the VM's
  default and collects.
  """

  use GenServer

  alias RtScope.CallbackThreads.Store

  # Callbacks run per turn before the Worker looks at its own mailbox
  # again (keeps calls such as await_idle answerable under endless work).
  # A turn is also the window in which thread rows are kept in process memory.
  @slice 1000
  # Idle garbage collection: after this many callbacks, or when the heap grew
  # beyond this many words (four growth steps above the default 233).
  @gc_callbacks 1000
  @gc_words 1598
  # Minimum heap while busy (a turn ended with work left). In the ping-pong
  # of RtScope.Tasks, at the default 233 words the Worker collected once per
  # 13 switches and a switch cost ~165 ns; with this heap once per 60 and ~145 ns.
  @busy_heap_words 4181

  # Look at the shared queue at least once per this many items of the Worker's own queue.
  @own_run 16

  # Process-dictionary keys: what callbacks reach without an argument.
  # @out: items the running callback queued, newest first ({seq, tid, item});
  # present (a list) only in the Worker, so it also tells a callback from any other code.
  @out :"$rtscope_callback_thread_out"
  @tid :"$rtscope_callback_thread_tid"
  @store :"$rtscope_callback_thread_store"

  @spec start_link(Store.t()) :: GenServer.on_start()
  def start_link(%Store{} = store), do: GenServer.start_link(__MODULE__, store)

  @doc false
  # Inside a callback (the Worker's process): queue an item on the Worker's own
  # run queue. Returns :error anywhere else.
  @spec push(Store.tid(), Store.item()) :: :ok | :error
  def push(tid, item) do
    # :erlang.get/put rather than Process.get/put: this runs once per send.
    case :erlang.get(@out) do
      out when is_list(out) ->
        :erlang.put(@out, [{:erlang.unique_integer([:monotonic]), tid, item} | out])
        :ok

      :undefined ->
        :error
    end
  end

  @doc false
  # Inside a callback: {store, tid of the running thread}; nil anywhere else.
  @spec current() :: {Store.t(), Store.tid()} | nil
  def current do
    case Process.get(@store) do
      nil -> nil
      store -> {store, Process.get(@tid)}
    end
  end

  @impl true
  def init(store) do
    Store.set_worker(store, self())
    recover(store)
    Process.put(@store, store)
    Process.put(@out, [])
    Kernel.send(self(), :wake)
    {:ok, %{store: store, own: {[], []}, waiters: [], since_gc: 0, busy: false}}
  end

  # Threads left :running or :ready by a Worker that died: their callback was in
  # flight, they had run in its last turn, or their next item was in its own queue.
  defp recover(store) do
    for {tid, mailbox} <- Store.running(store) do
      log_crash(
        tid,
        "the worker died while it ran, after it ran in the same turn, or with its next callback queued"
      )

      Store.delete_thread(store, tid)
      Store.count(store, :crashed)
      drop_mailbox(store, mailbox)
    end
  end

  @impl true
  def handle_info(:wake, state) do
    flush_wakes()
    {result, own, touched, left} = run(state.store, state.own, %{}, @slice, 0)
    Store.put_threads(state.store, touched)
    state = %{state | own: own, since_gc: state.since_gc + @slice - left}

    case result do
      :more ->
        Kernel.send(self(), :wake)
        {:noreply, busy(state)}

      :empty ->
        {:noreply, idle(state)}
    end
  end

  def handle_info(_other, state), do: {:noreply, state}

  @impl true
  def handle_call(:await_idle, from, state) do
    if Store.empty?(state.store) and state.own == {[], []} do
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

  defp busy(%{busy: true} = state), do: state

  defp busy(state) do
    Process.flag(:min_heap_size, @busy_heap_words)
    %{state | busy: true}
  end

  defp idle(state) do
    Enum.each(state.waiters, &GenServer.reply(&1, :ok))

    if state.busy do
      {:min_heap_size, words} = :erlang.system_info(:min_heap_size)
      Process.flag(:min_heap_size, words)
    end

    if state.busy or state.since_gc >= @gc_callbacks or heap_words() > @gc_words do
      :erlang.garbage_collect()
      %{state | waiters: [], since_gc: 0, busy: false}
    else
      %{state | waiters: []}
    end
  end

  defp heap_words do
    {:total_heap_size, words} = Process.info(self(), :total_heap_size)
    words
  end

  # One turn: up to `budget` callbacks. `own` is the Worker's own run queue
  # ({front, rear} lists of {seq, tid, item}); `touched` holds the rows of
  # the threads that ran in this turn, whose ETS rows say :running until the
  # turn ends (see the moduledoc): tid => {state, mailbox} as in ETS, or just
  # the receive callback of a thread that waits with an empty mailbox (the
  # common case, one tuple less per switch).
  defp run(_store, own, touched, 0, _own_left), do: {:more, own, touched, 0}

  defp run(store, own, touched, budget, own_left) do
    case next(store, own, own_left) do
      :empty ->
        {:empty, own, touched, budget}

      {tid, item, own, own_left} ->
        touched = step(store, touched, tid, item)
        continue(store, own, :erlang.put(@out, []), touched, budget - 1, own_left)
    end
  end

  # The direct path: when the callback just run queued one item and the own
  # queue is otherwise empty, that item is the next one anyway (unless it is
  # time to look at the shared queue): run it without queueing it.
  defp continue(store, {[], []} = own, [{_seq, tid, item}], touched, budget, own_left)
       when budget > 0 and own_left > 0 do
    touched = step(store, touched, tid, item)
    continue(store, own, :erlang.put(@out, []), touched, budget - 1, own_left - 1)
  end

  defp continue(store, own, out, touched, budget, own_left),
    do: run(store, append(own, out), touched, budget, own_left)

  # The older head of the two run queues; the shared one is looked at when the
  # Worker's own queue is empty or `own_left` items of it have run since the last look.
  defp next(store, own, own_left) do
    case pop(own) do
      {{_seq, tid, item}, rest} when own_left > 0 ->
        {tid, item, rest, own_left - 1}

      {{seq, tid, item}, rest} ->
        case Store.pop(store, seq) do
          :empty -> {tid, item, rest, @own_run - 1}
          {shared_tid, shared_item} -> {shared_tid, shared_item, own, 0}
        end

      :empty ->
        case Store.pop(store) do
          :empty -> :empty
          {tid, item} -> {tid, item, own, @own_run}
        end
    end
  end

  defp pop({[item | front], rear}), do: {item, {front, rear}}
  defp pop({[], []}), do: :empty
  defp pop({[], [item]}), do: {item, {[], []}}
  defp pop({[], rear}), do: pop({:lists.reverse(rear), []})

  # `out` is newest first, as the rear list. Most callbacks queue one item or none.
  defp append(own, []), do: own
  defp append({front, rear}, [item]), do: {front, [item | rear]}
  defp append({front, rear}, out), do: {front, out ++ rear}

  # The row of a thread: this turn's copy, or the ETS row, which is then
  # marked :running (so a Worker crash counts the thread) and copied here.
  defp fetch(store, touched, tid) do
    case touched do
      %{^tid => row} -> row
      _ -> Store.check_out(store, tid)
    end
  end

  defp step(store, touched, tid, {:start, fun}) do
    Store.put_row(store, tid, {:running, :empty})

    # A new thread's row is replaced at once rather than at the turn's end:
    # a turn's worth of :running rows freed only after the rows that replace
    # them left ETS with about 6 bytes more per waiting thread.
    case Map.pop(invoke(store, touched, tid, :empty, fun, tid), tid) do
      {nil, touched} ->
        touched

      {row, touched} ->
        Store.put_row(store, tid, row)
        touched
    end
  end

  defp step(store, touched, tid, {:message, msg}) do
    case fetch(store, touched, tid) do
      nil ->
        Store.count(store, :dead_letters)
        touched

      fun when is_function(fun) ->
        invoke(store, touched, tid, :empty, fun, msg)

      {thread_state, mailbox} ->
        # Not waiting yet: keep the message until the thread returns {:receive, f}.
        Map.put(touched, tid, {thread_state, enqueue(mailbox, msg)})
    end
  end

  defp step(store, touched, tid, {:continue, fun}) do
    case fetch(store, touched, tid) do
      {:ready, mailbox} -> invoke(store, touched, tid, mailbox, fun, tid)
      _ -> touched
    end
  end

  defp step(store, touched, tid, {:deliver, fun, msg}) do
    case fetch(store, touched, tid) do
      {:ready, mailbox} -> invoke(store, touched, tid, mailbox, fun, msg)
      _ -> touched
    end
  end

  # Run one callback; only the call itself is inside the try (a callback
  # that raises ends its own thread), its result is settled outside it.
  defp invoke(store, touched, tid, mailbox, fun, arg) do
    :erlang.put(@tid, tid)

    try do
      call(fun, arg, tid)
    catch
      kind, reason -> crashed(store, touched, tid, kind, reason, __STACKTRACE__, mailbox)
    else
      result -> settle(store, touched, tid, result, mailbox)
    end
  end

  # `arg` is the message (receive callbacks), or the tid (start and continue callbacks).
  defp call(fun, arg, tid) when is_function(fun, 2), do: fun.(arg, tid)
  defp call(fun, arg, _tid) when is_function(fun, 1), do: fun.(arg)
  defp call(fun, _arg, _tid), do: fun.()

  defp settle(_store, touched, tid, {:receive, fun}, mailbox)
       when is_function(fun, 1) or is_function(fun, 2) do
    case mailbox do
      :empty ->
        Map.put(touched, tid, fun)

      messages ->
        {{:value, msg}, rest} = :queue.out(messages)
        push(tid, {:deliver, fun, msg})
        Map.put(touched, tid, {:ready, if(:queue.is_empty(rest), do: :empty, else: rest)})
    end
  end

  defp settle(_store, touched, tid, {:yield, fun}, mailbox)
       when is_function(fun, 0) or is_function(fun, 1) do
    push(tid, {:continue, fun})
    Map.put(touched, tid, {:ready, mailbox})
  end

  defp settle(store, touched, tid, {tag, _} = bad, mailbox) when tag in [:receive, :yield] do
    crashed(store, touched, tid, :error, {:bad_return, bad}, [], mailbox)
  end

  defp settle(store, touched, tid, _done, mailbox) do
    Store.delete_thread(store, tid)
    Store.count(store, :finished)
    drop_mailbox(store, mailbox)
    Map.delete(touched, tid)
  end

  defp crashed(store, touched, tid, kind, reason, stack, mailbox) do
    log_crash(tid, Exception.format(kind, reason, stack))
    Store.delete_thread(store, tid)
    Store.count(store, :crashed)
    drop_mailbox(store, mailbox)
    Map.delete(touched, tid)
  end

  # :logger (kernel), so the library needs no application beyond OTP's own.
  defp log_crash(tid, why), do: :logger.error("rtscope callback thread #{tid} crashed: " <> why)

  defp enqueue(:empty, msg), do: :queue.from_list([msg])
  defp enqueue(queue, msg), do: :queue.in(msg, queue)

  # Messages left for a thread that ended are dead letters.
  defp drop_mailbox(_store, :empty), do: :ok
  defp drop_mailbox(store, queue), do: Store.count(store, :dead_letters, :queue.len(queue))
end
