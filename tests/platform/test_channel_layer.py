"""pagoda.channel_layer: channels' in-memory layer with its expiry sweep at most once a second."""
import pytest
from channels.exceptions import ChannelFull

from pagoda import channel_layer
from pagoda.channel_layer import InMemoryChannelLayer


async def test_a_group_send_reaches_every_member_and_a_full_one_does_not_stop_the_rest():
    layer = InMemoryChannelLayer(capacity=1)
    first, full, last = [await layer.new_channel() for _ in range(3)]
    for channel in (first, full, last):
        await layer.group_add("conversation", channel)
    await layer.send(full, {"type": "earlier"})
    with pytest.raises(ChannelFull):
        await layer.send(full, {"type": "one too many"})

    await layer.group_send("conversation", {"type": "chat.follow", "frame": "안녕"})
    assert await layer.receive(first) == {"type": "chat.follow", "frame": "안녕"}
    assert await layer.receive(full) == {"type": "earlier"}
    assert await layer.receive(last) == {"type": "chat.follow", "frame": "안녕"}


async def test_expired_messages_and_memberships_are_swept_once_the_interval_passed(monkeypatch):
    clock = {"wall": 1000.0, "monotonic": 50.0}
    monkeypatch.setattr(channel_layer.time, "monotonic", lambda: clock["monotonic"])
    monkeypatch.setattr("channels.layers.time.time", lambda: clock["wall"])
    layer = InMemoryChannelLayer(expiry=60)
    stale, other = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("conversation", stale)
    await layer.group_add("conversation", other)
    await layer.group_send("conversation", {"type": "chat.follow"})  # sweeps: nothing expired yet
    assert await layer.receive(other) == {"type": "chat.follow"}  # `stale` never reads its copy

    clock["wall"] += 61  # the unread copy has expired
    clock["monotonic"] += 0.5
    await layer.group_send("conversation", {"type": "not swept yet"})
    assert stale in layer.groups["conversation"]  # within a second of the last sweep: none

    clock["monotonic"] += 0.6
    await layer.group_send("conversation", {"type": "after the sweep"})
    # The sweep dropped `stale`'s expired message and, as channels does, its membership.
    assert stale not in layer.groups["conversation"]
    assert await layer.receive(other) == {"type": "not swept yet"}
    assert await layer.receive(other) == {"type": "after the sweep"}
