"""``seglog format --add-scram``: Kafka's ScramParser syntax, the credential file a broker
loads, refusals."""

from __future__ import annotations

import base64
import json

import pytest

from seglog.cli import main
from seglog.cli_format import parse_add_scram
from seglog.sasl.scram import ScramCredential, credential_from_password, mechanism_by_name
from seglog.server.sasl.credentials import FileCredentialStore
from seglog.storage.locking import lock_directory


def test_add_scram_writes_credentials_the_store_loads(tmp_path, capsys):
    data = tmp_path / "data"
    assert main(["format", "--data-dir", str(data), "--add-scram",
                 "SCRAM-SHA-256=[name=admin,password=admin-secret]",
                 "-S", "SCRAM-SHA-512=[name=alice,iterations=8192,password=a]"]) == 0
    store = FileCredentialStore(str(data))
    store.load()
    sha256 = mechanism_by_name("SCRAM-SHA-256")
    sha512 = mechanism_by_name("SCRAM-SHA-512")
    assert sha256 is not None and sha512 is not None
    admin = store.get("admin", sha256)
    assert admin is not None and admin.iterations == 4096
    # The stored key is the one the password gives with the stored salt (RFC 5802).
    assert admin == credential_from_password(sha256, "admin-secret", 4096, admin.salt)
    alice = store.get("alice", sha512)
    assert alice is not None and alice.iterations == 8192
    assert store.get("alice", sha256) is None
    out = capsys.readouterr().out
    assert "SCRAM-SHA-256 credential of user admin added" in out
    assert "SCRAM-SHA-512 credential of user alice added" in out


def test_salted_password_form_is_taken_as_given():
    mechanism = mechanism_by_name("SCRAM-SHA-256")
    assert mechanism is not None
    salt = b"0123456789"
    salted = mechanism.salted_password("pw", salt, 4096)
    user, name, credential = parse_add_scram(
        "SCRAM-SHA-256=[name=bob,salt=%s,saltedpassword=%s,iterations=4096]"
        % (base64.b64encode(salt).decode(), base64.b64encode(salted).decode()))
    assert (user, name) == ("bob", "SCRAM-SHA-256")
    assert credential == credential_from_password(mechanism, "pw", 4096, salt)
    assert isinstance(credential, ScramCredential)


@pytest.mark.parametrize("entry, message", [
    ("SCRAM-SHA-1=[name=a,password=b]", "unknown SCRAM mechanism"),
    ("SCRAM-SHA-256=[password=b]", "you must supply 'name'"),
    ("SCRAM-SHA-256=[name=a]", "you must supply 'password'"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=1000]", "outside 4096..16384"),
    ("SCRAM-SHA-256=[name=a,password=b,color=red]", "unknown key color"),
    ("SCRAM-SHA-256 name=a", "expected MECHANISM=["),
    ("SCRAM-SHA-256=[name=a,salt=%%%,saltedpassword=AA==]", "is not base64"),
])
def test_bad_entries_are_refused(tmp_path, capsys, entry, message):
    assert main(["format", "--data-dir", str(tmp_path / "d"), "--add-scram", entry]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_a_directory_in_use_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    with lock_directory(data):
        assert main(["format", "--data-dir", str(data), "--add-scram",
                     "SCRAM-SHA-256=[name=a,password=b]"]) == 2
    assert "stop the broker first" in capsys.readouterr().err
    assert not (data / "scram-credentials.json").exists()
    # Free again: the users are added, and a second call keeps the first one's.
    assert main(["format", "--data-dir", str(data), "-S",
                 "SCRAM-SHA-256=[name=a,password=b]"]) == 0
    assert main(["format", "--data-dir", str(data), "-S",
                 "SCRAM-SHA-512=[name=c,password=d]"]) == 0
    users = json.loads((data / "scram-credentials.json").read_text())["users"]
    assert set(users) == {"a", "c"}
