"""benchmarks/gguf_write.py: a GPTQ-Int4 checkpoint as a llama.cpp GGUF (qwen35moe, Q4_0) holds the same
weights value for value; a checkpoint whose codes Q4_0 cannot hold unchanged is refused in one line."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
gguf = pytest.importorskip("gguf")

from benchmarks.gguf_write import Source, main, write_gguf  # noqa: E402
from benchmarks.write_realsize import write  # noqa: E402
from clover.model.loading.quant_formats import QuantScheme, decode_gptq  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("gptq") / "ckpt"
    write(out, 4, "gptq", group_size=32, shape="tiny")
    return out


def _gptq(src: Source, base: str) -> torch.Tensor:
    parts = [src.get(f"{base}.{p}") for p in ("qweight", "qzeros", "scales")]
    return decode_gptq(*parts, None, QuantScheme("gptq", group_size=32, zero_offset=1)).dequantize()


def test_q4_0_tensors_are_the_checkpoints_weights(checkpoint, tmp_path):
    from gguf.quants import dequantize

    out = tmp_path / "m.gguf"
    write_gguf(checkpoint, out)
    reader = gguf.GGUFReader(str(out))
    tensors = {t.name: t for t in reader.tensors}
    src = Source(checkpoint)
    p = "model.language_model.layers."
    q4 = gguf.GGMLQuantizationType.Q4_0
    qkv = dequantize(tensors["blk.0.attn_qkv.weight"].data, q4)
    assert (qkv == _gptq(src, p + "0.linear_attn.in_proj_qkv").numpy()).all()
    down = dequantize(tensors["blk.1.ffn_down_exps.weight"].data, q4)
    for e in (0, 5):
        assert (down[e] == _gptq(src, f"{p}1.mlp.experts.{e}.down_proj").numpy()).all()
    assert tensors["token_embd.weight"].tensor_type == gguf.GGMLQuantizationType.BF16
    norm = tensors["blk.0.attn_norm.weight"].data  # zero-centred (1 + w) as llama.cpp stores it
    assert (norm == 1 + src.get(p + "0.input_layernorm.weight").float().numpy()).all()
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[-1]).decode() == "qwen35moe"


def test_zero_points_other_than_8_are_refused_in_one_line(checkpoint, tmp_path, capsys):
    changed = tmp_path / "ckpt"
    changed.mkdir()
    for f in checkpoint.iterdir():
        (changed / f.name).symlink_to(f)
    from safetensors.torch import load_file, save_file

    shard = next(checkpoint.glob("*.safetensors"))
    tensors = load_file(str(shard))
    name = next(n for n in tensors if n.endswith("in_proj_qkv.qzeros"))
    tensors[name] = torch.zeros_like(tensors[name])  # zero point 1 everywhere
    (changed / shard.name).unlink()
    save_file(tensors, str(changed / shard.name))
    assert json.loads((changed / "config.json").read_text())["quantization_config"]["quant_method"] == "gptq"
    out = tmp_path / "m.gguf"
    assert main(["--model", str(changed), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "zero points other than 8" in err
    assert not out.exists()
