"""BlockPool / BlockManager in isolation: plain ints, no model."""
import pytest

from inference.block_manager import BlockManager
from inference.errors import PinCapacityError
from inference.sampling_params import SamplingParams
from inference.sequence import Sequence

BS = 4


def make_seq(tokens, tenant="t", rid=None):
    make_seq.n = getattr(make_seq, "n", 0) + 1
    return Sequence(rid or f"r{make_seq.n}", list(tokens), SamplingParams(max_tokens=4), tenant)


def compute_all(bm, seq):
    """Pretend the model computed every token of seq (as the engine does after a step)."""
    n = seq.num_tokens - seq.num_computed_tokens
    assert bm.allocate(seq, n)
    seq.num_computed_tokens += n
    bm.commit(seq)


def test_allocate_and_free_return_every_block():
    bm = BlockManager(num_blocks=10, block_size=BS)
    seqs = [make_seq(range(i, i + 9)) for i in range(3)]  # 9 tokens -> 3 blocks each
    for s in seqs:
        compute_all(bm, s)
    assert bm.pool.num_free == 1
    for s in seqs:
        bm.free(s)
    assert bm.pool.num_free == 10
    assert all(rc == 0 for rc in bm.pool.ref_cnt)


def test_allocation_fails_cleanly_when_pool_is_empty():
    bm = BlockManager(num_blocks=2, block_size=BS)
    s = make_seq(range(12))
    assert not bm.allocate(s, 12)
    assert s.block_table == [] and bm.pool.num_free == 2


def test_second_request_reuses_cached_prefix_and_keeps_last_token():
    bm = BlockManager(num_blocks=16, block_size=BS)
    system = list(range(100, 112))  # 3 full blocks
    a = make_seq(system + [1, 2])
    compute_all(bm, a)
    b = make_seq(system + [7, 8, 9])
    hit = bm.take_cached_prefix(b)
    assert hit == 12
    assert b.block_table == a.block_table[:3]
    # A prompt that is exactly the cached blocks still computes its last token.
    c = make_seq(system)
    assert bm.take_cached_prefix(c) == 8


def test_tenants_with_the_same_prompt_share_nothing():
    bm = BlockManager(num_blocks=16, block_size=BS)
    prompt = list(range(50, 63))
    a = make_seq(prompt, tenant="acme")
    compute_all(bm, a)
    b = make_seq(prompt, tenant="globex")
    assert bm.take_cached_prefix(b) == 0
    assert set(b.block_table).isdisjoint(a.block_table)
    same = make_seq(prompt, tenant="acme")
    assert bm.take_cached_prefix(same) == 12


def test_cached_blocks_are_evicted_least_recently_used_and_tail_first():
    bm = BlockManager(num_blocks=6, block_size=BS)
    old = make_seq(range(0, 8))  # 2 blocks
    new = make_seq(range(100, 108))  # 2 blocks
    compute_all(bm, old)
    bm.free(old)
    compute_all(bm, new)
    bm.free(new)
    # Free queue: 2 never-used blocks, then old's blocks (tail first), then new's (tail first).
    filler = make_seq(range(200, 212))  # takes 3 blocks: 2 empty + old's tail block
    compute_all(bm, filler)
    probe_old = make_seq(list(range(0, 8)) + [1])
    assert bm.take_cached_prefix(probe_old) == 4  # old's first block survived, its tail was evicted
    bm.free(probe_old)
    probe_new = make_seq(list(range(100, 108)) + [1])
    assert bm.take_cached_prefix(probe_new) == 8  # the most recently used prefix is intact


def test_touching_a_cached_block_refreshes_it():
    bm = BlockManager(num_blocks=4, block_size=BS)
    a = make_seq(range(0, 5))  # 1 full block + 1 partial
    b = make_seq(range(100, 105))
    compute_all(bm, a)
    compute_all(bm, b)
    bm.free(a)
    bm.free(b)
    hit = make_seq(list(range(0, 4)) + [9])  # touches a's block: now the most recent
    assert bm.take_cached_prefix(hit) == 4
    bm.free(hit)
    flood = make_seq(range(300, 312))  # needs 3 blocks: 2 partial blocks + b's block go first
    compute_all(bm, flood)
    assert bm.take_cached_prefix(make_seq(list(range(0, 4)) + [9])) == 4


def test_pinned_blocks_survive_a_flood_and_unpin_releases_them():
    bm = BlockManager(num_blocks=20, block_size=BS, max_pinned_blocks=4)
    system = list(range(500, 508))  # 2 blocks
    pin_seq = make_seq(system)
    compute_all(bm, pin_seq)
    bm.pin("tenant:t", pin_seq)
    bm.free(pin_seq)
    for i in range(10):  # many unrelated prompts cycle through every other block
        s = make_seq(range(1000 + 20 * i, 1000 + 20 * i + 16))
        compute_all(bm, s)
        bm.free(s)
    assert bm.pool.num_evictions > 0
    probe = make_seq(system + [1])
    assert bm.take_cached_prefix(probe) == 8
    bm.free(probe)
    assert bm.unpin("tenant:t")
    assert bm.num_pinned_blocks == 0
    assert bm.pool.num_free == 20


def test_a_pin_computed_beside_a_twin_still_survives_a_flood():
    """The pin's prompt and a chat with the same prefix are computed in the same step, and the chat's
    blocks are committed first: the cache names its blocks, not the pin's. The pin must hold the blocks
    a later request hits, or a flood that evicts the chat's (unpinned) blocks loses the prefix."""
    bm = BlockManager(num_blocks=24, block_size=BS, max_pinned_blocks=4)
    system = list(range(500, 508))  # 2 blocks
    pin_seq, twin = make_seq(system), make_seq(system + [1, 2])
    for s in (pin_seq, twin):  # both allocated before either is committed: neither hits the other
        assert bm.take_cached_prefix(s) == 0 and bm.allocate(s, s.num_tokens)
        s.num_computed_tokens = s.num_tokens
    bm.commit(twin)
    pin = bm.pin("tenant:t", pin_seq)
    assert pin.block_ids == twin.block_table[:2] != pin_seq.block_table[:2]  # the blocks the cache names
    bm.free(pin_seq)
    bm.free(twin)
    probe = make_seq(system + [3])
    assert bm.take_cached_prefix(probe) == 8 and probe.block_table == pin.block_ids  # the pinned blocks
    bm.free(probe)
    for i in range(10):  # unrelated prompts cycle through every unpinned block
        s = make_seq(range(1000 + 20 * i, 1000 + 20 * i + 16))
        compute_all(bm, s)
        bm.free(s)
    probe = make_seq(system + [3])
    assert bm.take_cached_prefix(probe) == 8 and probe.block_table == pin.block_ids
    bm.free(probe)
    assert bm.unpin("tenant:t") and bm.pool.num_free == 24
    assert len(bm.pool.cached) == len(set(bm.pool.cached.values()))  # one block per hash


def test_a_prompt_after_a_pin_takes_its_blocks_and_looks_up_only_the_rest(monkeypatch):
    bm = BlockManager(num_blocks=20, block_size=BS, max_pinned_blocks=4)
    system = list(range(500, 512))  # 3 blocks
    pin_seq = make_seq(system)
    compute_all(bm, pin_seq)
    pin = bm.pin("p", pin_seq)
    bm.free(pin_seq)
    longer = make_seq(system + [7, 8, 9, 10, 11])  # one more full block, then its last token
    compute_all(bm, longer)
    question_block = longer.block_table[3]
    bm.free(longer)
    lookups = []
    real_lookup = bm.pool.lookup
    monkeypatch.setattr(bm.pool, "lookup", lambda h: lookups.append(h) or real_lookup(h))
    seq = make_seq(system + [7, 8, 9, 10, 11, 12])
    assert bm.take_cached_prefix(seq) == 16
    assert seq.block_table == pin.block_ids + [question_block] and len(lookups) == 1
    same = make_seq(system)  # exactly the pinned prompt: its last block is computed again
    assert bm.take_cached_prefix(same) == 8 and same.block_table == pin.block_ids[:2]
    assert [bm.pool.ref_cnt[b] for b in pin.block_ids] == [3, 3, 2]  # the pin, seq, same
    bm.free(seq)
    bm.free(same)
    assert bm.unpin("p") and bm.pool.num_free == 20


def test_prompt_after_a_pin_reuses_its_hashes_and_gets_the_chained_ones(monkeypatch):
    """A prompt that starts with a pinned prompt takes the pin's block hashes instead of hashing those
    blocks again; they equal the hashes an unpinned manager computes, and its own blocks after the
    pin are hashed on from the pin's last hash. Another tenant, or a prompt that differs inside the
    pinned range, hashes everything itself."""
    import inference.block_manager as block_manager

    system = list(range(500, 512))  # 3 blocks
    question = [7, 8, 9, 10, 11, 12]  # 1 more full block, then the last tokens
    plain = BlockManager(num_blocks=20, block_size=BS)
    reference = make_seq(system + question)
    plain._extend_hashes(reference, len(system + question))
    bm = BlockManager(num_blocks=20, block_size=BS, max_pinned_blocks=4)
    pin_seq = make_seq(system)
    compute_all(bm, pin_seq)
    bm.pin("p", pin_seq)
    bm.free(pin_seq)
    calls = []
    real_hash = block_manager.hash_block
    monkeypatch.setattr(block_manager, "hash_block", lambda parent, data: calls.append(1) or real_hash(parent, data))
    seq = make_seq(system + question)
    assert bm.take_cached_prefix(seq) == 12
    assert seq.block_hashes == reference.block_hashes[:4]
    assert len(calls) == 1  # only the question's full block
    calls.clear()
    other_tenant = make_seq(system + question, tenant="u")
    assert bm.take_cached_prefix(other_tenant) == 0
    assert len(calls) == 4
    calls.clear()
    changed = make_seq(system[:-1] + [0] + question)  # differs in the pin's last block
    assert bm.take_cached_prefix(changed) == 8
    assert len(calls) == 4
    assert bm.unpin("p")
    calls.clear()
    after_unpin = make_seq(system + question)
    bm.take_cached_prefix(after_unpin)
    assert len(calls) == 4 and after_unpin.block_hashes == reference.block_hashes[:4]


def test_pin_cap_is_enforced_and_repin_replaces():
    bm = BlockManager(num_blocks=20, block_size=BS, max_pinned_blocks=3)
    bm.check_pin_capacity("a", 12)  # 3 blocks: fits
    with pytest.raises(PinCapacityError, match="pin cap"):
        bm.check_pin_capacity("a", 16)
    first = make_seq(range(12))
    compute_all(bm, first)
    bm.pin("a", first)
    bm.free(first)
    with pytest.raises(PinCapacityError):
        bm.check_pin_capacity("b", 4)
    bm.check_pin_capacity("a", 12)  # re-pinning under the same key replaces, so it fits
    second = make_seq(range(40, 52))
    compute_all(bm, second)
    bm.pin("a", second)
    bm.free(second)
    assert bm.num_pinned_blocks == 3
    assert bm.pool.num_free == 17


def test_tenant_stats_count_used_cached_and_pinned():
    bm = BlockManager(num_blocks=20, block_size=BS, max_pinned_blocks=5)
    a = make_seq(range(9), tenant="acme")
    compute_all(bm, a)
    stats = bm.tenant_stats()
    assert stats["acme"]["num_blocks_used"] == 3
    assert stats["acme"]["num_blocks_cached"] == 2


def test_token_bytes_are_the_int64_bytes_of_the_tokens_in_every_range():
    """Block hashes are computed over Sequence.token_bytes: the prompt part comes from the int64 array
    that validation built (or one built on first use), the rest from the token lists."""
    from array import array

    from inference.sampling_params import SamplingParams
    from inference.sequence import Sequence

    prompt = [7, 2**40, 0, 31999, 5]
    for given in (None, array("q", prompt)):
        seq = Sequence("t", list(prompt), SamplingParams(), prompt_array=given)
        seq.output_token_ids += [11, 12, 13]
        for start, stop in ((0, 5), (1, 4), (0, 8), (3, 7), (5, 8), (6, 7), (2, 2)):
            assert seq.token_bytes(start, stop) == array("q", seq.token_ids(start, stop)).tobytes()


def test_with_caching_off_nothing_is_hashed_registered_or_found():
    bm = BlockManager(num_blocks=10, block_size=BS, enable_caching=False)
    for _ in range(2):  # the second time the same prompt finds nothing either
        seq = make_seq(range(9))
        assert bm.take_cached_prefix(seq) == 0
        compute_all(bm, seq)
        assert seq.block_hashes == [] and bm.pool.num_cached == 0
        bm.free(seq)
    assert bm.num_hit_tokens == 0 and bm.pool.num_free == bm.pool.num_blocks
