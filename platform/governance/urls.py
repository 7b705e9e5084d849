"""Mounted by pagoda.urls: console_urls under /console/<slug>/, chat_urls at the site root (/chat/...)."""
from django.urls import path

from governance import views

app_name = "governance"
urlpatterns = [
    path("console/<slug:slug>/budgets/", views.budgets, name="budgets"),
    path("console/<slug:slug>/budgets/<int:budget_id>/delete/", views.delete_budget, name="delete_budget"),
    path("console/<slug:slug>/retention/", views.set_retention, name="set_retention"),
    path("console/<slug:slug>/usage.csv", views.usage_export, name="usage_export"),
    path("chat/export.json", views.export_all, name="export_all"),
    path("chat/<int:conversation_id>/export.json", views.export_one, name="export_one"),
    path("chat/delete-all/", views.delete_all, name="delete_all"),
]
