"""The chat page and its history: thin views that check access, call selectors/services and render.

The conversation itself is spoken over the WebSocket (chat.consumers); these views list, open, create
and delete conversations.
"""
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from chat import selectors, services, ui_text
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
        "thread": selectors.thread(conversation, stale_cutoff) if conversation is not None else [],
        "profiles": profiles,
        "selected_profile": selected,
        "show_tenant": len(tenants) > 1,
        "can_administer": request.user.is_superuser or tenant_selectors.is_any_tenant_admin(request.user),
        "chat_config": {
            "conversationId": conversation.pk if conversation is not None else None,
            "wsPath": f"/ws/chat/{conversation.pk}/" if conversation is not None else None,
            "maxChars": settings.PAGODA_CHAT_MAX_MESSAGE_CHARS,
            "loginUrl": f"{reverse('login')}?next={request.path}",
            "strings": ui_text.page_strings(settings.PAGODA_CHAT_MAX_MESSAGE_CHARS),
        },
    }
    return render(request, "chat/page.html", context)


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
