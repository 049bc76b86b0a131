"""benchmarks/beside_llamacpp.py end to end on a tiny checkpoint: both programs run in their own
processes on the same weights (llama.cpp for real, through xllamacpp) and the table comes out with
every figure of both."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")
pytest.importorskip("xllamacpp")


@pytest.mark.slow
def test_side_by_side_runs_both_programs_on_the_same_weights(tmp_path, capsys):
    from benchmarks.beside_llamacpp import main
    from benchmarks.write_realsize import write

    model = tmp_path / "ckpt"
    write(model, 4, "gptq", group_size=32, shape="tiny")
    out = tmp_path / "beside.json"
    import torch

    threads = torch.get_num_threads()  # main() sets the parent's count for its bandwidth probe
    argv = ["--model", str(model), "--rounds", "2", "--repeats", "1", "--new-tokens", "4", "--json", str(out)]
    try:
        rc = main(argv)
    finally:
        torch.set_num_threads(threads)
    assert rc == 0
    assert (tmp_path / "ckpt.q4_0.gguf").is_file()  # written beside the checkpoint
    table = capsys.readouterr().out
    assert "| Clover" in table and "| llama.cpp (xllamacpp wheel)" in table
    results = json.loads(out.read_text())["results"]
    for r in results.values():
        for key in ("prefill_512", "prefill_2048", "decode_b1", "agent_ttft_1", "agent_ttft_2"):
            assert len(r[key]) == 2 and all(v > 0 for v in r[key])  # one repeat in each of two rounds
        assert r["rss_peak"] > 0 and r["agent_tokens"][1] > r["agent_tokens"][0] > 1000
        assert min(r["agent_cached_2"]) >= r["agent_tokens"][0] - 32  # the second turn reused the first
