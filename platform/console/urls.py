from django.urls import path

from console import views

app_name = "console"
urlpatterns = [
    path("", views.index, name="index"),
    path("engine/stats.json", views.engine_stats_json, name="engine_stats"),
    path("<slug:slug>/", views.tenant_page, name="tenant"),
    path("<slug:slug>/engine.json", views.tenant_engine_json, name="tenant_engine"),
    path("<slug:slug>/prompt/", views.save_prompt, name="save_prompt"),
    path("<slug:slug>/prompt/<int:version>/activate/", views.activate_prompt, name="activate_prompt"),
    path("<slug:slug>/prompt/deactivate/", views.deactivate_prompt, name="deactivate_prompt"),
]
