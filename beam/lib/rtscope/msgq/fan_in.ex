defmodule RtScope.MsgQ.FanIn do
  @moduledoc """
  `msgq fan_in`: many long-lived processes sending repeatedly to one busy
  receiver, the case study 3 predicted a larger on_heap/off_heap difference
  for but never ran.

  The receiver is the measuring process (spawn options under test,
  including `message_queue_data`). It starts `senders` processes that live
  for the whole run, then makes `iterations` rounds (default 1): it
  releases all senders together and takes the `senders × messages`
  messages of the round. In a round each sender sends `messages` messages
  as fast as it can (or one every `send_interval_ms`):

      {:rtscope_msg, send_time_ns, sender, seq, payload}

  with `payload` a tuple of `message_words` small integers (so a message is
  `message_words + 7` words on the heap). For each message taken, the
  receiver reads the clock, then works: `1..work |> Enum.reduce(&+/2)`
  (the exec `sum`), so its queue grows when the senders outpace it.

  Samples, one per message: `latency` (ns) = time taken out of the queue −
  send time (queueing included), `sender` and `seq` (which message; a
  sender's seq runs on across rounds).

  Trailer counters: `messages` (all rounds), `duration_ns` (release of the
  senders to the last message taken, summed over rounds),
  `throughput_msgs_per_s` (messages / duration), `peak_queue_len` and
  `peak_receiver_memory` (bytes; `Process.info(self(), [:message_queue_len,
  :memory])` read by the receiver every `queue_sample_every` messages,
  `queue_readings` of them), `receiver_minor_gcs` and `receiver_major_gcs`
  (`RtScope.GcCounter`), `memory_total_delta`
  (bytes, `:erlang.memory(:total)` at the end minus at the release).
  """

  alias RtScope.{Exec.Workloads, GcCounter, Options, SpawnOpts}

  @keys [
    :senders,
    :messages,
    :iterations,
    :message_words,
    :work,
    :send_interval_ms,
    :queue_sample_every
  ]

  @columns [
    %{name: "latency", unit: "ns", type: "i64"},
    %{name: "sender", unit: "", type: "i64"},
    %{name: "seq", unit: "", type: "i64"}
  ]

  @doc "The option names of this variant."
  def option_keys, do: @keys

  @doc false
  def validate(opts) do
    with {:ok, senders} <- Options.integer(opts, :senders, 100, 1),
         {:ok, messages} <- Options.integer(opts, :messages, 100, 1),
         {:ok, iterations} <- Options.integer(opts, :iterations, 1, 1),
         {:ok, words} <- Options.integer(opts, :message_words, 16, 0),
         {:ok, work} <- Options.integer(opts, :work, 1000, 0),
         {:ok, interval} <- Options.integer(opts, :send_interval_ms, 0, 0),
         {:ok, every} <- Options.integer(opts, :queue_sample_every, 100, 1) do
      {:ok,
       %{
         senders: senders,
         messages: messages,
         iterations: iterations,
         message_words: words,
         work: work,
         send_interval_ms: interval,
         queue_sample_every: every
       }}
    end
  end

  @doc false
  def spec(cfg) do
    p = Map.take(cfg, @keys)

    %{
      workload: "msgq",
      variant: "fan_in",
      columns: @columns,
      params: p,
      requested: cfg.requested,
      spawn_options: SpawnOpts.spawn_options(cfg.requested),
      body: fn collector -> receive_all(collector, p) end
    }
  end

  defp receive_all(collector, p) do
    observed = SpawnOpts.observe()
    me = self()
    payload = List.to_tuple(Enum.to_list(1..p.message_words//1))

    senders =
      for id <- 1..p.senders do
        # Linked: if the receiver dies, its senders go with it.
        spawn_link(fn -> sender(me, id, 1, p, payload) end)
      end

    per_round = p.senders * p.messages
    gc = GcCounter.start_self()
    mem0 = :erlang.memory(:total)

    {duration, {peak_q, peak_mem, readings}} =
      Enum.reduce(1..p.iterations, {0, {0, 0, 0}}, fn _round, {busy, peaks} ->
        t0 = :erlang.monotonic_time(:nanosecond)
        Enum.each(senders, &send(&1, :go))
        peaks = receive_loop(collector, per_round, p.work, p.queue_sample_every, peaks)
        {busy + :erlang.monotonic_time(:nanosecond) - t0, peaks}
      end)

    mem1 = :erlang.memory(:total)
    gcs = GcCounter.stop_self(gc)
    duration = max(duration, 1)
    total = per_round * p.iterations

    %{
      process: observed,
      counters: %{
        messages: total,
        duration_ns: duration,
        throughput_msgs_per_s: div(total * 1_000_000_000, duration),
        peak_queue_len: peak_q,
        peak_receiver_memory: peak_mem,
        queue_readings: readings,
        receiver_minor_gcs: gcs.minor,
        receiver_major_gcs: gcs.major,
        memory_total_delta: mem1 - mem0
      },
      notes: []
    }
  end

  # A long-lived sender: one burst of `messages` messages per :go, `iterations` times.
  defp sender(to, id, round, p, payload) do
    receive do
      :go ->
        first = (round - 1) * p.messages + 1
        send_loop(to, id, first, first + p.messages - 1, payload, p.send_interval_ms)
        if round < p.iterations, do: sender(to, id, round + 1, p, payload)
    end
  end

  defp send_loop(_to, _id, seq, last, _payload, _interval) when seq > last, do: :ok

  defp send_loop(to, id, seq, last, payload, interval) do
    send(to, {:rtscope_msg, :erlang.monotonic_time(:nanosecond), id, seq, payload})
    if interval > 0, do: :timer.sleep(interval)
    send_loop(to, id, seq + 1, last, payload, interval)
  end

  defp receive_loop(_collector, 0, _work, _every, peaks), do: peaks

  defp receive_loop(collector, left, work, every, peaks) do
    receive do
      {:rtscope_msg, sent, id, seq, _payload} ->
        now = :erlang.monotonic_time(:nanosecond)
        if work > 0, do: Workloads.sum(work)
        send(collector, {:s, now - sent, id, seq})
        peaks = if rem(left, every) == 0, do: read_queue(peaks), else: peaks
        receive_loop(collector, left - 1, work, every, peaks)
    end
  end

  defp read_queue({peak_q, peak_mem, n}) do
    [message_queue_len: q, memory: mem] = Process.info(self(), [:message_queue_len, :memory])
    {max(peak_q, q), max(peak_mem, mem), n + 1}
  end
end
