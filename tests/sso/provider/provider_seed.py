"""Seeds the provider (run with `manage.py shell`-like python -c): the Pagoda client and test users.

argv: <redirect URIs, space-separated>
"""
import sys

import django

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402

Application.objects.create(
    name="Pagoda", client_id="pagoda", client_secret="pagoda-secret", client_type=Application.CLIENT_CONFIDENTIAL,
    authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE, redirect_uris=sys.argv[1],
    skip_authorization=True, algorithm=Application.RS256_ALGORITHM)
for name, groups in (("carol", ["pagoda-sales", "pagoda-admins"]), ("dave", ["pagoda-support"])):
    user = User.objects.create_user(name, email=f"{name}@example.test", password=f"{name}-pw",
                                    first_name=name.title(), last_name="Tester")
    for group in groups:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
