"""Mounted by pagoda.urls at the site root: the console's people pages and the invitation link."""
from django.urls import path

from people import views

app_name = "people"
urlpatterns = [
    path("console/<slug:slug>/people/", views.people_page, name="people"),
    path("console/<slug:slug>/people/invite/", views.invite, name="invite"),
    path("console/<slug:slug>/people/<int:membership_id>/role/", views.change_role, name="change_role"),
    path("console/<slug:slug>/people/<int:membership_id>/offboard/", views.offboard, name="offboard"),
    path("console/<slug:slug>/people/<int:membership_id>/reactivate/", views.reactivate, name="reactivate"),
    path("console/<slug:slug>/people/invitations/<int:invitation_id>/revoke/", views.revoke_invitation,
         name="revoke_invitation"),
    path("accounts/invitation/<str:token>/", views.accept, name="accept"),
]
