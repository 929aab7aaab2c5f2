"""Test harnesses shared by several tiers.  Test modules import them
from here, never from each other.

  served             a running ``xs serve`` (Served), raw socket exchanges
  terminal           a pseudo-terminal for stderr (stderr_on_pty)
  stores             stores for the engine tier and any tier that looks
                     inside one: open, full and partial dumps, raw rows and
                     records, the PEL-index check, a settable clock, IDs
                     whatever shape a verb gives them (id_text, id_pair)
  format_fixtures    the stores of older formats in tests/fixtures
  commands           Redis commands as typed, for tests/cli: parsed and run
                     in this process (cmd, run_line) or by ``xs`` (xs);
                     the engine tier never imports it
  command_sequences  random command sequences (Hypothesis) for the
                     atomicity properties of tests/cli
"""
