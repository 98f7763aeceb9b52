defmodule RtScope.MsgQTest do
  use ExUnit.Case, async: false

  alias RtScope.{GcCounter, MsgQ}
  alias RtScope.Test.SampleReader

  @moduletag :tmp_dir

  for mqd <- [:on_heap, :off_heap] do
    test "pmap #{mqd}: one sample per call, set in a fresh receiver", %{tmp_dir: dir} do
      out = Path.join(dir, "p.rts")

      assert {:ok, _} =
               MsgQ.run(
                 variant: :pmap,
                 elements: 1000,
                 iterations: 3,
                 message_queue_data: unquote(mqd),
                 priority: :high,
                 output: out
               )

      assert {:ok, file} = SampleReader.read(out)
      assert file.count == 3
      assert file.header["variant"] == "pmap"
      assert file.header["process"]["message_queue_data"] == Atom.to_string(unquote(mqd))
      assert file.header["process"]["priority"] == "high"
      assert file.header["settings"]["message_queue_data"] == Atom.to_string(unquote(mqd))

      assert file.header["params"] == %{
               "elements" => 1000,
               "iterations" => 3,
               "warmup_iterations" => 1
             }

      for row <- file.rows do
        [d, _delta, mem, q, minor, major] = row
        assert d > 0
        # the receiver holds 1000 task structs at least
        assert mem > 1000 * 8
        assert q in 0..2000
        assert minor >= 0 and major >= 0
      end

      c = file.trailer["counters"]
      assert c["max_queue_len"] == Enum.max(SampleReader.column(file, "queue_len"))
      assert c["max_receiver_memory"] == Enum.max(SampleReader.column(file, "receiver_memory"))
    end
  end

  test "fan_in: every message once, latency from the carried send time, counters", %{tmp_dir: dir} do
    out = Path.join(dir, "f.rts")

    assert {:ok, _} =
             MsgQ.run(
               variant: :fan_in,
               senders: 8,
               messages: 25,
               message_words: 32,
               work: 200,
               queue_sample_every: 10,
               message_queue_data: :off_heap,
               output: out
             )

    assert {:ok, file} = SampleReader.read(out)
    assert file.count == 200
    assert file.header["process"]["message_queue_data"] == "off_heap"
    pairs = Enum.map(file.rows, fn [_lat, sender, seq] -> {sender, seq} end)
    assert Enum.sort(pairs) == for(s <- 1..8, q <- 1..25, do: {s, q})
    # Each sender's messages arrive in order.
    for s <- 1..8, do: assert(for({^s, q} <- pairs, do: q) == Enum.to_list(1..25))
    assert Enum.all?(SampleReader.column(file, "latency"), &(&1 >= 0))

    c = file.trailer["counters"]
    assert c["messages"] == 200
    assert c["queue_readings"] == 20
    assert c["throughput_msgs_per_s"] == div(200 * 1_000_000_000, c["duration_ns"])
    assert c["peak_queue_len"] in 0..199
    assert c["peak_receiver_memory"] > 0
    assert c["receiver_minor_gcs"] >= 0
  end

  test "fan_in rounds: long-lived senders send a burst per round, seq runs on" do
    {:ok, r} =
      MsgQ.run(
        variant: :fan_in,
        senders: 3,
        messages: 4,
        iterations: 3,
        work: 0,
        queue_sample_every: 4
      )

    assert r.count == 36

    pairs =
      for <<_lat::binary-8, s::little-signed-64, q::little-signed-64 <- r.records>>, do: {s, q}

    assert Enum.sort(pairs) == for(s <- 1..3, q <- 1..12, do: {s, q})
    assert r.trailer[:counters].messages == 36
    assert r.trailer[:counters].queue_readings == 9
    assert r.header[:params].iterations == 3
  end

  test "fan_in with a slow receiver: the queue builds up" do
    {:ok, r} =
      MsgQ.run(variant: :fan_in, senders: 20, messages: 20, work: 20_000, queue_sample_every: 5)

    assert r.trailer[:counters].peak_queue_len > 20
  end

  test "the GC counter counts collections across full sweeps" do
    counter = GcCounter.start_self()
    for _ <- 1..5, do: :erlang.garbage_collect()
    assert %{major: major} = GcCounter.stop_self(counter)
    assert major >= 5
  end

  test "bad options are refused, naming the variant's options" do
    assert {:error,
            {:invalid, "unknown msgq variant \"fan_out\": valid choices are pmap, fan_in"}} =
             MsgQ.run(variant: "fan_out")

    assert {:error,
            {:invalid,
             "unknown option senders for msgq pmap; valid options are variant, elements, iterations" <>
               _}} = MsgQ.run(variant: :pmap, senders: 3)

    assert {:error,
            {:invalid, "invalid message_queue_data :heap: valid choices are on_heap, off_heap"}} =
             MsgQ.run(message_queue_data: :heap)
  end
end
