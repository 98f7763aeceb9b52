defmodule RtScope.CallbackThreadsTest do
  use ExUnit.Case, async: true

  import ExUnit.CaptureLog

  alias RtScope.CallbackThreads, as: CT

  doctest RtScope.CallbackThreads

  setup do
    rt = CT.new()
    on_exit(fn -> :ok end)
    %{rt: rt}
  end

  defp collect(n, timeout \\ 2000) do
    for _ <- 1..n do
      receive do
        {:got, x} -> x
      after
        timeout -> flunk("timed out waiting for message #{inspect(n)}")
      end
    end
  end

  describe "ordering" do
    test "threads run in spawn order, tids count from 0", %{rt: rt} do
      parent = self()
      tids = for _ <- 1..200, do: CT.spawn(rt, fn tid -> Kernel.send(parent, {:got, tid}) end)
      assert tids == Enum.to_list(0..199)
      assert collect(200) == tids
    end

    test "the study's raw {:spawn, fun} message works", %{rt: rt} do
      parent = self()
      Kernel.send(rt, {:spawn, fn tid -> Kernel.send(parent, {:got, {:foo, tid}}) end})
      Kernel.send(rt, {:spawn, fn tid -> Kernel.send(parent, {:got, {:bar, tid}}) end})
      assert collect(2) == [{:foo, 0}, {:bar, 1}]
    end

    test "yielding threads interleave round-robin", %{rt: rt} do
      parent = self()

      loop = fn name ->
        step = fn step, i ->
          Kernel.send(parent, {:got, {name, i}})
          if i < 2, do: {:yield, fn -> step.(step, i + 1) end}, else: :done
        end

        fn _tid -> step.(step, 0) end
      end

      # Spawned from one callback, so both are queued before either runs.
      CT.spawn(rt, fn _ ->
        CT.spawn(loop.(:a))
        CT.spawn(loop.(:b))
      end)

      assert collect(6) == [a: 0, b: 0, a: 1, b: 1, a: 2, b: 2]
    end

    test "requests from outside are not starved by threads that keep yielding", %{rt: rt} do
      parent = self()

      spin = fn spin, i ->
        if rem(i, 1000) == 0, do: Kernel.send(parent, {:spun, i})
        {:yield, fn -> spin.(spin, i + 1) end}
      end

      CT.spawn(rt, fn _ -> spin.(spin, 0) end)
      assert_receive {:spun, 1000}, 2000

      # The spinning thread's items never leave the Worker's own queue; the shared one is still served.
      CT.spawn(rt, fn tid -> Kernel.send(parent, {:got, tid}) end)
      assert collect(1) == [1]
    end
  end

  describe "messages" do
    test "ping-pong between two threads", %{rt: rt} do
      parent = self()

      pong = fn pong ->
        {:receive,
         fn {:ping, from, n}, _tid ->
           CT.send(from, {:pong, n})
           pong.(pong)
         end}
      end

      b = CT.spawn(rt, fn _ -> pong.(pong) end)

      ping = fn ping, n ->
        {:receive,
         fn {:pong, ^n} ->
           if n == 100 do
             Kernel.send(parent, {:got, n})
           else
             CT.send(b, {:ping, CT.self_tid(), n + 1})
             ping.(ping, n + 1)
           end
         end}
      end

      CT.spawn(rt, fn tid ->
        CT.send(b, {:ping, tid, 0})
        ping.(ping, 0)
      end)

      assert collect(1) == [100]
      :ok = CT.await_idle(rt)
      # b still waits for a message; a has finished.
      assert %{threads: 1, queued: 0, crashed: 0} = CT.info(rt)
    end

    test "messages sent before the thread waits are kept, in order", %{rt: rt} do
      parent = self()

      drain = fn drain, left ->
        {:receive,
         fn msg ->
           Kernel.send(parent, {:got, msg})
           if left > 1, do: drain.(drain, left - 1), else: :done
         end}
      end

      CT.spawn(rt, fn tid ->
        for i <- 1..5, do: CT.send(tid, i)
        # Not waiting yet: the five messages are buffered while it yields.
        {:yield, fn -> drain.(drain, 5) end}
      end)

      assert collect(5) == [1, 2, 3, 4, 5]
    end

    test "send/3 from another process reaches a waiting thread", %{rt: rt} do
      parent = self()

      tid =
        CT.spawn(rt, fn _ ->
          {:receive, fn msg, tid -> Kernel.send(parent, {:got, {tid, msg}}) end}
        end)

      :ok = CT.await_idle(rt)
      CT.send(rt, tid, :hello)
      assert collect(1) == [{tid, :hello}]
    end

    test "messages to finished threads are counted as dead letters", %{rt: rt} do
      tid = CT.spawn(rt, fn _ -> :done end)
      :ok = CT.await_idle(rt)
      CT.send(rt, tid, :late)
      CT.send(rt, tid, :later)
      :ok = CT.await_idle(rt)
      assert %{dead_letters: 2, finished: 1, threads: 0} = CT.info(rt)
    end

    test "inside-only functions refuse to run outside a callback" do
      assert_raise ArgumentError, ~r/only inside a callback thread/, fn -> CT.send(0, :x) end

      assert_raise ArgumentError, ~r/only inside a callback thread/, fn ->
        CT.spawn(fn _ -> :ok end)
      end

      assert_raise ArgumentError, ~r/fn tid/, fn -> CT.spawn(self(), fn -> :ok end) end
    end
  end

  describe "faults" do
    test "a crashing callback ends only its own thread", %{rt: rt} do
      parent = self()

      log =
        capture_log(fn ->
          CT.spawn(rt, fn tid -> Kernel.send(parent, {:got, tid}) end)
          CT.spawn(rt, fn _ -> raise "boom" end)
          CT.spawn(rt, fn _ -> exit(:bye) end)
          CT.spawn(rt, fn _ -> {:receive, :not_a_function} end)
          CT.spawn(rt, fn tid -> Kernel.send(parent, {:got, tid}) end)
          assert collect(2) == [0, 4]
          :ok = CT.await_idle(rt)
        end)

      assert log =~ "callback thread 1 crashed"
      assert log =~ "boom"
      assert log =~ "bad_return"
      assert %{crashed: 3, finished: 2, threads: 0} = CT.info(rt)
    end

    test "a killed Worker is restarted and queued work is not lost", %{rt: rt} do
      parent = self()
      worker = CT.worker(rt)

      log =
        capture_log(fn ->
          # Thread 0 blocks the Worker (never do this in real code) until it is killed.
          CT.spawn(rt, fn _ ->
            Kernel.send(parent, {:got, :blocking})
            receive do: (:never -> :ok)
          end)

          assert collect(1) == [:blocking]

          queued =
            for _ <- 1..50, do: CT.spawn(rt, fn tid -> Kernel.send(parent, {:got, tid}) end)

          Process.exit(worker, :kill)
          assert collect(50) == queued
        end)

      assert log =~ "callback thread 0 crashed: the worker died"
      new_worker = CT.worker(rt)
      assert is_pid(new_worker) and new_worker != worker
      assert %{crashed: 1, finished: 50, threads: 0, queued: 0} = CT.info(rt)
    end

    test "threads with a continuation queued when the Worker dies are marked crashed", %{rt: rt} do
      parent = self()

      log =
        capture_log(fn ->
          # Thread 0 yields once (its continuation goes to the Worker's own queue),
          # thread 1, queued after it, kills the Worker before the continuation runs.
          CT.spawn(rt, fn _ ->
            CT.spawn(fn _ -> Process.exit(self(), :kill) end)
            {:yield, fn -> Kernel.send(parent, {:got, :continued}) end}
          end)

          refute_receive {:got, :continued}, 300
          CT.spawn(rt, fn tid -> Kernel.send(parent, {:got, tid}) end)
          assert collect(1) == [2]
        end)

      assert log =~ "callback thread 0 crashed: the worker died"
      assert %{crashed: 2, finished: 1, threads: 0} = CT.info(rt)
    end

    test "a thread that ran in the Worker's last turn is lost with it; one that only waited is kept",
         %{rt: rt} do
      parent = self()

      echo = fn echo ->
        {:receive,
         fn msg ->
           Kernel.send(parent, {:got, msg})
           echo.(echo)
         end}
      end

      log =
        capture_log(fn ->
          a = CT.spawn(rt, fn _ -> echo.(echo) end)
          b = CT.spawn(rt, fn _ -> echo.(echo) end)
          # Idle: both wait, their rows are in ETS.
          :ok = CT.await_idle(rt)

          # One turn: a gets a message and waits again, then thread 3 kills the Worker.
          CT.spawn(rt, fn _ ->
            CT.send(a, :before_the_crash)
            CT.spawn(fn _ -> Process.exit(self(), :kill) end)
          end)

          assert collect(1) == [:before_the_crash]
          CT.send(rt, b, :after_the_crash)
          assert collect(1) == [:after_the_crash]
          CT.send(rt, a, :too_late)
          :ok = CT.await_idle(rt)
          send(parent, {:tids, a, b})
        end)

      assert_received {:tids, a, b}
      assert log =~ "callback thread #{a} crashed: the worker died"
      assert log =~ "callback thread 3 crashed: the worker died"
      refute log =~ "callback thread #{b} crashed"
      assert %{threads: 1, crashed: 2, finished: 1, dead_letters: 1} = CT.info(rt)
    end

    test "a callback that kills the Worker does not take the queue down", %{rt: rt} do
      parent = self()

      capture_log(fn ->
        CT.spawn(rt, fn _ -> Process.exit(self(), :kill) end)
        later = for _ <- 1..20, do: CT.spawn(rt, fn tid -> Kernel.send(parent, {:got, tid}) end)
        assert collect(20) == later
      end)

      assert %{crashed: 1, finished: 20} = CT.info(rt)
    end
  end

  describe "resources" do
    test "finished threads' memory is released without outside help", %{rt: rt} do
      :ok = CT.await_idle(rt)
      worker = CT.worker(rt)
      {:memory, base_worker} = Process.info(worker, :memory)
      %{ets_bytes: base_ets} = CT.info(rt)

      # 5,000 threads that wait, get a message, build some garbage and finish; twice.
      round = fn ->
        tids =
          for _ <- 1..5_000,
              do: CT.spawn(rt, fn _ -> {:receive, fn n -> Enum.to_list(1..n) end} end)

        :ok = CT.await_idle(rt)
        assert %{threads: 5_000, ets_bytes: parked} = CT.info(rt)
        assert parked > base_ets + 5_000 * 50
        Enum.each(tids, &CT.send(rt, &1, 100))
        :ok = CT.await_idle(rt)
        assert %{threads: 0, queued: 0, ets_bytes: ets} = CT.info(rt)
        {:memory, worker_bytes} = Process.info(worker, :memory)
        {parked, ets, worker_bytes}
      end

      {parked, ets1, worker1} = round.()
      {_, ets2, worker2} = round.()
      assert CT.info(rt).finished == 10_000

      # ETS keeps the bucket array of a hash table that grew (a few bytes per
      # peak row); the rows themselves are gone, and a second round adds nothing.
      assert ets1 - base_ets < (parked - base_ets) / 20
      assert ets2 == ets1
      assert worker1 <= base_worker + 2048, "worker holds #{worker1} bytes, #{base_worker} before"
      assert worker2 <= base_worker + 2048
    end

    test "a busy Worker's larger minimum heap is given back when it goes idle", %{rt: rt} do
      parent = self()
      :ok = CT.await_idle(rt)
      worker = CT.worker(rt)
      {:min_heap_size, default} = Process.info(worker, :min_heap_size)

      # One thread that yields 5,000 times: several turns of work in a row.
      spin = fn
        _spin, 0 ->
          {:min_heap_size, busy} = Process.info(self(), :min_heap_size)
          Kernel.send(parent, {:got, busy})

        spin, i ->
          {:yield, fn -> spin.(spin, i - 1) end}
      end

      CT.spawn(rt, fn _ -> spin.(spin, 5000) end)
      [busy] = collect(1)
      :ok = CT.await_idle(rt)

      assert busy > default
      assert {:min_heap_size, ^default} = Process.info(worker, :min_heap_size)
      {:total_heap_size, words} = Process.info(worker, :total_heap_size)
      assert words < busy, "#{words} words after going idle, #{busy} while busy"
    end

    test "an idle runtime does not poll", %{rt: rt} do
      CT.spawn(rt, fn _ -> {:receive, fn _ -> :ok end} end)
      :ok = CT.await_idle(rt)
      %{worker: worker, receptor: receptor} = CT.info(rt)
      # The Receptor collects its garbage once, 200 ms after its last request.
      Process.sleep(300)

      reductions = fn ->
        for p <- [worker, receptor], do: elem(Process.info(p, :reductions), 1)
      end

      before = reductions.()
      Process.sleep(1000)
      later = reductions.()
      # Answering the process_info requests themselves costs the target a few
      # reductions; a 10 ms poll would cost at least 100 in this second.
      for {b, l} <- Enum.zip(before, later) do
        assert l - b < 30,
               "#{l - b} reductions while idle (#{inspect(before)} -> #{inspect(later)})"
      end

      assert {:status, :waiting} = Process.info(worker, :status)
    end
  end
end
