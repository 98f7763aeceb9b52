defmodule RtScope.TimerTest do
  use ExUnit.Case, async: false

  alias RtScope.Timer
  alias RtScope.Test.SampleReader

  @moduletag :tmp_dir

  for variant <- [:send_after, :receive_after, :timer_sleep] do
    test "#{variant}: cycles wake-ups, non-negative lateness, misses counted from the cycle column",
         %{tmp_dir: dir} do
      out = Path.join(dir, "t.rts")

      assert {:ok, _} =
               Timer.run(
                 variant: unquote(variant),
                 cycles: 25,
                 interval_ms: 3,
                 priority: :high,
                 output: out
               )

      assert {:ok, file} = SampleReader.read(out)
      assert file.count == 25
      assert file.header["variant"] == Atom.to_string(unquote(variant))
      assert file.header["process"]["priority"] == "high"
      assert file.header["params"]["interval_ns"] == 3_000_000
      latencies = SampleReader.column(file, "latency")
      cycles = SampleReader.column(file, "cycle")
      assert Enum.all?(latencies, &(&1 >= 0)), inspect(latencies)
      assert cycles == Enum.sort(Enum.uniq(cycles))
      assert hd(cycles) >= 1

      c = file.trailer["counters"]
      # periods overrun after each wake-up; the last one's run up to planned_periods
      gaps = Enum.zip_with(cycles, tl(cycles) ++ [c["planned_periods"] + 1], &(&2 - &1 - 1))
      assert c["missed_periods"] == Enum.sum(gaps)
      assert c["late_wakeups"] == Enum.count(gaps, &(&1 > 0))
      assert c["early_wakeups"] == 0
      assert c["planned_periods"] >= List.last(cycles)

      # Periods are skipped exactly after wake-ups later than the next planned time.
      for {lat, gap} <- Enum.zip(latencies, gaps), do: assert(lat > 3_000_000 == gap > 0)
    end
  end

  test "receive after with a 1 ms period overruns: ERTS rounds the timeout up, the misses show" do
    {:ok, r} = Timer.run(variant: :receive_after, cycles: 20, interval_ms: 1)
    assert r.trailer[:counters].late_wakeups > 0
    assert r.trailer[:counters].missed_periods >= r.trailer[:counters].late_wakeups
  end

  test "bad options are refused" do
    assert {:error,
            {:invalid,
             "unknown timer variant \"nanosleep\": valid choices are send_after, receive_after, timer_sleep"}} =
             Timer.run(variant: "nanosleep")

    assert {:error, {:invalid, "invalid interval_ms 0: must be an integer >= 1"}} =
             Timer.run(interval_ms: 0)

    assert {:error, {:invalid, "unknown option iterations for timer" <> _}} =
             Timer.run(iterations: 2)
  end
end
