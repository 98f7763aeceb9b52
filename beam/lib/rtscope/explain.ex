defmodule RtScope.Explain do
  @moduledoc """
  Why the worst samples of a run took long, as the BEAM sees it (setting
  `explain`, docs/explain.md): the measuring process's garbage collections
  and the times it was scheduled out, inside each sample's interval.

  The measuring process is traced with `erlang:trace/3` (`garbage_collection`,
  `running`, `scheduler_id`, `monotonic_timestamp`: the timestamps are
  `:erlang.monotonic_time(:nanosecond)`, the clock the samples are timed
  with) into a tracer process. After each timed call the measuring process
  tells the tracer the call's interval; the tracer attributes the events of
  that interval and keeps the `k` worst samples only, so its memory is
  bounded by `k` and by the events of one call, whatever the run's length.
  A sample is attributed one sample late (trace messages may arrive after the
  measuring process's own message), and the last one after
  `erlang:trace_delivered/1`.

  Each explained sample: `%{index, value_ns, start_ns, scheduler, causes,
  self_ns, unexplained_ns}`; a cause `%{kind: "gc", name: "minor" | "major",
  count, duration_ns, heap_before, heap_after, intervals}`, the
  collections of one kind summed (heap sizes in words: heap + old heap +
  heap fragments such as received messages; the largest before one of them,
  and after the last) or `%{kind:
  "scheduled_out", name: "scheduled out", duration_ns, count, intervals}`
  (time not running, GC excluded), or `%{kind: "dirty_hop", name: "onto dirty"
  | "back", ...}` for such time around a dirty call: from leaving a normal
  scheduler until a dirty one took the process (the wait for a free dirty
  scheduler), and from leaving the dirty one until a normal one took it back,
  or `%{kind: "port", name: "port_command" | "port_control" | ...}` for such
  time that began inside a port operation: suspended on a busy port, or
  waiting for a synchronous operation's answer. `self_ns` is the rest: the process
  running its code (and whatever the OS took from its scheduler thread,
  which only the kernel side sees).

  For the kernel side (rtscope's tracefs trace, CLOCK_MONOTONIC), each sample
  also carries `os_start_ns`/`os_end_ns`: its interval on the OS monotonic
  clock (`erlang:system_info(os_monotonic_time_source)`: clock_gettime
  (CLOCK_MONOTONIC) on Linux), mapped with the offset Erlang monotonic − OS
  monotonic read right after the call (a bracket of two Erlang readings
  around one OS reading, `offset_bracket_ns` wide), and `on`: `[rel_ns,
  scheduler]` at the call's start and at each switch-in inside it (0: a
  dirty scheduler). A sample entering the worst so far is appended to
  `$RTSCOPE_MARKS` as `OS_START OS_END *` (every traced CPU), so the
  window keeper copies its trace while the ring buffer holds it. `stop/1`
  returns `%{samples, clock, os_pid, threads}`: the offset at the run's
  start and end (the tightest of several brackets), and the VM's OS threads
  (`/proc/self/task`: tid and name, `N_scheduler`, `N_dirty_cpu_sch`, ...).
  """

  @flags [:garbage_collection, :running, :scheduler_id, :monotonic_timestamp]
  # A process switched out inside one of these waits for the port: suspended on a busy port (its queue above
  # the high watermark), or for a synchronous operation's answer.
  @port_ops [:port_command, :port_control, :port_call, :port_connect, :port_close]
  # Every stretch of a cause up to this many (the kernel side carves its causes out of them; the store keeps 16).
  @intervals_kept 4096
  @clock_readings 9

  @doc "Starts tracing the calling process; returns the tracer."
  @spec start(pos_integer()) :: pid()
  def start(k) do
    me = self()

    tracer =
      spawn_link(fn ->
        loop(%{
          k: k,
          events: [],
          pending: nil,
          worst: [],
          index: 0,
          sched: nil,
          me: me,
          marks: System.get_env("RTSCOPE_MARKS"),
          clock_start: clock_offset(@clock_readings)
        })
      end)

    :erlang.trace(self(), true, [{:tracer, tracer} | @flags])
    tracer
  end

  @doc "The interval [t0, t1] of the sample just taken (after its clock reads); reads the clock offset."
  @spec sample(pid(), integer(), integer()) :: :ok
  def sample(tracer, t0, t1) do
    send(tracer, {:sample, t0, t1, offset_reading(), :erlang.system_info(:scheduler_id)})
    :ok
  end

  @doc "Stops tracing; returns the explained samples (largest first), the clock offsets and the VM's threads."
  @spec stop(pid()) :: map()
  def stop(tracer),
    do: RtScope.TraceSelf.stop(tracer, @flags -- [:scheduler_id, :monotonic_timestamp])

  @doc """
  Erlang monotonic time − OS monotonic time in ns, and the reading's uncertainty: `{offset, bracket}`
  (the OS clock read between two Erlang readings `bracket` ns apart), or nil without an OS monotonic source.
  """
  @spec offset_reading() :: {integer(), non_neg_integer()} | nil
  def offset_reading do
    a = :erlang.monotonic_time(:nanosecond)
    os = :erlang.system_info(:os_monotonic_time_source) |> Keyword.get(:time)
    b = :erlang.monotonic_time(:nanosecond)

    if is_integer(os),
      do: {div(a + b, 2) - :erlang.convert_time_unit(os, :native, :nanosecond), b - a}
  end

  @doc "The tightest of `n` offset readings, as `%{offset_ns, bracket_ns}` (nil: no OS monotonic source)."
  @spec clock_offset(pos_integer()) :: map() | nil
  def clock_offset(n) do
    case for(_ <- 1..n, r = offset_reading(), r != nil, do: r) do
      [] ->
        nil

      readings ->
        readings
        |> Enum.min_by(&elem(&1, 1))
        |> then(fn {o, w} -> %{offset_ns: o, bracket_ns: w} end)
    end
  end

  defp loop(st) do
    receive do
      {:sample, t0, t1, off, sched_now} ->
        st = settle(st)
        loop(%{st | pending: {st.index, t0, t1, off, sched_now}, index: st.index + 1})

      {:result, to, ref} ->
        st = settle(st)
        send(to, {ref, result(st)})

      ev when elem(ev, 0) == :trace_ts ->
        loop(%{st | events: List.wrap(event(ev)) ++ st.events})

      _other ->
        loop(st)
    end
  end

  # {ts, what, data}: the trace message in a form attribute/3 reads (a switch-out inside a port operation: also
  # {ts, :port_wait, operation} before it). With scheduler_id every message is
  # {:trace_ts, pid, tag, info_or_mfa, scheduler, ts}; without it the scheduler is missing.
  defp event(msg) do
    ts = elem(msg, tuple_size(msg) - 1)
    sched = if tuple_size(msg) == 6, do: elem(msg, 4), else: nil

    case {elem(msg, 2), elem(msg, 3)} do
      {tag, info} when tag in [:gc_minor_start, :gc_major_start] ->
        {ts, :gc_start, {tag, heap(info)}}

      {tag, info} when tag in [:gc_minor_end, :gc_major_end] ->
        {ts, :gc_end, heap(info)}

      {:in, _mfa} ->
        {ts, :in, sched}

      {:out, {m, f, _a}} when m in [:erlang, :erts_internal] and f in @port_ops ->
        # newest first, as the tracer keeps its events
        [{ts, :port_wait, Atom.to_string(f)}, {ts, :out, sched}]

      {:out, _mfa} ->
        {ts, :out, sched}

      _ ->
        {ts, :other, nil}
    end
  end

  defp heap(info) when is_list(info),
    do:
      Keyword.get(info, :heap_size, 0) + Keyword.get(info, :old_heap_size, 0) +
        Keyword.get(info, :mbuf_size, 0)

  defp heap(_), do: 0

  # Attribute the pending sample with the events so far; keep events from its end on.
  defp settle(%{pending: nil} = st), do: st

  defp settle(%{pending: {i, t0, t1, off, sched_now}} = st) do
    events = Enum.reverse(st.events)
    {explained, sched} = attribute(events, t0, t1, st.sched, sched_now)

    explained =
      Map.merge(
        explained,
        Map.merge(%{index: i, value_ns: t1 - t0, start_ns: t0}, on_os_clock(t0, t1, off))
      )

    # Events after t1 belong to the next sample (a GC begun in the pause is attributed there if it overlaps).
    rest = Enum.filter(events, fn {ts, _, _} -> ts > t1 end)
    last_before = Enum.filter(events, fn {ts, _, _} -> ts <= t1 end)
    open = open_gc(last_before)

    %{
      st
      | events: Enum.reverse(open ++ rest),
        pending: nil,
        worst: keep(st.worst, explained, st.k, st.marks),
        sched: sched
    }
  end

  defp on_os_clock(_t0, _t1, nil), do: %{os_start_ns: nil, os_end_ns: nil, offset_bracket_ns: nil}

  defp on_os_clock(t0, t1, {off, bracket}),
    do: %{os_start_ns: t0 - off, os_end_ns: t1 - off, offset_bracket_ns: bracket}

  defp result(st) do
    clock_end = clock_offset(@clock_readings)

    drift =
      if st.clock_start && clock_end,
        do: clock_end.offset_ns - st.clock_start.offset_ns

    %{
      samples: Enum.sort_by(st.worst, & &1.value_ns, :desc),
      clock: %{
        source: os_clock_source(),
        start: st.clock_start,
        end: clock_end,
        drift_ns: drift,
        time_warp_mode: :erlang.system_info(:time_warp_mode),
        time_correction: :erlang.system_info(:time_correction)
      },
      os_pid: List.to_integer(:os.getpid()),
      threads: vm_threads()
    }
  end

  defp os_clock_source do
    src = :erlang.system_info(:os_monotonic_time_source)

    case {Keyword.get(src, :function), Keyword.get(src, :clock_id)} do
      {nil, _} -> nil
      {f, nil} -> "#{f}()"
      {f, id} -> "#{f}(#{id})"
    end
  end

  # The VM's OS threads (Linux): [[tid, name]], e.g. "1_scheduler", "1_dirty_cpu_sch"; [] elsewhere.
  defp vm_threads do
    case File.ls("/proc/self/task") do
      {:ok, tids} ->
        for tid <- Enum.sort_by(tids, &String.to_integer/1),
            {:ok, comm} <- [File.read("/proc/self/task/#{tid}/comm")],
            do: [String.to_integer(tid), String.trim_trailing(comm, "\n")]

      _ ->
        []
    end
  end

  # A collection that started before t1 and has not ended: carried into the next window.
  defp open_gc(events) do
    Enum.reduce(events, [], fn
      {_, :gc_start, _} = e, _ -> [e]
      {_, :gc_end, _}, _ -> []
      _, acc -> acc
    end)
  end

  defp keep(worst, s, k, marks) when length(worst) < k, do: mark([s | worst], s, marks)

  defp keep(worst, s, _k, marks) do
    smallest = Enum.min_by(worst, & &1.value_ns)

    if s.value_ns > smallest.value_ns,
      do: mark([s | List.delete(worst, smallest)], s, marks),
      else: worst
  end

  # A sample entering the worst so far: its window, for the kernel side's window keeper (every traced CPU).
  defp mark(worst, %{os_start_ns: a, os_end_ns: b}, marks)
       when is_binary(marks) and is_integer(a) do
    _ = File.write(marks, "#{a} #{b} *\n", [:append])
    worst
  end

  defp mark(worst, _s, _marks), do: worst

  @doc false
  # The causes inside [t0, t1] from the events (in time order); the scheduler it ran on last. sched_now: the
  # scheduler the process reported right after t1.
  def attribute(events, t0, t1, sched0 \\ nil, sched_now \\ nil) do
    {gcs, outs, sched, _gc_open, _out_open} =
      Enum.reduce(events, {[], [], sched0, nil, nil}, fn
        {ts, :gc_start, {tag, before}}, {g, o, s, _, out} ->
          {g, o, s, {ts, tag, before}, out}

        {ts, :gc_end, aft}, {g, o, s, {ts0, tag, before}, out} ->
          {[{ts0, ts, tag, before, aft} | g], o, s, nil, out}

        {_ts, :port_wait, op}, {g, o, s, gc, {out, from, nil}} ->
          {g, o, s, gc, {out, from, op}}

        {ts, :out, sc}, {g, o, s, gc, _} ->
          {g, o, sc || s, gc, {ts, sc, nil}}

        {ts, :in, sc}, {g, o, _s, gc, {out, from, op}} ->
          {g, [{out, ts, stretch(from, sc, op)} | o], sc, gc, nil}

        {_ts, :in, sc}, {g, o, s, gc, out} ->
          {g, o, sc || s, gc, out}

        _, acc ->
          acc
      end)

    gc_spans = for {a, b, _, _, _} <- gcs, a < t1 and b > t0, do: {max(a, t0), min(b, t1)}

    gc_causes =
      for(
        {a, b, tag, before, aft} <- Enum.reverse(gcs),
        a < t1 and b > t0,
        do: {tag, max(a, t0), min(b, t1), before, aft}
      )
      |> Enum.group_by(&elem(&1, 0))
      |> Enum.map(fn {tag, list} ->
        %{
          kind: "gc",
          name: if(tag == :gc_major_start, do: "major", else: "minor"),
          count: length(list),
          duration_ns: Enum.reduce(list, 0, fn {_, x, y, _, _}, acc -> acc + y - x end),
          heap_before: list |> Enum.map(&elem(&1, 3)) |> Enum.max(),
          heap_after: list |> List.last() |> elem(4),
          intervals:
            list
            |> Enum.take(@intervals_kept)
            |> Enum.map(fn {_, x, y, _, _} -> [x - t0, y - t0] end)
        }
      end)

    # Each stretch not running (GC excluded): scheduled out, or a hop onto a dirty scheduler and back.
    out_causes =
      for(
        {a, b, what} <- Enum.reverse(outs),
        a < t1 and b > t0,
        do: {what, max(a, t0), min(b, t1)}
      )
      |> Enum.group_by(&elem(&1, 0))
      |> Enum.map(fn {{kind, name}, list} ->
        %{
          kind: kind,
          name: name,
          duration_ns:
            Enum.reduce(list, 0, fn {_, a, b}, acc ->
              acc + (b - a) - overlap({a, b}, gc_spans)
            end),
          count: length(list),
          intervals:
            list |> Enum.take(@intervals_kept) |> Enum.map(fn {_, a, b} -> [a - t0, b - t0] end)
        }
      end)
      |> Enum.filter(&(&1.duration_ns > 0))

    causes = Enum.sort_by(gc_causes ++ out_causes, & &1.duration_ns, :desc)
    explained = Enum.reduce(causes, 0, &(&1.duration_ns + &2))

    {%{
       scheduler: sched,
       causes: causes,
       self_ns: max(0, t1 - t0 - explained),
       unexplained_ns: 0,
       on: on_schedulers(events, t0, t1, sched0, sched_now)
     }, sched}
  end

  # [rel_ns, scheduler]: the scheduler the process was on (or last left) at t0, then each switch-in inside
  # [t0, t1] (scheduler 0: a dirty scheduler, e.g. a collection of a large heap). With no switch traced
  # before t0 (the process ran since tracing began), the process, running at t0 (it read the clock), was on
  # the scheduler it first left inside the interval, else still on the one it reported after t1.
  defp on_schedulers(events, t0, t1, sched0, sched_now) do
    before =
      Enum.reduce(events, sched0, fn
        {ts, what, sc}, _s when ts <= t0 and what in [:in, :out] and is_integer(sc) -> sc
        _, s -> s
      end)

    first_left =
      Enum.find_value(events, fn
        {ts, :out, sc} when ts > t0 and ts <= t1 and is_integer(sc) -> sc
        _ -> nil
      end)

    at_start = before || first_left || sched_now

    [[0, at_start] | for({ts, :in, sc} <- events, ts > t0 and ts < t1, do: [ts - t0, sc])]
  end

  # What a stretch not running was, from the port operation it began in and the schedulers it left and came
  # back on (0: a dirty one): waiting for a port, for a dirty scheduler to take a dirty call (a dirty NIF or
  # BIF, a collection of a large heap), the way back to a normal one, else scheduled out (its reductions used
  # up, waiting in receive, preempted).
  defp stretch(_from, _to, op) when is_binary(op), do: {"port", op}
  defp stretch(from, 0, nil) when from != 0, do: {"dirty_hop", "onto dirty"}
  defp stretch(0, to, nil) when is_integer(to) and to != 0, do: {"dirty_hop", "back"}
  defp stretch(_from, _to, nil), do: {"scheduled_out", "scheduled out"}

  defp overlap({a, b}, spans),
    do: Enum.reduce(spans, 0, fn {x, y}, acc -> acc + max(0, min(b, y) - max(a, x)) end)
end
