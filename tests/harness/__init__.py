"""Test harnesses shared by several tiers: a running ``xs serve``
(``served``).  Test modules import them from here, never from each
other."""
