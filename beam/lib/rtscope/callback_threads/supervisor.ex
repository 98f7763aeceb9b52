defmodule RtScope.CallbackThreads.Supervisor do
  @moduledoc """
  Supervises one callback-thread runtime: a Receptor and a Worker.

  `init/1` runs in the supervisor process, so the ETS tables it creates
  (`RtScope.CallbackThreads.Store`) belong to the supervisor and survive a
  crash of either child. Strategy `one_for_one`: a Worker restart keeps
  the Receptor (and its pid) and vice versa. If the children crash more
  than `max_restarts` times in `max_seconds` (default 3 in 5 s, for
  example a callback that kills its process each time it runs), the
  supervisor gives up and the runtime stops, tables included.
  """

  use Supervisor

  alias RtScope.CallbackThreads.{Receptor, Store, Worker}

  @type option ::
          {:name, atom()} | {:max_restarts, non_neg_integer()} | {:max_seconds, pos_integer()}

  @spec start_link([option()]) :: Supervisor.on_start()
  def start_link(opts \\ []), do: Supervisor.start_link(__MODULE__, opts)

  @impl true
  def init(opts) do
    store = Store.new()

    children = [
      %{id: Receptor, start: {Receptor, :start_link, [{store, self(), opts[:name]}]}},
      %{id: Worker, start: {Worker, :start_link, [store]}}
    ]

    Supervisor.init(children,
      strategy: :one_for_one,
      max_restarts: Keyword.get(opts, :max_restarts, 3),
      max_seconds: Keyword.get(opts, :max_seconds, 5)
    )
  end
end
