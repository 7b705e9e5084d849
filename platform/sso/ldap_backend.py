"""LDAP / Active Directory logins through the login page's username and password form.

django-auth-ldap binds as the service account (PAGODA_LDAP_BIND_DN), finds the user under
PAGODA_LDAP_USER_SEARCH_BASE, binds as them with the password typed, creates the local user at the
first login (username = the login name typed, name and e-mail from the directory) and reads their
groups under PAGODA_LDAP_GROUP_SEARCH_BASE. This backend then refuses a deactivated local account
(the directory does not overrule an administrator) and re-applies the group mappings (sso.mapping).
Passwords are never stored locally: the user gets an unusable one.
"""
from __future__ import annotations

import logging

from django_auth_ldap.backend import LDAPBackend

from sso.mapping import apply_group_mappings
from sso.models import Source

logger = logging.getLogger(__name__)


class DirectoryBackend(LDAPBackend):
    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None:
            return None
        if not user.is_active:
            logger.info("LDAP login of deactivated user %s refused", user.get_username())
            return None
        if user.has_usable_password():
            # an account made locally before the directory took over: the directory's password decides now
            user.set_unusable_password()
            user.save(update_fields=["password"])
        apply_group_mappings(user, Source.LDAP, ldap_user.group_dns)
        return user
