"""The real servers the single sign-on tests log in against, each in a temporary folder on a free
loopback port, stopped afterwards: OpenLDAP's slapd with a test directory, and the OpenID provider
of tests/sso/provider (django-oauth-toolkit)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SLAPD = os.environ.get("PAGODA_SLAPD", "/usr/sbin/slapd")
SCHEMA_DIR = Path("/etc/ldap/schema")
PROVIDER_DIR = Path(__file__).resolve().parent / "provider"
BASE_DN = "dc=pagoda,dc=test"
ROOT_DN = f"cn=admin,{BASE_DN}"
ROOT_PASSWORD = "root-secret"
SERVICE_DN = f"cn=pagoda-service,ou=services,{BASE_DN}"
SERVICE_PASSWORD = "service-secret"
GROUPS_DN = f"ou=groups,{BASE_DN}"
PEOPLE_DN = f"ou=people,{BASE_DN}"
# groupOfNames needs a member: this one, no person, lets a test take everyone out of a group
EMPTY_MEMBER = f"cn=nobody,{BASE_DN}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


TEST_DIRECTORY = f"""dn: {BASE_DN}
objectClass: dcObject
objectClass: organization
dc: pagoda
o: Pagoda test

dn: ou=people,{BASE_DN}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{BASE_DN}
objectClass: organizationalUnit
ou: groups

dn: ou=services,{BASE_DN}
objectClass: organizationalUnit
ou: services

dn: {SERVICE_DN}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: pagoda-service
userPassword: {SERVICE_PASSWORD}

dn: uid=alice,{PEOPLE_DN}
objectClass: inetOrgPerson
uid: alice
cn: Alice Park
givenName: Alice
sn: Park
mail: alice@example.test
userPassword: alice-pw

dn: uid=bob,{PEOPLE_DN}
objectClass: inetOrgPerson
uid: bob
cn: Bob Kim
givenName: Bob
sn: Kim
mail: bob@example.test
userPassword: bob-pw

dn: cn=sales,{GROUPS_DN}
objectClass: groupOfNames
cn: sales
member: {EMPTY_MEMBER}
member: uid=alice,{PEOPLE_DN}

dn: cn=acme-admins,{GROUPS_DN}
objectClass: groupOfNames
cn: acme-admins
member: {EMPTY_MEMBER}
member: uid=alice,{PEOPLE_DN}

dn: cn=support,{GROUPS_DN}
objectClass: groupOfNames
cn: support
member: {EMPTY_MEMBER}
member: uid=bob,{PEOPLE_DN}
member: uid=alice,{PEOPLE_DN}
"""


@dataclass
class Slapd:
    uri: str
    process: subprocess.Popen

    def connection(self):
        """A python-ldap connection bound as the directory's root (to change the test directory)."""
        import ldap

        conn = ldap.initialize(self.uri)
        conn.simple_bind_s(ROOT_DN, ROOT_PASSWORD)
        return conn


def start_slapd(folder: Path) -> Slapd:
    """slapd serving BASE_DN from an mdb database in `folder`, loaded with TEST_DIRECTORY."""
    data = folder / "data"
    data.mkdir()
    schemas = "\n".join(f"include {SCHEMA_DIR / name}.schema" for name in ("core", "cosine", "inetorgperson"))
    (folder / "slapd.conf").write_text(f"""{schemas}
pidfile {folder / 'slapd.pid'}
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 10485760
suffix "{BASE_DN}"
rootdn "{ROOT_DN}"
rootpw {ROOT_PASSWORD}
directory {data}
access to attrs=userPassword by anonymous auth by * none
access to * by * read
""")
    port = free_port()
    uri = f"ldap://127.0.0.1:{port}"
    log = folder / "slapd.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([SLAPD, "-d", "0", "-f", str(folder / "slapd.conf"), "-h", uri + "/"],
                                   stdout=out, stderr=subprocess.STDOUT)
    _wait_port(port, process, log)
    (folder / "directory.ldif").write_text(TEST_DIRECTORY)
    subprocess.run(["ldapadd", "-x", "-H", uri, "-D", ROOT_DN, "-w", ROOT_PASSWORD, "-f",
                    str(folder / "directory.ldif")], check=True, capture_output=True, timeout=30)
    return Slapd(uri=uri, process=process)


def slapd_missing() -> str | None:
    """Why slapd cannot run here, or None."""
    if not Path(SLAPD).exists() or shutil.which("ldapadd") is None:
        return f"{SLAPD} / ldapadd are not installed (bash deploy/install_ldap.sh)"
    try:
        import ldap  # noqa: F401
    except ImportError:
        return "python-ldap is not installed (bash deploy/install_ldap.sh, then deploy/setup.sh)"
    return None


@dataclass
class Provider:
    url: str  # http://127.0.0.1:<port>
    process: subprocess.Popen
    env: dict

    @property
    def issuer(self) -> str:
        return self.url + "/o"

    def environment(self, **overrides: str) -> dict[str, str]:
        """Pagoda's PAGODA_OIDC_* variables for this provider (as an IT team would set them)."""
        return {
            "PAGODA_OIDC_CLIENT_ID": "pagoda",
            "PAGODA_OIDC_CLIENT_SECRET": "pagoda-secret",
            "PAGODA_OIDC_ISSUER": self.issuer,
            "PAGODA_OIDC_AUTHORIZATION_ENDPOINT": self.url + "/o/authorize/",
            "PAGODA_OIDC_TOKEN_ENDPOINT": self.url + "/o/token/",
            "PAGODA_OIDC_USERINFO_ENDPOINT": self.url + "/o/userinfo/",
            "PAGODA_OIDC_JWKS_ENDPOINT": self.url + "/o/.well-known/jwks.json",
            "PAGODA_OIDC_BUTTON_LABEL": "Test IdP",
            **overrides,
        }

    def shell(self, code: str) -> str:
        """Run Python in the provider's Django (to change its users and groups); returns stdout."""
        result = subprocess.run([sys.executable, "-c", "import django; django.setup()\n" + code],
                                env=self.env, cwd=PROVIDER_DIR, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-3000:])
        return result.stdout


def start_provider(folder: Path, redirect_uris: list[str]) -> Provider:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (folder / "provider-key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "provider_settings", "PYTHONPATH": str(PROVIDER_DIR),
           "PROVIDER_DB": str(folder / "provider.sqlite3"), "PROVIDER_ISSUER": url + "/o",
           "PROVIDER_KEY_FILE": str(folder / "provider-key.pem")}
    run = dict(env=env, cwd=PROVIDER_DIR, check=True, capture_output=True, timeout=120)
    subprocess.run([sys.executable, "-m", "django", "migrate", "--noinput"], **run)
    subprocess.run([sys.executable, "provider_seed.py", " ".join(redirect_uris)], **run)
    log = folder / "provider.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "django", "runserver", "--noreload",
                                    f"127.0.0.1:{port}"], env=env, cwd=PROVIDER_DIR, stdout=out,
                                   stderr=subprocess.STDOUT)
    _wait_port(port, process, log)
    with urllib.request.urlopen(url + "/o/.well-known/openid-configuration", timeout=10) as response:
        assert response.status == 200
    return Provider(url=url, process=process, env=env)
