defmodule RtScope.MixProject do
  use Mix.Project

  # The BEAM harness of rtscope. No hex dependencies on purpose: the project
  # must build offline from a plain Debian Elixir and be usable as a path or
  # git dependency of a Nerves firmware.
  def project do
    [
      app: :rtscope,
      version: "0.1.0",
      elixir: "~> 1.14",
      elixirc_paths: elixirc_paths(Mix.env()),
      start_permanent: false,
      deps: [],
      docs: [main: "RtScope"]
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end
