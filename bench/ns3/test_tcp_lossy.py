"""Self-check of tcp_lossy.py: one tiny clean run and one at BER 1e-4 (ns-3 runs, < 60 s)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ns3 = pytest.importorskip("ns", reason="ns-3 bindings missing: run bench/ns3/setup.sh")
import tcp_lossy  # noqa: E402

SIZE = 100_000


def test_clean_link_delivers_everything():
    r = tcp_lossy.run_one("newreno", 0.0, 0.010, 1, SIZE, 30.0)
    assert r["delivered_bytes"] == SIZE
    assert r["complete"]
    assert 0 < r["goodput_bps"] <= 5e6
    # 100 kB at 5 Mb/s needs >= 0.16 s; with slow start and the handshake it takes longer
    assert r["elapsed_s"] >= SIZE * 8 / 5e6
    # headers and ACKs cost something, but far less than the payload on a clean link
    assert 0 < r["overhead_bytes"] < SIZE // 5
    assert 0.010 < r["mean_delay_s"] < 1.0


def test_ber_1e4_breaks_tcp():
    clean = tcp_lossy.run_one("newreno", 0.0, 0.010, 1, SIZE, 30.0)
    r = tcp_lossy.run_one("newreno", 1e-4, 0.010, 1, SIZE, 30.0)
    assert r["delivered_bytes"] < SIZE or r["goodput_bps"] < clean["goodput_bps"] / 10


def test_variants_differ_and_csv_rows(tmp_path):
    out = tmp_path / "o.csv"
    rc = tcp_lossy.main(["--ber", "0", "--runs", "1", "--size", "50kB", "--cap", "10",
                         "--out", str(out), "--json", "--quiet"])
    assert rc == 0
    lines = out.read_text().splitlines()
    assert lines[0] == ",".join(tcp_lossy.CSV_COLUMNS)
    assert len(lines) == 1 + 3
    assert {line.split(",")[0] for line in lines[1:]} == {
        "tcp-newreno", "tcp-westwood+", "tcp-vegas"}
