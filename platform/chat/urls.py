"""Mounted at the site root (pagoda.urls): the chat page under /chat/. The socket is in chat.routing."""
from django.urls import path

from chat import views

app_name = "chat"
urlpatterns = [
    path("chat/", views.index, name="index"),
    path("chat/new/", views.new, name="new"),
    path("chat/search/", views.search, name="search"),
    path("chat/<int:conversation_id>/", views.conversation, name="conversation"),
    path("chat/<int:conversation_id>/delete/", views.delete, name="delete"),
    path("chat/<int:conversation_id>/rename/", views.rename, name="rename"),
    path("chat/<int:conversation_id>/pin/", views.pin, name="pin"),
    path("chat/<int:conversation_id>/messages/<int:message_id>/feedback/", views.feedback, name="feedback"),
    path("chat/<int:conversation_id>/export.md", views.export_markdown, name="export_md"),
    path("chat/<int:conversation_id>/attachments/", views.attach, name="attach"),
    path("chat/attachments/<int:attachment_id>/", views.attachment_text, name="attachment"),
    path("chat/attachments/<int:attachment_id>/delete/", views.detach, name="detach"),
]
