"""Search over a user's own conversations: their titles and the text of their messages.

On PostgreSQL the messages are matched by full-text search (websearch syntax: words, "a phrase",
-excluded; the "simple" configuration, since chats mix Korean and English and no stemmer serves
both), ranked by relevance; titles also match by substring. Elsewhere (SQLite in development)
a case-insensitive substring match stands in. Only conversations the user may open are searched:
their own, in tenants they are still an active member of.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Q

from chat.models import Conversation, Message

MAX_QUERY_CHARS = 200
MAX_RESULTS = 50
SNIPPET_CHARS = 160


@dataclass(frozen=True)
class Hit:
    """One conversation found, with the text around the first match (a title match has no snippet)."""

    conversation: Conversation
    snippet: str


def searchable(user) -> Q:
    return Q(user=user, tenant__is_active=True, tenant__memberships__user=user)


def search(user, query: str) -> list[Hit]:
    """The user's conversations matching `query`, best first (at most MAX_RESULTS); [] for a blank query.
    ValueError when the query is longer than MAX_QUERY_CHARS."""
    query = " ".join(query.split())
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"A search holds at most {MAX_QUERY_CHARS} characters.")
    if not query:
        return []
    conversations = Conversation.objects.filter(searchable(user)).select_related("tenant")
    messages = Message.objects.filter(conversation__in=conversations.values("pk")).exclude(role=Message.Role.SYSTEM)
    if connection.vendor == "postgresql":
        matched_ids = _full_text_conversation_ids(messages, query)
    else:
        matched_ids = list(messages.filter(content__icontains=query).values_list("conversation_id", flat=True)
                           .order_by("-created_at")[:500])
    by_title = conversations.filter(title__icontains=query).order_by("-updated_at").values_list("pk", flat=True)
    ordered = list(dict.fromkeys([*by_title[:MAX_RESULTS], *matched_ids]))[:MAX_RESULTS]
    found = conversations.in_bulk(ordered)
    return [Hit(found[pk], _snippet(found[pk], query)) for pk in ordered if pk in found]


def _full_text_conversation_ids(messages, query: str) -> list[int]:
    from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

    vector = SearchVector("content", config="simple")
    wanted = SearchQuery(query, search_type="websearch", config="simple")
    rows = (messages.annotate(document=vector, rank=SearchRank(vector, wanted)).filter(document=wanted)
            .order_by("-rank", "-created_at").values_list("conversation_id", flat=True)[:500])
    return list(rows)


def _snippet(conversation: Conversation, query: str) -> str:
    """The text around the first occurrence of a query word in the conversation's messages, else ""."""
    words = [w.strip('"').lower() for w in query.split() if not w.startswith("-") and w.strip('"')]
    for content in (Message.objects.filter(conversation=conversation).exclude(role=Message.Role.SYSTEM)
                    .order_by("created_at", "id").values_list("content", flat=True)):
        lowered = content.lower()
        at = min((lowered.find(w) for w in words if w in lowered), default=-1)
        if at >= 0:
            start = max(0, at - SNIPPET_CHARS // 3)
            text = " ".join(content[start:start + SNIPPET_CHARS].split())
            return ("…" if start else "") + text + ("…" if start + SNIPPET_CHARS < len(content) else "")
    return ""
