defmodule RtScope.CallbackThreads.Store do
  @moduledoc """
  The durable state of one callback-thread runtime: three ETS tables owned
  by the runtime's supervisor, so that they outlive a crashed Worker.

    * `queue` (`ordered_set`): the shared run queue, `{seq, tid, item}` in
      FIFO order, where the Receptor appends; `seq` is a node-wide strictly
      increasing integer, comparable with the items of the Worker's own
      queue (see `RtScope.CallbackThreads.Worker`). An item
      is `{:start, fun}`, `{:message, msg}`, `{:continue, fun}` or
      `{:deliver, fun, msg}`.
    * `threads` (`set`): one row per live thread, `{tid, state, mailbox}`;
      `state` is a receive callback (the thread waits for a message),
      `:ready` (an item of the thread is queued) or `:running` (its
      callback runs, or it ran in the Worker's current turn and the Worker
      holds its row until the turn ends: see
      `RtScope.CallbackThreads.Worker`). `mailbox` is `:empty` or an Erlang
      `:queue` of messages that arrived while the thread was not waiting.
      Only the Worker writes this table.
    * `meta` (`set`): the tid counter, the Worker's pid and the counters
      `finished`, `crashed` and `dead_letters`.

  A finished thread's row is deleted at once: ETS frees it immediately, so
  memory does not depend on a garbage collection of the Worker.
  """

  @enforce_keys [:queue, :threads, :meta]
  defstruct [:queue, :threads, :meta]

  @type t :: %__MODULE__{queue: :ets.tid(), threads: :ets.tid(), meta: :ets.tid()}
  @type tid :: non_neg_integer()
  @type item ::
          {:start, (tid() -> term())}
          | {:message, term()}
          | {:continue, function()}
          | {:deliver, function(), term()}

  @typedoc """
  A thread's row as the Worker holds it: `{state, mailbox}`, or for a
  thread that waits (its mailbox is then empty) just its receive callback.
  """
  @type row :: {term(), term()} | function()

  @counters [:finished, :crashed, :dead_letters]

  @doc "Create the tables, owned by the calling process (the runtime's supervisor)."
  @spec new() :: t()
  def new do
    store = %__MODULE__{
      # The Receptor pushes while the Worker pops: without write_concurrency
      # (a contention-adapting tree) the two serialise on one table lock,
      # which on a loaded machine made a 20,000-message burst 100x slower.
      queue: :ets.new(:rtscope_cbt_queue, [:ordered_set, :public, write_concurrency: true]),
      threads: :ets.new(:rtscope_cbt_threads, [:set, :public]),
      meta: :ets.new(:rtscope_cbt_meta, [:set, :public])
    }

    # update_counter returns the new value: the first tid is 0, as in the study.
    :ets.insert(store.meta, [{:next_tid, -1} | Enum.map(@counters, &{&1, 0})])
    store
  end

  @doc "A new thread id."
  @spec new_tid(t()) :: tid()
  def new_tid(%__MODULE__{meta: meta}), do: :ets.update_counter(meta, :next_tid, 1)

  @doc "Append an item for thread `tid` to the run queue."
  @spec push(t(), tid(), item()) :: true
  def push(%__MODULE__{queue: queue}, tid, item) do
    :ets.insert(queue, {:erlang.unique_integer([:monotonic]), tid, item})
  end

  @doc """
  Remove and return the oldest queued item, or `:empty`; with `before`, only an
  item older than that sequence number (the Worker's own queue holds the rest).
  """
  @spec pop(t(), integer() | nil) :: {tid(), item()} | :empty
  def pop(%__MODULE__{queue: queue}, before \\ nil) do
    case :ets.first(queue) do
      key when is_integer(key) and (before == nil or key < before) ->
        [{_, tid, item}] = :ets.take(queue, key)
        {tid, item}

      _ ->
        :empty
    end
  end

  @spec empty?(t()) :: boolean()
  def empty?(%__MODULE__{queue: queue}), do: :ets.first(queue) == :"$end_of_table"

  @doc """
  The row of thread `tid` (see `t:row/0`), marked `:running` with an empty
  mailbox in the table (the Worker keeps the copy), or `nil`.
  """
  @spec check_out(t(), tid()) :: row() | nil
  def check_out(%__MODULE__{threads: threads}, tid) do
    case :ets.lookup(threads, tid) do
      [{_, state, mailbox}] ->
        :ets.update_element(threads, tid, [{2, :running}, {3, :empty}])
        if is_function(state), do: state, else: {state, mailbox}

      [] ->
        nil
    end
  end

  @doc "Write back the rows the Worker kept, `%{tid => row}`."
  @spec put_threads(t(), %{tid() => row()}) :: true
  def put_threads(_store, rows) when rows == %{}, do: true

  def put_threads(%__MODULE__{threads: threads}, rows) do
    :ets.insert(threads, for({tid, row} <- rows, do: full_row(tid, row)))
  end

  @spec put_row(t(), tid(), row()) :: true
  def put_row(%__MODULE__{threads: threads}, tid, row),
    do: :ets.insert(threads, full_row(tid, row))

  defp full_row(tid, {state, mailbox}), do: {tid, state, mailbox}
  defp full_row(tid, fun) when is_function(fun), do: {tid, fun, :empty}

  @spec delete_thread(t(), tid()) :: true
  def delete_thread(%__MODULE__{threads: threads}, tid), do: :ets.delete(threads, tid)

  @doc "Threads `:running` or `:ready` when the Worker died (see `RtScope.CallbackThreads.Worker`)."
  @spec running(t()) :: [{tid(), term()}]
  def running(%__MODULE__{threads: threads}) do
    for state <- [:running, :ready],
        [tid, mb] <- :ets.match(threads, {:"$1", state, :"$2"}),
        do: {tid, mb}
  end

  @spec count(t(), :finished | :crashed | :dead_letters, integer()) :: integer()
  def count(%__MODULE__{meta: meta}, counter, by \\ 1), do: :ets.update_counter(meta, counter, by)

  @spec set_worker(t(), pid()) :: true
  def set_worker(%__MODULE__{meta: meta}, pid), do: :ets.insert(meta, {:worker, pid})

  @spec worker(t()) :: pid() | nil
  def worker(%__MODULE__{meta: meta}) do
    case :ets.lookup(meta, :worker) do
      [{:worker, pid}] -> pid
      [] -> nil
    end
  end

  @doc "Counters, sizes and the tables' memory in bytes."
  @spec stats(t()) :: %{atom() => non_neg_integer()}
  def stats(%__MODULE__{} = store) do
    counters = for c <- @counters, into: %{}, do: {c, :ets.lookup_element(store.meta, c, 2)}
    words = Enum.sum(for t <- [store.queue, store.threads, store.meta], do: :ets.info(t, :memory))

    Map.merge(counters, %{
      threads: :ets.info(store.threads, :size),
      queued: :ets.info(store.queue, :size),
      ets_bytes: words * :erlang.system_info(:wordsize)
    })
  end
end
