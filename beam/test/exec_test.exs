defmodule RtScope.ExecTest do
  # Not async: these runs measure time.
  use ExUnit.Case, async: false

  alias RtScope.Exec
  alias RtScope.Exec.Workloads
  alias RtScope.Test.SampleReader

  doctest RtScope.Exec.Workloads
  doctest RtScope.Exec.CSV

  @moduletag :tmp_dir

  test "flow: samples, settings and the measuring process's own Process.info", %{tmp_dir: dir} do
    out = Path.join(dir, "sum.rts")
    csv = Path.join(dir, "sum.csv")

    assert {:ok, result} =
             Exec.run(:sum,
               iterations: 40,
               pause_ms: 0,
               n: 1000,
               fullsweep_after: 0,
               min_heap_size: 6765,
               priority: :high,
               message_queue_data: :off_heap,
               output: out,
               csv: csv
             )

    assert result.count == 40
    assert {:ok, file} = SampleReader.read(out)
    assert file.count == 40
    h = file.header

    assert {h["workload"], h["variant"], h["runtime"], h["tool"]} ==
             {"exec", "sum", "beam", "rtscope-beam"}

    assert h["params"] == %{"iterations" => 40, "pause_ms" => 0, "n" => 1000, "warmup_calls" => 1}

    assert Enum.map(h["columns"], &{&1["name"], &1["unit"], &1["type"]}) ==
             [
               {"duration", "ns", "i64"},
               {"heap_size", "words", "i64"},
               {"minor_gcs", "count", "i64"}
             ]

    # What the measuring process itself reported (the caller runs at normal priority).
    assert h["process"] == %{
             "priority" => "high",
             "min_heap_size" => 6772,
             "fullsweep_after" => 0,
             "message_queue_data" => "off_heap",
             "min_bin_vheap_size" => h["process"]["min_bin_vheap_size"]
           }

    assert Process.info(self(), :priority) == {:priority, :normal}
    s = h["settings"]

    assert {s["priority"], s["min_heap_size"], s["fullsweep_after"], s["message_queue_data"]} ==
             {"high", 6765, 0, "off_heap"}

    assert s["otp_release"] == List.to_string(:erlang.system_info(:otp_release))
    assert s["schedulers_online"] == :erlang.system_info(:schedulers_online)
    assert is_binary(s["vm_flags"])

    assert ["min_heap_size 6765 requested, the VM gave the process 6772" <> _] =
             file.trailer["notes"]

    for [d, heap, gcs] <- file.rows do
      assert d > 0 and d < 1_000_000_000
      assert heap >= 6772
      assert gcs >= 0
    end

    [header_line | lines] = csv |> File.read!() |> String.split("\n", trim: true)
    assert header_line == "count,time,heap_size,minor_gcs"
    assert length(lines) == 40

    for {line, [d, heap, gcs], i} <- Enum.zip([lines, file.rows, 1..40]) do
      assert line == "#{i},#{div(d + 500, 1000)},#{heap},#{gcs}"
    end
  end

  test "min_heap_size is in force: a big heap needs no collection, the default one does" do
    {:ok, small} = Exec.run(:nothing, iterations: 300, pause_ms: 0)
    {:ok, big} = Exec.run(:nothing, iterations: 300, pause_ms: 0, min_heap_size: 196_418)
    # Process.info itself allocates: 300 readings overflow a 233-word heap.
    assert max_col(small, 2) > 0
    assert max_col(big, 2) == 0
    assert min_col(big, 1) >= 196_418
  end

  test "fullsweep_after 0: every collection is a full sweep, so the since-last-sweep count stays 0" do
    {:ok, r} = Exec.run(:nothing, iterations: 300, pause_ms: 0, fullsweep_after: 0)
    assert max_col(r, 2) == 0
    assert max_col(r, 1) > 0
  end

  test "sleep takes at least its time, pauses are kept between calls" do
    t0 = System.monotonic_time(:millisecond)
    {:ok, r} = Exec.run(:sleep, iterations: 4, pause_ms: 10, n: 3)
    elapsed = System.monotonic_time(:millisecond) - t0
    assert r.count == 4
    assert min_col(r, 0) >= 3_000_000
    # warm-up + 4 calls of >= 3 ms, 4 pauses of >= 10 ms
    assert elapsed >= 15 + 40
  end

  test "fib and nothing run; durations are ordered as expected" do
    {:ok, fib} = Exec.run(:fib, iterations: 20, pause_ms: 0, n: 15)
    {:ok, nothing} = Exec.run(:nothing, iterations: 20, pause_ms: 0)
    assert median(fib) > median(nothing)
    assert fib.header[:params] == %{iterations: 20, pause_ms: 0, warmup_calls: 1, n: 15}
  end

  test "spawning: every process runs before the call returns, and more processes take longer" do
    {:ok, few} = Exec.run(:spawn_each, iterations: 15, pause_ms: 0, n: 10)
    {:ok, many} = Exec.run(:spawn_each, iterations: 15, pause_ms: 0, n: 5000)
    {:ok, chain} = Exec.run(:spawn_recursive, iterations: 15, pause_ms: 0, n: 5000)
    assert median(many) > median(few)
    assert chain.count == 15 and median(chain) > 0
    assert chain.header[:params] == %{iterations: 15, pause_ms: 0, warmup_calls: 1, n: 5000}
    # Nothing left over: each spawned process has run and ended.
    refute_received :spawned
    assert Workloads.spawn_recursive(3) == :ok and Workloads.spawn_each(3) == :ok
  end

  test "bad options are refused before anything runs" do
    assert {:error,
            {:invalid,
             "unknown exec workload \"summ\": valid choices are sum, fib, sleep, nothing, dirty, port, " <>
               "spawn_each, spawn_recursive, nodeconnect"}} = Exec.run("summ", [])

    assert {:error, {:invalid, "exec nodeconnect needs a VM with distribution started" <> _}} =
             Exec.run(:nodeconnect, iterations: 3)

    assert {:error, {:invalid, "invalid iterations 0: must be an integer >= 1"}} =
             Exec.run(:sum, iterations: 0)

    assert {:error,
            {:invalid,
             "option n does not apply to exec nothing (only to sum, fib, sleep, dirty, port, spawn_each, spawn_recursive)"}} =
             Exec.run(:nothing, n: 3)

    assert {:error, {:invalid, "unknown option sleep_ms for exec" <> _}} =
             Exec.run(:sleep, sleep_ms: 3)

    assert {:error,
            {:invalid, "invalid priority :urgent: valid choices are low, normal, high, max"}} =
             Exec.run(:sum, priority: :urgent)

    assert {:error, {:invalid, "unknown option cycles for exec; valid options are" <> _}} =
             Exec.run(:sum, cycles: 3)
  end

  test "a measuring process that dies ends the run with an error" do
    assert {:error, {:failed, "the measuring process died: :simulated_crash"}} =
             RtScope.Harness.run(%{
               workload: "exec",
               variant: "sleep",
               columns: [%{name: "duration", unit: "ns", type: "i64"}],
               params: %{},
               requested: %{},
               spawn_options: [],
               body: fn _collector -> exit(:simulated_crash) end
             })
  end

  defp col(result, i), do: for(<<row::binary-24 <- result.records>>, do: elem_at(row, i))

  defp elem_at(<<a::little-signed-64, b::little-signed-64, c::little-signed-64>>, i),
    do: Enum.at([a, b, c], i)

  defp max_col(r, i), do: Enum.max(col(r, i))
  defp min_col(r, i), do: Enum.min(col(r, i))
  defp median(r), do: r |> col(0) |> Enum.sort() |> Enum.at(div(r.count, 2))
end
