"""Consumer-group verbs on the library surface (storage.store.Store,
Txn): what they store.  The group commands as typed (their parsers,
replies and error texts) are tested in tests/cli/test_group_commands.py;
the PEL indexes under any sequence of group verbs in
tests/engine/test_pel_properties.py."""
import pytest

from storage.options import AutoClaimOptions, ClaimOptions, GroupOptions
from tests.harness.stores import consumers, group_meta


@pytest.mark.parametrize("claim", [lambda tx: tx.claim(b"s", b"g", b"bob", ClaimOptions(min_idle=0, ids=((1, 0),))),
                                   lambda tx: tx.autoclaim(b"s", b"g", b"bob",
                                                           AutoClaimOptions(min_idle=0, start=(0, 0)))],
                         ids=["claim", "autoclaim"])
def test_a_claim_that_claims_nothing_still_creates_the_consumer(store, claim):
    # Redis 7.0.x backports of #11099 on: X[AUTO]CLAIM look the consumer up
    # or create it before claiming (t_stream.c xclaimCommand)
    store.run(lambda tx: tx.create_group(b"s", b"g", GroupOptions(start=(0, 0), mkstream=True)), write=True)
    store.run(claim, write=True)
    assert b"bob" in consumers(store, group_meta(store, b"s", b"g").gid)
