defmodule RtScope.MsgQ do
  @moduledoc """
  The `msgq` workload: message-passing cost with the receiver's message
  queue `on_heap` or `off_heap` (study 3 and the scenario it predicted).

    * `variant: :pmap` – `RtScope.MsgQ.Pmap`: Task.async/await parallel map,
      one sample per pmap call (options `:elements`, default 10 000;
      `:iterations`, calls, default 10)
    * `variant: :fan_in` – `RtScope.MsgQ.FanIn`: many long-lived senders, one
      busy receiver, one sample per message (options `:senders`,
      `:messages`, `:iterations` (rounds), `:message_words`, `:work`,
      `:send_interval_ms`, `:queue_sample_every`)

  `:message_queue_data` (`:on_heap` or `:off_heap`) is the setting under
  test; the other spawn options and `:output`, `:expect_vm_flags` work as
  for every workload (`RtScope.Options`).

      {:ok, result} = RtScope.MsgQ.run(variant: :fan_in, senders: 200, messages: 50,
                                       message_queue_data: :off_heap, output: "/data/fan_in.rts")
  """

  alias RtScope.{Harness, MsgQ.FanIn, MsgQ.Pmap, Options}

  @variants [:pmap, :fan_in]

  @doc "The variants `run/1` accepts."
  def variants, do: @variants

  @doc "The option names of `variant`."
  def option_keys(:pmap), do: Pmap.option_keys()
  def option_keys(:fan_in), do: FanIn.option_keys()

  @doc "Validates and runs one msgq measurement. See the module doc."
  @spec run(keyword()) :: {:ok, map()} | {:error, {:invalid | :failed, String.t()}}
  def run(opts \\ []) do
    with {:ok, cfg} <- validate(opts),
         {:ok, result} <- Harness.run(impl(cfg.variant).spec(cfg)),
         :ok <- Harness.write(result, cfg.output) do
      {:ok, Map.put(result, :output, cfg.output)}
    end
  end

  @doc "Validates the options without measuring anything."
  @spec validate(keyword()) :: {:ok, map()} | {:error, {:invalid, String.t()}}
  def validate(opts) do
    with true <- Keyword.keyword?(opts) || Options.check_keys(opts, "msgq", []),
         {:ok, variant} <-
           Options.variant(Keyword.get(opts, :variant, :pmap), "msgq variant", @variants),
         :ok <- Options.check_keys(opts, "msgq #{variant}", [:variant | option_keys(variant)]),
         {:ok, own} <- impl(variant).validate(opts),
         {:ok, common} <- Options.common(opts) do
      {:ok, common |> Map.merge(own) |> Map.put(:variant, variant)}
    end
  end

  defp impl(:pmap), do: Pmap
  defp impl(:fan_in), do: FanIn
end
