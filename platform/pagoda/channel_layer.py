"""The channel layer of a server without REDIS_URL: channels' in-memory layer, swept once a second.

channels' InMemoryChannelLayer sweeps every channel and every group for expired entries on each
receive and each send to a group. Every chat socket receives from its own channel and has joined its
conversation's group, and a reply tells its group each frame (chat.follow): that sweep made each frame
cost Python work in proportion to the sockets open in the process. Messages expire after a minute
and group memberships after a day, so a sweep once a second removes them at the same time to a client.
"""
from __future__ import annotations

import time

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

SWEEP_INTERVAL_S = 1.0


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    swept_at = float("-inf")

    def _clean_expired(self):
        now = time.monotonic()
        if now - self.swept_at >= SWEEP_INTERVAL_S:
            self.swept_at = now
            super()._clean_expired()

    async def group_send(self, group, message):
        # channels makes a task per member and waits for them all; send() never waits (a full channel
        # raises at once), so the members are sent to in turn.
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            try:
                await self.send(channel, message)
            except ChannelFull:
                pass
