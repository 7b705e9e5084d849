"""Fixtures of the reliability tests: live servers (reliability_server.py), each started once per module.

- rel_server: the tiny random model, a roomy engine (disconnects, bad input, cross-tenant access).
- tight_server: the tiny model with a small KV pool, 4 sequences a step and a queue of 6 (backpressure).
- fault_server: the tiny model under faulty_daphne.py (poisoned requests, crashed loops), 1 restart an hour.
- smol_server: the default SmolLM2-135M (prefix-cache timing: a real prefill takes measurable time).
- pg_server (test_faults_database.py): PostgreSQL, for the database going away.

The heavy runs (200 chats + 100 streams, 1,000 disconnects) are behind PAGODA_LOAD_TESTS=1 (see load.py).
"""
from __future__ import annotations

import logging

import pytest

import reliability_server as rs

logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise at these volumes

ROOMY = {"num_kv_blocks": 512, "max_num_seqs": 64}
TIGHT = {"num_kv_blocks": 40, "max_num_seqs": 4, "max_num_waiting": 6, "max_num_batched_tokens": 256}


@pytest.fixture(autouse=True)
def _no_engine_here(settings):
    """The engine runs in the servers; this process never starts one."""
    settings.PAGODA_ENGINE = "off"
    settings.PAGODA_PIN_SYNC_SECONDS = 0
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="module")
def rel_server(tmp_path_factory, tiny_llama_path):
    with rs.running_server(tmp_path_factory.mktemp("rel-server"), str(tiny_llama_path), engine_config=ROOMY,
                           seed={"num_users": 3, "num_conversations": 12, "max_tokens": 6, "long_tokens": 300}) as s:
        yield s


@pytest.fixture(scope="module")
def tight_server(tmp_path_factory, tiny_llama_path):
    with rs.running_server(tmp_path_factory.mktemp("tight-server"), str(tiny_llama_path), engine_config=TIGHT,
                           seed={"num_users": 2, "num_conversations": 10, "max_tokens": 6, "long_tokens": 40}) as s:
        yield s


@pytest.fixture(scope="module")
def fault_server(tmp_path_factory, tiny_llama_path):
    with rs.running_server(tmp_path_factory.mktemp("fault-server"), str(tiny_llama_path), engine_config=ROOMY,
                           seed={"num_users": 1, "num_conversations": 6, "max_tokens": 6, "long_tokens": 300},
                           faults=True, extra_env={"PAGODA_ENGINE_MAX_RESTARTS": "1"}) as s:
        yield s


@pytest.fixture(scope="module")
def smol_server(tmp_path_factory):
    with rs.running_server(tmp_path_factory.mktemp("smol-server"), rs.default_model_path(),
                           engine_config={"max_num_seqs": 32},
                           seed={"num_users": 1, "num_conversations": 2, "max_tokens": 2}) as s:
        yield s
