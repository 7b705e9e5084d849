"""BlockManager: gives sequences their KV blocks, finds cached prefixes, holds pins and tenant quotas.

Every full block is named by a hash chained from its parent's hash and its tokens. The chain of each
tenant starts from its own salt, so two tenants with the same prompt never share a block (no
cross-tenant reuse, hence no timing side channel), while all requests of one tenant share it.
"""
from __future__ import annotations

import hashlib
from array import array
from collections import Counter
from dataclasses import dataclass

from .block_pool import BlockPool
from .errors import PinCapacityError
from .sequence import Sequence


def salt_hash(tenant: str | None) -> bytes:
    """The root of a tenant's hash chain."""
    return hashlib.blake2b(b"pagoda-tenant:" + (tenant or "").encode(), digest_size=16).digest()


_TOKEN_BYTES = array("q").itemsize


def hash_block(parent: bytes, token_bytes: bytes) -> bytes:
    """A full block's name: its parent's hash and its token ids as int64 bytes."""
    return hashlib.blake2b(parent + token_bytes, digest_size=16).digest()


@dataclass
class Pin:
    key: str
    tenant: str | None
    block_ids: list[int]
    num_tokens: int  # tokens covered by the pinned blocks (whole blocks only)
    num_prompt_tokens: int  # tokens asked to be pinned
    block_hashes: list[bytes]  # the pinned blocks' hashes, in order
    token_bytes: bytes  # their tokens as int64 bytes: a prompt that starts with these reuses the hashes


class BlockManager:
    """Block allocation for sequences on top of a BlockPool. Plain ints in, so it is tested alone."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = True,
                 max_pinned_blocks: int = 0, tenant_max_blocks: int | None = None):
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.pool = BlockPool(num_blocks, enable_caching)
        self.max_pinned_blocks = max_pinned_blocks
        self.tenant_max_blocks = tenant_max_blocks
        self.pins: dict[str, Pin] = {}
        self._pinned_refs: Counter[int] = Counter()  # block id -> number of pins holding it
        self._pins_by_tenant: dict[str | None, dict[str, Pin]] = {}
        self.num_queried_tokens = 0  # prompt tokens looked up in the prefix cache
        self.num_hit_tokens = 0  # of which served from it
        self._queries_by_tenant: dict[str | None, list[int]] = {}  # tenant -> [queried, hit] tokens

    # -- hashing ------------------------------------------------------------------------------
    def _extend_hashes(self, seq: Sequence, num_tokens: int) -> Pin | None:
        """Make sure seq.block_hashes covers every full block among its first `num_tokens` tokens.
        Returns the pin whose hashes the sequence's start took, if it took one's."""
        bs = self.block_size
        hashes = seq.block_hashes
        have, want = len(hashes), num_tokens // bs
        if want <= have:
            return None
        # One conversion of the missing blocks' tokens, then a hash per block of bytes: a 2,000-token
        # prompt is hashed on the critical path of its TTFT.
        data = seq.token_bytes(have * bs, want * bs)
        width = bs * _TOKEN_BYTES
        done = 0
        pin = None
        if not hashes:
            # A prompt that starts with one of its tenant's pinned prompts (a chat turn after the
            # system prompt) takes that pin's hashes: one byte comparison instead of ~125 hashes. They
            # are the same hashes by construction: same salt, same tokens.
            pin = self._longest_pin_prefix(seq.tenant, data)
            if pin is not None:
                hashes.extend(pin.block_hashes)
                done = len(pin.token_bytes)
        parent = hashes[-1] if hashes else salt_hash(seq.tenant)
        for start in range(done, len(data), width):
            parent = hash_block(parent, data[start:start + width])
            hashes.append(parent)
        return pin

    def _longest_pin_prefix(self, tenant: str | None, data: bytes) -> Pin | None:
        best = None
        for pin in self._pins_by_tenant.get(tenant, {}).values():
            if (pin.token_bytes and (best is None or len(pin.token_bytes) > len(best.token_bytes))
                    and data.startswith(pin.token_bytes)):
                best = pin
        return best

    # -- admission and growth ---------------------------------------------------------------------
    def num_blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        total = -(-(seq.num_computed_tokens + num_new_tokens) // self.block_size)
        return max(0, total - len(seq.block_table))

    def tenant_allows(self, seq: Sequence, num_new_blocks: int) -> bool:
        if self.tenant_max_blocks is None:
            return True
        return self.pool.num_used_by_tenant[seq.tenant] + num_new_blocks <= self.tenant_max_blocks

    def take_cached_prefix(self, seq: Sequence) -> int:
        """Attach the longest run of cached blocks to a sequence that holds none. Returns tokens hit.

        Only tokens whose logits are not needed are taken (Sequence.num_cacheable_tokens): never the
        last one, which is sampled, nor those of a request that wants prompt logprobs.
        """
        assert not seq.block_table and seq.num_computed_tokens == 0
        if not self.enable_caching:
            return 0
        max_blocks = seq.num_cacheable_tokens // self.block_size
        pin = self._extend_hashes(seq, max_blocks * self.block_size)
        # A pin's blocks are the ones the cache names for its hashes, and are never evicted (see pin()):
        # a chat turn after its tenant's system prompt looks up only the blocks past it.
        hit_ids = pin.block_ids[:max_blocks] if pin is not None else []
        for h in seq.block_hashes[len(hit_ids):max_blocks]:
            block_id = self.pool.lookup(h)
            if block_id is None:
                break
            hit_ids.append(block_id)
        self.pool.touch(hit_ids)
        seq.block_table = hit_ids
        seq.num_computed_tokens = len(hit_ids) * self.block_size
        seq.num_committed_blocks = len(hit_ids)
        return seq.num_computed_tokens

    def record_query(self, num_prompt_tokens: int, num_hit_tokens: int, tenant: str | None = None) -> None:
        """Count one admitted request's prompt lookup, in the totals and in its tenant's row."""
        self.num_queried_tokens += num_prompt_tokens
        self.num_hit_tokens += num_hit_tokens
        row = self._queries_by_tenant.setdefault(tenant, [0, 0])
        row[0] += num_prompt_tokens
        row[1] += num_hit_tokens

    def allocate(self, seq: Sequence, num_new_tokens: int) -> bool:
        """Give `seq` the blocks for `num_new_tokens` more tokens. False (and no change) if none left."""
        needed = self.num_blocks_needed(seq, num_new_tokens)
        if needed > self.pool.num_free:
            return False
        if needed:
            seq.block_table.extend(self.pool.allocate(needed, seq.tenant))
        return True

    def commit(self, seq: Sequence) -> None:
        """Register the blocks that this step filled, so later requests can reuse them."""
        if not self.enable_caching:
            return
        num_full = seq.num_computed_tokens // self.block_size
        if num_full <= seq.num_committed_blocks:
            return
        self._extend_hashes(seq, num_full * self.block_size)
        for i in range(seq.num_committed_blocks, num_full):
            self.pool.cache(seq.block_table[i], seq.block_hashes[i])
        seq.num_committed_blocks = num_full

    def free(self, seq: Sequence) -> None:
        """Return a sequence's blocks, tail first: the least reusable blocks are evicted first."""
        self.pool.release(seq.block_table[::-1])
        seq.block_table = []
        seq.num_committed_blocks = 0

    # -- pins --------------------------------------------------------------------------------------
    @property
    def num_pinned_blocks(self) -> int:
        return len(self._pinned_refs)

    def check_pin_capacity(self, key: str, num_prompt_tokens: int) -> None:
        """Raise PinCapacityError if pinning this many tokens under `key` would pass the cap."""
        new_blocks = num_prompt_tokens // self.block_size
        old = self.pins.get(key)
        # Count as if the old pin under this key were already gone: a re-pin replaces it.
        current = self.num_pinned_blocks - (
            sum(1 for b in old.block_ids if self._pinned_refs[b] == 1) if old else 0)
        if current + new_blocks > self.max_pinned_blocks:
            raise PinCapacityError(
                f"pinning {new_blocks} blocks for {key!r} would exceed the pin cap: "
                f"{current} of {self.max_pinned_blocks} pinned blocks already in use")

    def pin(self, key: str, seq: Sequence) -> Pin:
        """Pin the full blocks of a sequence whose prompt has been computed; replaces an old pin."""
        num_full = seq.num_prompt_tokens // self.block_size
        self.commit(seq)
        block_ids = seq.block_table[:num_full]
        if self.enable_caching:
            # Where another sequence computed the same block in the same step and was committed first,
            # the cache names its block, not this one: pin that one, which later requests will hit.
            # (This sequence's copy, unnamed, goes back first in the free queue when it ends.)
            block_ids = [self.pool.lookup(h) for h in seq.block_hashes[:num_full]]
        self.pool.touch(block_ids)
        for b in block_ids:
            self._pinned_refs[b] += 1
        old = self.pins.get(key)
        num_tokens = num_full * self.block_size
        hashes = seq.block_hashes[:num_full] if self.enable_caching else []
        token_bytes = seq.token_bytes(0, num_tokens) if hashes else b""
        pin = Pin(key, seq.tenant, block_ids, num_tokens, seq.num_prompt_tokens, hashes, token_bytes)
        if old is not None:
            self._release_pin(old)
        self.pins[key] = pin
        self._pins_by_tenant.setdefault(seq.tenant, {})[key] = pin
        return pin

    def unpin(self, key: str) -> bool:
        pin = self.pins.pop(key, None)
        if pin is None:
            return False
        self._release_pin(pin)
        return True

    def _release_pin(self, pin: Pin) -> None:
        by_key = self._pins_by_tenant.get(pin.tenant, {})
        if by_key.get(pin.key) is pin:
            del by_key[pin.key]
            if not by_key:
                del self._pins_by_tenant[pin.tenant]
        for b in pin.block_ids:
            self._pinned_refs[b] -= 1
            if self._pinned_refs[b] == 0:
                del self._pinned_refs[b]
        self.pool.release(pin.block_ids[::-1])

    # -- stats -------------------------------------------------------------------------------------
    def tenant_stats(self) -> dict[str | None, dict[str, int]]:
        stats: dict[str | None, dict[str, int]] = {}

        def row(t):
            return stats.setdefault(t, {"num_blocks_used": 0, "num_blocks_cached": 0,
                                        "num_blocks_pinned": 0})

        for t, n in self.pool.num_used_by_tenant.items():
            if n:
                row(t)["num_blocks_used"] = n
        for block_id in self.pool.cached.values():
            row(self.pool.owner[block_id])["num_blocks_cached"] += 1
        for b in self._pinned_refs:
            row(self.pool.owner[b])["num_blocks_pinned"] += 1
        for t, (queried, hit) in self._queries_by_tenant.items():
            row(t).update(prefix_cache_queries=queried, prefix_cache_hits=hit)
        return stats
