"""The chat page and its history: thin views that check access, call selectors/services and render.

The conversation itself is spoken over the WebSocket (chat.consumers); these views list, open, create,
rename, pin, search, export (Markdown; the JSON export is governance's) and delete conversations, and
take the files attached to a message (chat.attachments).
Someone else's conversation, or one of a tenant the user left, is a 404 everywhere, as a missing one.
Rename and pin answer JSON to the page's script (Accept: application/json) and redirect a plain form.
"""
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

import engine_runtime
from chat import (attachments as chat_attachments, export_md, feedback as chat_feedback, history, search as chat_search,
                  selectors, services, ui_text)
from chat.errors import AttachmentError
from engine_runtime import EngineUnavailable
from chat.models import Conversation
from tenants import selectors as tenant_selectors


def _page(request, tenants, conversations, conversation: Conversation | None):
    stale_cutoff = services.stale_cutoff(settings.PAGODA_CHAT_STALE_REPLY_SECONDS)  # such replies shown failed
    tenant = conversation.tenant if conversation is not None else None
    profiles = list(tenant_selectors.profiles(tenant)) if tenant is not None else []
    selected = conversation.profile if conversation is not None and conversation.profile in profiles else None
    selected = selected or next((p for p in profiles if p.is_default), None) or (profiles[0] if profiles else None)
    context = {
        "tenants": tenants,
        "conversations": conversations,
        "conversation": conversation,
        # every branch's messages: the page shows the current branch and pages through the others
        "thread": _with_feedback(request.user, selectors.page_messages(conversation, stale_cutoff)) if conversation else [],
        "profiles": profiles,
        "selected_profile": selected,
        "show_tenant": len(tenants) > 1,
        "can_administer": request.user.is_superuser or tenant_selectors.is_any_tenant_admin(request.user),
        "chat_config": {
            "conversationId": conversation.pk if conversation is not None else None,
            "wsPath": f"/ws/chat/{conversation.pk}/" if conversation is not None else None,
            "maxChars": settings.PAGODA_CHAT_MAX_MESSAGE_CHARS,
            "attachUrl": reverse("chat:attach", args=[conversation.pk]) if conversation is not None else None,
            "feedbackUrl": reverse("chat:feedback", args=[conversation.pk, 0]) if conversation is not None else None,
            "loginUrl": f"{reverse('login')}?next={request.path}",
            "strings": ui_text.page_strings(settings.PAGODA_CHAT_MAX_MESSAGE_CHARS),
        },
    }
    return render(request, "chat/page.html", context)


def _with_feedback(user, thread: list) -> list:
    """The thread, each reply carrying `feedback_rating` ("up" / "down" / None) and `feedback_comment`."""
    given = selectors.feedback_by_message(user, [m.pk for m in thread])
    for message in thread:
        feedback = given.get(message.pk)
        message.feedback_rating = chat_feedback.rating_name(feedback.rating) if feedback else None
        message.feedback_comment = feedback.comment if feedback else ""
    return thread


@login_required
def index(request):
    """The newest conversation, or the empty page with "New chat" (or a note when the user has no tenant)."""
    tenants = list(tenant_selectors.tenants_for_user(request.user))
    conversations = selectors.sidebar(request.user, tenants)
    if conversations:
        return redirect("chat:conversation", conversation_id=conversations[0].pk)
    return _page(request, tenants, conversations, None)


@login_required
def conversation(request, conversation_id: int):
    found = selectors.conversation_for_user(request.user, conversation_id)
    if found is None:
        raise Http404("No such conversation")
    tenants = list(tenant_selectors.tenants_for_user(request.user))
    return _page(request, tenants, selectors.sidebar(request.user, tenants), found)


@login_required
@require_POST
def new(request):
    """Open a fresh conversation in the chosen tenant (the first one when the user has only one)."""
    tenants = tenant_selectors.tenants_for_user(request.user)
    tenant = tenants.filter(slug=request.POST.get("tenant", "")).first() or tenants.order_by("name").first()
    if tenant is None:
        return redirect("chat:index")
    return redirect("chat:conversation", conversation_id=services.new_conversation(request.user, tenant).pk)


@login_required
@require_POST
def delete(request, conversation_id: int):
    if not services.delete_conversation(request.user, conversation_id):
        raise Http404("No such conversation")
    return redirect("chat:index")


def _own(request, conversation_id: int) -> Conversation:
    found = selectors.conversation_for_user(request.user, conversation_id)
    if found is None:
        raise Http404("No such conversation")
    return found


def _wants_json(request) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _back(request, conversation: Conversation):
    """Where a plain form returns: its `next` if that is a page of this site, else the conversation."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect("chat:conversation", conversation_id=conversation.pk)


@login_required
@require_POST
def rename(request, conversation_id: int):
    """POST title=...: 200 {"id", "title"} (or a redirect); 400 {"error": {"field", "message"}} for a bad title."""
    conversation = _own(request, conversation_id)
    try:
        title = history.rename_conversation(conversation, request.POST.get("title", ""))
    except ValidationError as error:
        message = " ".join(error.message_dict.get("title", error.messages))
        return JsonResponse({"error": {"field": "title", "message": message}}, status=400)
    if _wants_json(request):
        return JsonResponse({"id": conversation.pk, "title": title})
    return _back(request, conversation)


@login_required
@require_POST
def pin(request, conversation_id: int):
    """POST pinned=1 pins the conversation to the top of the sidebar, pinned=0 unpins it."""
    conversation = _own(request, conversation_id)
    value = request.POST.get("pinned", "")
    if value not in {"0", "1"}:
        return JsonResponse({"error": {"field": "pinned", "message": 'pinned must be "1" or "0".'}}, status=400)
    history.set_pinned(conversation, value == "1")
    if _wants_json(request):
        return JsonResponse({"id": conversation.pk, "pinned": conversation.is_pinned})
    return _back(request, conversation)


@login_required
@require_POST
def feedback(request, conversation_id: int, message_id: int):
    """POST rating=up|down (or "" to take it back), comment=...: 200 {"message_id", "rating", "comment"};
    400 {"error": {"field", "message"}}; 404 for a reply that is not in one of the user's conversations."""
    reply = selectors.reply_for_user(request.user, conversation_id, message_id)
    if reply is None:
        raise Http404("No such reply")
    try:
        saved = chat_feedback.set_feedback(request.user, reply, rating=request.POST.get("rating", ""),
                                           comment=request.POST.get("comment", ""))
    except ValidationError as error:
        field, messages = next(iter(error.message_dict.items()))
        return JsonResponse({"error": {"field": field, "message": " ".join(messages)}}, status=400)
    return JsonResponse({"message_id": reply.pk, "rating": chat_feedback.rating_name(saved.rating) if saved else None,
                         "comment": saved.comment if saved else ""})


@login_required
@require_GET
def search(request):
    """GET ?q=...: the user's conversations whose title or messages match, as JSON
    {"query", "results": [{"id", "title", "tenant", "url", "snippet"}]} or as a page."""
    query = request.GET.get("q", "")
    try:
        hits = chat_search.search(request.user, query)
    except ValueError as error:
        return JsonResponse({"error": {"field": "q", "message": str(error)}}, status=400)
    results = [{"id": h.conversation.pk, "title": h.conversation.title, "tenant": h.conversation.tenant.name,
                "url": reverse("chat:conversation", args=[h.conversation.pk]), "snippet": h.snippet} for h in hits]
    if _wants_json(request):
        return JsonResponse({"query": query, "results": results})
    return render(request, "chat/search.html", {"query": query, "results": results})


@login_required
@require_GET
def export_markdown(request, conversation_id: int):
    conversation = _own(request, conversation_id)
    response = HttpResponse(export_md.conversation_markdown(conversation), content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="pagoda-conversation-{conversation.pk}.md"'
    return response


def _attachment_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


@login_required
@require_POST
def attach(request, conversation_id: int):
    """POST a multipart `file` (plain text, Markdown, PDF, DOCX): 201 {"id", "name", "kind", "size_bytes",
    "num_chars", "num_tokens", "max_tokens", "url"}, a draft the next user_message may carry; 4xx
    {"error": {"code", "message"}} for a file that cannot be read, is too big or does not fit the
    context; 503 while the model is not loaded (its tokenizer counts the tokens)."""
    conversation = _own(request, conversation_id)
    limit = settings.PAGODA_CHAT_MAX_ATTACHMENT_BYTES
    too_big = _("Files up to %(limit)s MB can be attached.") % {"limit": f"{limit / 1e6:g}"}
    try:  # refused before the body is read: a huge upload is not stored first
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit + 64 * 1024:  # the multipart framing around the file
        return _attachment_error("too_large", too_big, 413)
    upload = request.FILES.get("file")
    if upload is None:
        return _attachment_error("no_file", _("Choose a file to attach."), 400)
    if upload.size > limit:
        return _attachment_error("too_large", too_big, 413)
    try:
        engine = engine_runtime.get_engine(timeout=0)
    except EngineUnavailable as error:
        return _attachment_error("engine_unavailable", _("The model is not available right now (%(reason)s). "
                                                         "Try again in a moment.") % {"reason": error.reason}, 503)
    try:
        attachment = chat_attachments.add_draft(conversation, upload.name, upload.read(),
                                                count_tokens=engine.count_tokens, max_model_len=engine.max_model_len)
    except AttachmentError as error:
        return _attachment_error(error.code, error.message, error.status)
    return JsonResponse({
        "id": attachment.pk, "name": attachment.name, "kind": attachment.kind, "size_bytes": attachment.size_bytes,
        "num_chars": len(attachment.text), "num_tokens": attachment.num_tokens,
        "max_tokens": chat_attachments.token_budget(engine.max_model_len),
        "url": reverse("chat:attachment", args=[attachment.pk]),
    }, status=201)


@login_required
@require_GET
def attachment_text(request, attachment_id: int):
    """The text extracted from an attachment (what the model read), as plain text."""
    attachment = selectors.attachment_for_user(request.user, attachment_id)
    if attachment is None:
        raise Http404("No such attachment")
    response = HttpResponse(attachment.text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{_ascii_name(attachment.name)}.txt"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_POST
def detach(request, attachment_id: int):
    """Remove an attachment not sent yet (204); one that went with a message stays with it (409)."""
    attachment = selectors.attachment_for_user(request.user, attachment_id)
    if attachment is None:
        raise Http404("No such attachment")
    if attachment.message_id is not None:
        return _attachment_error("already_sent", _("This file went with a message; it stays with it."), 409)
    attachment.delete()
    return HttpResponse(status=204)


def _ascii_name(name: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "._- ") else "_" for c in name)[:100] or "attachment"
