"""BlockPool: the KV-cache blocks, their reference counts, the free queue and the prefix-cache index.

A block is free when no sequence (and no pin) holds it. Free blocks wait in one LRU queue: the front is
handed out first. A free block may still carry a hash: it is then *cached* (its K/V are valid for that
hash) until it is handed out again, when its hash is dropped (lazy eviction).
"""
from __future__ import annotations

from collections import Counter, OrderedDict


class BlockPool:
    """Plain-int bookkeeping of `num_blocks` blocks; no tensors live here."""

    def __init__(self, num_blocks: int, enable_caching: bool = True):
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.ref_cnt = [0] * num_blocks
        self.block_hash: list[bytes | None] = [None] * num_blocks
        self.owner: list[str | None] = [None] * num_blocks  # tenant of the block's tokens
        # OrderedDict is a doubly-linked list: O(1) pop from the front and removal from the middle
        # (a cached block hit while free).
        self.free_queue: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.cached: dict[bytes, int] = {}
        self.num_used_by_tenant: Counter[str | None] = Counter()
        self.num_evictions = 0

    @property
    def num_free(self) -> int:
        """Blocks that can be handed out now (cached-but-free blocks included)."""
        return len(self.free_queue)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free_queue)

    @property
    def num_cached(self) -> int:
        """Blocks holding reusable K/V (in use or free)."""
        return len(self.cached)

    def allocate(self, num: int, tenant: str | None) -> list[int]:
        """Hand out `num` blocks from the front of the free queue, evicting their old hashes."""
        if num > len(self.free_queue):
            raise RuntimeError(f"asked for {num} blocks, {len(self.free_queue)} free")
        block_ids = []
        for _ in range(num):
            block_id, _ = self.free_queue.popitem(last=False)
            old_hash = self.block_hash[block_id]
            if old_hash is not None:
                if self.cached.get(old_hash) == block_id:
                    del self.cached[old_hash]
                self.block_hash[block_id] = None
                self.num_evictions += 1
            self.ref_cnt[block_id] = 1
            self.owner[block_id] = tenant
            self.num_used_by_tenant[tenant] += 1
            block_ids.append(block_id)
        return block_ids

    def lookup(self, block_hash: bytes) -> int | None:
        return self.cached.get(block_hash)

    def touch(self, block_ids: list[int]) -> None:
        """Take one more reference on each block (a prefix hit, or a pin)."""
        for block_id in block_ids:
            if self.ref_cnt[block_id] == 0:
                del self.free_queue[block_id]
                self.num_used_by_tenant[self.owner[block_id]] += 1
            self.ref_cnt[block_id] += 1

    def release(self, block_ids: list[int]) -> None:
        """Drop one reference on each block, in the order given.

        A block that becomes free goes to the back of the queue if it is cached (the most recently used
        is evicted last) and to the front if it is not (it holds nothing worth keeping).
        """
        for block_id in block_ids:
            self.ref_cnt[block_id] -= 1
            if self.ref_cnt[block_id] < 0:
                raise RuntimeError(f"block {block_id} released more often than taken")
            if self.ref_cnt[block_id] == 0:
                self.num_used_by_tenant[self.owner[block_id]] -= 1
                self.free_queue[block_id] = None
                if self.block_hash[block_id] is None:
                    self.free_queue.move_to_end(block_id, last=False)

    def cache(self, block_id: int, block_hash: bytes) -> None:
        """Record that `block_id` holds the K/V of the full block `block_hash`."""
        if not self.enable_caching or self.block_hash[block_id] is not None:
            return
        if block_hash in self.cached:  # another block computed the same tokens first
            return
        self.cached[block_hash] = block_id
        self.block_hash[block_id] = block_hash
