"""The chat page script's strings, in the request's language (English or Korean: chat/locale/).

The server's error frames carry English `message`s for logs and programs; the page shows the
translation of their `code` when it has one (the "error_*" keys), else the message itself.
"""
from django.utils.translation import gettext as _


def page_strings(max_chars: int) -> dict[str, str]:
    return {
        "you": _("You"),
        "assistant": _("Assistant"),
        "send": _("Send"),
        "stop": _("Stop"),
        "regenerate": _("Regenerate"),
        "copy": _("Copy"),
        "delete": _("Delete"),
        "confirm_delete": _("Delete this conversation?"),
        "rename_prompt": _("New title of this conversation:"),
        "search_none": _("Nothing found."),
        "untitled": _("Untitled"),
        "previous_version": _("Previous version"),
        "next_version": _("Next version"),
        "copied": _("Copied"),
        "stopped": _("Stopped"),
        "error": _("Error"),
        "generating": _("Generating…"),
        "connecting": _("Connecting…"),
        "connected": _("Connected"),
        "reconnecting": _("Connection lost; reconnecting…"),
        "usage": _("{prompt} prompt · {completion} reply · {cached} cached tokens"),
        "counter": _("{count} / {max} characters"),
        "too_long": _("This message has {count} characters; a message holds at most {max}. Shorten it."),
        "paste_too_long": _("Not pasted: the message would have {count} characters, more than the {max} allowed. "
                            "Paste a shorter part."),
        "cut_by_length": _("Cut at the length limit"),
        "continue": _("Continue"),
        "continue_prompt": _("Continue exactly where your last reply stopped."),
        "closed_4401": _("Your session has ended. Log in again."),
        "closed_4403": _("This conversation belongs to someone else."),
        "closed_4404": _("This conversation no longer exists."),
        "error_empty_message": _("The message is empty."),
        "error_message_too_long": _("The message is too long (at most %(max)s characters).") % {"max": f"{max_chars:,}"},
        "error_context_length_exceeded": _("The message is too long for the model's context. Shorten it."),
        "error_engine_unavailable": _("The model is not available right now. Try again in a moment."),
        "error_engine_overloaded": _("The model is busy. Try again in a moment."),
        "error_reply_not_saved": _("The reply could not be saved. Try again in a moment."),
        "error_busy": _("A reply is still being written. Stop it first."),
        "error_reply_in_progress": _("A reply is already being written in another tab. Wait for it, or stop it."),
        "other_tab": _("Being written in another tab…"),
        "error_unknown_profile": _("That profile does not exist."),
        "error_nothing_to_regenerate": _("There is nothing to regenerate yet."),
        "error_invalid_json": _("The page sent a malformed frame. Reload the page."),
        "error_invalid_frame": _("The page sent a malformed frame. Reload the page."),
        "error_signed_out": _("Your session has ended. Log in again."),
        "error_access_revoked": _("You no longer have access to this organisation's chat."),
        "error_conversation_gone": _("This conversation no longer exists."),
    }
