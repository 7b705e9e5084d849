"""The load run (load.py) as a test: 200 chat sockets and 100 API streams at once on the default model,
twice. Minutes on two CPU cores, so only with PAGODA_LOAD_TESTS=1; figures in docs/RELIABILITY.md."""
import json

import pytest

import load
import reliability_server as rs

pytestmark = pytest.mark.skipif(not rs.LOAD_TESTS, reason="the load run takes minutes: PAGODA_LOAD_TESTS=1")


def test_200_chats_and_100_streams_complete_saved_and_leak_nothing(tmp_path):
    # daphne's default 5 s handshake timeout drops sockets of a 200-socket burst (docs/RELIABILITY.md, run A);
    # the run uses the 30 s recommended for deploy/.
    report = load.run(load.parse_args(["--chats", "200", "--streams", "100", "--max-tokens", "4", "--rounds", "3",
                                       "--daphne-arg=--websocket_connect_timeout=30",
                                       "--folder", str(tmp_path / "server"), "--quiet"]))
    print("\n" + json.dumps({k: v for k, v in report.items() if k != "args"}, indent=2))
    assert report["ok"], report
    assert report["rss_growth_mb_last_round"] < 50  # flat once the first bursts sized the buffers
