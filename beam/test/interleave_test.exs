defmodule RtScope.InterleaveTest do
  use ExUnit.Case, async: false

  alias RtScope.{Interleave, Interleave.Gate}
  alias RtScope.Test.SampleReader

  import RtScope.Test.CLIRunner, only: [cli: 1]

  @moduletag :tmp_dir

  defp read!(path) do
    assert {:ok, file} = SampleReader.read(path)
    file
  end

  # Every block of every arm as {start, end, arm}, in the order they ran.
  defp timeline(files) do
    files
    |> Enum.flat_map(fn f ->
      p = f.header["pairing"]

      Enum.zip_with(p["block_start_ns"], p["block_ns"], fn start, len ->
        {start, start + len, p["arm"]}
      end)
    end)
    |> Enum.sort()
  end

  defp gated_processes do
    Enum.filter(Process.list(), fn p ->
      case Process.info(p, :dictionary) do
        {:dictionary, d} -> Keyword.has_key?(d, Gate.key())
        nil -> false
      end
    end)
  end

  test "the order is honoured, each arm in its own process with its own spawn options",
       %{tmp_dir: dir} do
    [a0, a1] = for i <- 0..1, do: Path.join(dir, "arm#{i}.rts")
    order = [0, 1, 1, 0, 1, 0]

    assert {0, out, ""} =
             cli(
               ~w(interleave --block 2 --order 0,1,1,0,1,0
                  --arm exec sum --iterations 6 --pause-ms 0 --n 500 --fullsweep-after 0 --output #{a0}
                  --arm exec sum --iterations 6 --pause-ms 0 --n 500 --fullsweep-after 65535 --priority high --output #{a1})
             )

    assert out ==
             "rtscope-beam: interleave arm 0: exec sum: 6 samples written to #{a0}\n" <>
               "rtscope-beam: interleave arm 1: exec sum: 6 samples written to #{a1}\n"

    [f0, f1] = files = Enum.map([a0, a1], &read!/1)

    assert %{"arm" => 0, "arms" => 2, "block_samples" => 2, "blocks" => [0, 3, 5]} =
             f0.header["pairing"]

    assert %{"arm" => 1, "arms" => 2, "block_samples" => 2, "blocks" => [1, 2, 4]} =
             f1.header["pairing"]

    assert f0.count == 6 and f1.count == 6

    # Measured on each arm's own clock: the blocks ran in the order given, one at a time.
    blocks = timeline(files)
    assert Enum.map(blocks, &elem(&1, 2)) == order
    assert {0, _, 0} = hd(blocks)

    for [{_, end1, _}, {start2, _, _}] <- Enum.chunk_every(blocks, 2, 1, :discard),
        do: assert(start2 >= end1)

    # Each arm's spawn options are in force in its own measuring process.
    assert f0.header["process"]["fullsweep_after"] == 0
    assert f0.header["process"]["priority"] == "normal"
    assert f1.header["process"]["fullsweep_after"] == 65535
    assert f1.header["process"]["priority"] == "high"
    assert f0.header["settings"]["fullsweep_after"] == 0
    assert f1.header["settings"]["priority"] == "high"
    # With fullsweep_after 0 every collection is a full sweep: no minor one is ever counted.
    assert Enum.all?(SampleReader.column(f0, "minor_gcs"), &(&1 == 0))

    # Apart from `pairing`, the header has what an ordinary run of the arm's argv writes.
    single = Path.join(dir, "single.rts")

    assert {0, _, ""} =
             cli(
               ~w(exec sum --iterations 6 --pause-ms 0 --n 500 --fullsweep-after 0 --output #{single})
             )

    s = read!(single)
    assert Map.keys(f0.header) -- ["pairing"] == Map.keys(s.header)
    assert Map.keys(f0.trailer) == Map.keys(s.trailer)
    assert Map.keys(f0.trailer["counters"]) == Map.keys(s.trailer["counters"])

    for key <- ["workload", "variant", "params", "settings", "columns", "process"],
        do: assert(f0.header[key] == s.header[key], key)
  end

  test "three arms of different variants and iterations", %{tmp_dir: dir} do
    paths = for i <- 0..2, do: Path.join(dir, "a#{i}.rts")
    [p0, p1, p2] = paths

    assert {0, _, ""} = cli(~w(interleave --block 2 --order 2,1,0,2,1,2
                  --arm exec fib --iterations 2 --pause-ms 0 --n 10 --output #{p0}
                  --arm exec nothing --iterations 4 --pause-ms 1 --output #{p1}
                  --arm exec sleep --iterations 6 --pause-ms 0 --n 1 --output #{p2}))

    files = Enum.map(paths, &read!/1)
    assert Enum.map(files, & &1.count) == [2, 4, 6]
    assert Enum.map(files, & &1.header["pairing"]["blocks"]) == [[2], [1, 4], [0, 3, 5]]
    assert Enum.map(files, & &1.header["variant"]) == ["fib", "nothing", "sleep"]
    assert Enum.map(timeline(files), &elem(&1, 2)) == [2, 1, 0, 2, 1, 2]
    # sleep 1 ms: every sample at least 1 ms
    assert Enum.all?(SampleReader.column(Enum.at(files, 2), "duration"), &(&1 >= 1_000_000))
  end

  test "loop_ns counts only the arm's own blocks, not the waits", %{tmp_dir: dir} do
    [a0, a1] = for i <- 0..1, do: Path.join(dir, "arm#{i}.rts")

    # Arm 1's block (two 40 ms sleeps) runs between arm 0's two blocks of empty calls.
    assert {0, _, ""} = cli(~w(interleave --block 2 --order 0,1,0
                  --arm exec nothing --iterations 4 --pause-ms 0 --output #{a0}
                  --arm exec sleep --iterations 2 --pause-ms 0 --n 40 --output #{a1}))

    [f0, f1] = Enum.map([a0, a1], &read!/1)
    loop0 = f0.trailer["counters"]["loop_ns"]
    waited = hd(f1.header["pairing"]["block_ns"])
    assert waited >= 80_000_000
    assert loop0 >= Enum.sum(SampleReader.column(f0, "duration"))
    assert loop0 < 40_000_000, "loop_ns #{loop0} includes the wait for arm 1's block"
    assert f1.trailer["counters"]["loop_ns"] >= 80_000_000
  end

  test "msgq pmap arms with message_queue_data on_heap and off_heap", %{tmp_dir: dir} do
    [a0, a1] = for i <- 0..1, do: Path.join(dir, "pmap#{i}.rts")

    assert {:ok, [r0, r1]} =
             Interleave.run(
               [
                 {:msgq, :pmap,
                  elements: 300, iterations: 2, message_queue_data: :on_heap, output: a0},
                 {"msgq", "pmap",
                  elements: 300, iterations: 2, message_queue_data: :off_heap, output: a1}
               ],
               block: 1,
               order: [0, 1, 1, 0]
             )

    assert r0.output == a0 and r1.count == 2
    [f0, f1] = files = Enum.map([a0, a1], &read!/1)
    assert f0.header["process"]["message_queue_data"] == "on_heap"
    assert f1.header["process"]["message_queue_data"] == "off_heap"
    assert f1.header["settings"]["message_queue_data"] == "off_heap"
    assert f0.header["pairing"]["blocks"] == [0, 3]
    assert f1.header["pairing"]["blocks"] == [1, 2]
    assert Enum.map(timeline(files), &elem(&1, 2)) == [0, 1, 1, 0]
    assert f0.count == 2 and f1.count == 2
    assert Enum.all?(SampleReader.column(f1, "queue_len"), &(&1 >= 0))
  end

  test "bad usage: exit 2, what is wrong named, nothing written", %{tmp_dir: dir} do
    o0 = Path.join(dir, "a0.rts")
    o1 = Path.join(dir, "a1.rts")
    arm0 = ~w(--arm exec sum --iterations 4 --pause-ms 0 --output #{o0})
    arm1 = ~w(--arm exec sum --iterations 4 --pause-ms 0 --output #{o1})
    two = ~w(--block 2 --order 0,1,1,0)

    cases = [
      {two ++ arm0, "interleave needs at least 2 arms, got 1"},
      {~w(--block 2 --order 0,1,1) ++ arm0 ++ arm1,
       "arm 0 (exec sum) appears 1 time in the order, it must appear iterations 4 / block 2 = 2 times"},
      {~w(--block 2 --order 0,1,0,0) ++ arm0 ++ arm1,
       "arm 0 (exec sum) appears 3 times in the order, it must appear iterations 4 / block 2 = 2 times"},
      {~w(--block 2 --order 0,1,2,0) ++ arm0 ++ arm1,
       "order entry 2 at position 2 is not an arm index: valid are 0..1"},
      {~w(--block 2 --order 0,x) ++ arm0 ++ arm1,
       "invalid value \"0,x\" for --order: expected arm indexes separated by commas"},
      {~w(--block 3 --order 0,1) ++ arm0 ++ arm1,
       "arm 0 (exec sum): iterations 4 is not a multiple of the block size 3"},
      {two ++
         arm0 ++
         ["--arm", "exec", "sum", "--iterations", "4", "--vm-flags", "+sbwt none"] ++
         ["--output", o1],
       "the VM flags (--vm-flags) must be the same in every arm, one VM runs them all: " <>
         "arm 0 has none, arm 1 has \"+sbwt none\""},
      {two ++ arm0 ++ ~w(--arm timer send_after --cycles 4 --output #{o1}),
       "arm 1 is timer send_after: interleave supports exec sum, fib, sleep, nothing, " <>
         "spawn_each, spawn_recursive and msgq pmap"},
      {two ++ arm0 ++ ~w(--arm exec dirty --iterations 4 --output #{o1}),
       "arm 1 is exec dirty: interleave supports"},
      {two ++ arm0 ++ ~w(--arm msgq fan_in --iterations 4 --output #{o1}),
       "arm 1 is msgq fan_in: interleave supports"},
      {two ++ arm0 ++ ~w(--arm exec sum --iterations 4 --output #{o0}),
       "arm 0 and arm 1 would write the same file #{o0}"},
      {two ++ arm0 ++ ~w(--arm exec sum --iterations 4 --cycles 3 --output #{o1}),
       "arm 1: unknown option --cycles for exec sum"},
      {two ++ arm0 ++ ~w(--arm exec sum --iterations 4), "arm 1: missing --output FILE"},
      {two ++
         ["--arm", "exec", "sum", "--iterations", "4", "--vm-flags", "+sbwt very_long"] ++
         ["--output", o0, "--arm", "exec", "sum", "--iterations", "4"] ++
         ["--vm-flags", "+sbwt very_long", "--output", o1],
       "arm 0 (exec sum): VM flags not in force in this VM: +sbwt very_long"},
      {two ++ arm0 ++ ~w(--arm iot x), "arm 1: expected WORKLOAD VARIANT OPTIONS"},
      {~w(--order 0,1,1,0) ++ arm0 ++ arm1, "missing block: the samples of one block"},
      {~w(--block 2) ++ arm0 ++ arm1, "missing order: one arm index per block"},
      {~w(--block 0 --order 0,1) ++ arm0 ++ arm1, "invalid block 0: must be an integer >= 1"},
      {~w(--order 0,1,1,0) ++ arm0 ++ ~w(--block 2) ++ arm1,
       "--block and --order go before the first --arm"},
      {two, "missing --arm: interleave needs at least 2 arms"}
    ]

    for {args, msg} <- cases do
      {status, out, err} = cli(["interleave" | args])
      assert status == 2, "#{inspect(args)}: status #{status}, #{err}"
      assert out == ""
      assert err =~ "rtscope-beam: error: " <> msg, "#{inspect(args)}: #{err}"
      assert File.ls!(dir) == []
    end
  end

  test "Collector.sync returns once the collector has taken every sample sent before" do
    {collector, cref} = RtScope.Collector.start(3)
    for i <- 1..20_000, do: send(collector, {:s, i, 0, 0})
    assert :ok = RtScope.Collector.sync(collector)
    assert {:message_queue_len, 0} = Process.info(collector, :message_queue_len)
    tag = make_ref()
    RtScope.Collector.finish(collector, self(), tag)
    assert_receive {^tag, :records, records, 20_000}
    assert byte_size(records) == 20_000 * 24
    assert_receive {:DOWN, ^cref, :process, ^collector, :normal}
  end

  test "an arm whose measuring process dies: exit 1, no file, no process left", %{tmp_dir: dir} do
    [a0, a1] = for i <- 0..1, do: Path.join(dir, "arm#{i}.rts")

    killer =
      spawn(fn ->
        victim = Stream.repeatedly(fn -> find_arm(1) end) |> Enum.find(& &1)
        Process.sleep(10)
        Process.exit(victim, :boom)
      end)

    assert {1, "", err} = cli(~w(interleave --block 1 --order 0,1,0,1,0,1,0,1,0,1
                  --arm exec sleep --iterations 5 --n 2 --pause-ms 1 --output #{a0}
                  --arm exec sleep --iterations 5 --n 2 --pause-ms 1 --output #{a1}))

    assert err ==
             "rtscope-beam: interleave failed: arm 1 (exec sleep): the measuring process died: :boom\n"

    refute Process.alive?(killer)
    assert File.ls!(dir) == []
    assert gated_processes() == []
  end

  defp find_arm(arm) do
    Enum.find(gated_processes(), fn p ->
      {:dictionary, d} = Process.info(p, :dictionary)
      d[Gate.key()].arm == arm
    end)
  end

  test "a file that cannot be written: the files already written are removed", %{tmp_dir: dir} do
    a0 = Path.join(dir, "arm0.rts")
    csv = Path.join(dir, "arm0.csv")
    a1 = Path.join(dir, "arm1.rts")
    # Not a regular file: the harness refuses to rename over it, after arm 0's files are written.
    :ok = File.ln_s("/dev/null", a1)

    assert {1, "", err} = cli(~w(interleave --block 2 --order 1,0
                  --arm exec nothing --iterations 2 --pause-ms 0 --output #{a0} --csv #{csv}
                  --arm exec nothing --iterations 2 --pause-ms 0 --output #{a1}))

    assert err =~ "rtscope-beam: interleave failed: arm 1 (exec nothing): "
    assert err =~ "exists and is not a regular file"
    assert File.ls!(dir) == ["arm1.rts"]
    assert gated_processes() == []
  end
end
