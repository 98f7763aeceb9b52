defmodule RtScope.TasksTest do
  # Not async: memory deltas of the whole VM must not see other tests' work.
  use ExUnit.Case, async: false

  alias RtScope.Tasks

  doctest RtScope.Tasks

  @moduletag timeout: 120_000

  describe "cli arguments" do
    test "bad arguments are refused with the valid choices" do
      assert {:error, "unknown tasks variant \"size\"; valid variants: memory, switch"} =
               Tasks.cli(["size"])

      assert {:error, "missing tasks variant" <> _} = Tasks.cli([])

      assert {:error, "missing --model; valid models: erlang_process, callback_thread"} =
               Tasks.cli(["memory", "--counts", "1", "--output", "x.rts"])

      assert {:error, "invalid --counts \"1,x\"" <> _} =
               Tasks.cli([
                 "memory",
                 "--model",
                 "erlang_process",
                 "--counts",
                 "1,x",
                 "--output",
                 "x.rts"
               ])

      assert {:error, "invalid --counts \"0\"" <> _} =
               Tasks.cli([
                 "memory",
                 "--model",
                 "erlang_process",
                 "--counts",
                 "0",
                 "--output",
                 "x.rts"
               ])

      assert {:error,
              "unknown option --iterations for tasks memory; valid: --counts, --model, --output, --vm-flags"} =
               Tasks.cli([
                 "memory",
                 "--model",
                 "erlang_process",
                 "--iterations",
                 "3",
                 "--output",
                 "x.rts"
               ])

      assert {:error, "invalid --iterations \"-1\"" <> _} =
               Tasks.cli([
                 "switch",
                 "--model",
                 "callback_thread",
                 "--iterations",
                 "-1",
                 "--output",
                 "x.rts"
               ])

      assert {:error, "missing --output FILE"} =
               Tasks.cli(["switch", "--model", "callback_thread", "--iterations", "1"])

      assert {:error, "unexpected argument \"--model\"" <> _} = Tasks.cli(["switch", "--model"])
    end

    test "arguments are parsed" do
      assert {:ok, "memory", %{model: "callback_thread", counts: [1, 10, 100], output: "f.rts"}} =
               Tasks.parse([
                 "memory",
                 "--model",
                 "callback_thread",
                 "--counts",
                 "1, 10,100",
                 "--output",
                 "f.rts"
               ])
    end
  end

  describe "sample files" do
    @describetag :tmp_dir

    test "cli writes one record per count, and one per batch", %{tmp_dir: dir} do
      memory = Path.join(dir, "memory.rts")

      assert :ok =
               Tasks.cli([
                 "memory",
                 "--model",
                 "callback_thread",
                 "--counts",
                 "10,100",
                 "--output",
                 memory
               ])

      assert {:ok, file} = RtScope.Test.SampleReader.read(memory)
      assert %{"workload" => "tasks", "variant" => "memory", "runtime" => "beam"} = file.header
      assert file.header["settings"]["model"] == "callback_thread"
      assert file.header["params"] == %{"counts" => "10,100"}

      assert [%{"name" => "bytes", "unit" => "bytes"}, %{"name" => "tasks"} | _] =
               file.header["columns"]

      assert RtScope.Test.SampleReader.column(file, "tasks") == [10, 100]
      assert file.trailer["counters"]["unsettled_counts"] in [0, 1, 2]

      switch = Path.join(dir, "switch.rts")

      assert :ok =
               Tasks.cli([
                 "switch",
                 "--model",
                 "erlang_process",
                 "--iterations",
                 "4",
                 "--output",
                 switch
               ])

      assert {:ok, file} = RtScope.Test.SampleReader.read(switch)

      assert [
               %{"name" => "ns_per_switch", "unit" => "ns", "type" => "f64"},
               %{"name" => "switches"}
             ] = file.header["columns"]

      assert RtScope.Test.SampleReader.column(file, "switches") == [2000, 2000, 2000, 2000]
    end

    test "an output in a missing directory is refused before measuring" do
      assert {:error, "invalid output" <> _} =
               Tasks.cli([
                 "switch",
                 "--model",
                 "erlang_process",
                 "--iterations",
                 "1",
                 "--output",
                 "/nonexistent/x.rts"
               ])
    end
  end

  describe "memory" do
    test "a record per count with every accounting" do
      # 20,000 tasks: the VM-wide total moves by a few 100 KB on its own (other processes' heaps shrink
      # and grow), which 2,000 callback threads (~250 KB) do not clear reliably; 20,000 do (~2.5 MB).
      for model <- Tasks.models() do
        records = Tasks.memory(model, [10, 20_000])
        assert Enum.map(records, & &1["tasks"]) == [10, 20_000]

        for r <- records do
          for key <- ~w(bytes processes_bytes ets_bytes process_info_bytes residual_bytes),
              do: assert(is_integer(r[key]), "#{model} #{key}")
        end

        big = List.last(records)
        assert big["bytes"] > 20_000 * 50, "#{model}: #{big["bytes"]} bytes for 20,000 tasks"
        assert big["process_info_bytes"] > 20_000 * 50
      end
    end

    test "a callback thread costs at most 10% of an Erlang process (same VM)" do
      counts = [1000, 5000, 10_000, 20_000]
      process = slope(Tasks.memory("erlang_process", counts))
      callback = slope(Tasks.memory("callback_thread", counts))
      assert process > 1000, "an Erlang process measured #{process} bytes"
      assert callback > 0
      assert callback <= 0.10 * process, "callback thread #{callback} B vs process #{process} B"
    end

    test "the tasks' memory is given back when they end" do
      for model <- Tasks.models() do
        [r] = Tasks.memory(model, [20_000])
        assert abs(r["residual_bytes"]) < r["bytes"] / 4, "#{model}: #{inspect(r)}"
      end
    end
  end

  describe "switch" do
    test "ns per switch for each batch" do
      for model <- Tasks.models() do
        batches = Tasks.switch(model, 3)
        assert length(batches) == 3

        assert Enum.all?(batches, &(is_float(&1) and &1 > 0 and &1 < 1.0e6)),
               "#{model}: #{inspect(batches)}"
      end
    end
  end

  # Least-squares slope of bytes against tasks.
  defp slope(records) do
    xs = Enum.map(records, & &1["tasks"])
    ys = Enum.map(records, & &1["bytes"])
    n = length(xs)
    mx = Enum.sum(xs) / n
    my = Enum.sum(ys) / n
    sxy = Enum.zip(xs, ys) |> Enum.map(fn {x, y} -> (x - mx) * (y - my) end) |> Enum.sum()
    sxx = xs |> Enum.map(fn x -> (x - mx) * (x - mx) end) |> Enum.sum()
    sxy / sxx
  end
end
