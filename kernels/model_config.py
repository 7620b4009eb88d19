"""A model's sizes from its Hugging Face ``config.json``, read locally (no hub, no weights).

Why: the tasks' own shapes are round numbers; a user's model runs other ones (a 3584-wide
hidden, a 152064-row vocabulary, 4 KV heads), and a kernel tuned off them can lose there.
``model_shapes`` turns these facts into each task's shapes.

Key names differ by family: Llama-style ``hidden_size`` / ``num_attention_heads``, GPT-2
style ``n_embd`` / ``n_head`` / ``n_inner``; a multimodal config keeps its language model's
under ``text_config``. Only the standard library: a ``kernelkb tasks shapes`` needs no GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelkb.kernels.shared.errors import UserError

# the first key present (and not null) names the fact; the order is the families' usage
HIDDEN = ("hidden_size", "n_embd", "d_model")
HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv")
INTERMEDIATE = ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size")
VOCAB = ("vocab_size", "padded_vocab_size")
ACTIVATION = ("hidden_act", "activation_function", "hidden_activation")
EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")
ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "rotary_emb_base")
ROPE_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "phi3")
PARTIAL_ROPE = ("partial_rotary_factor", "rotary_pct")
LAYER_NORM_EPS = ("layer_norm_epsilon", "layer_norm_eps", "layernorm_epsilon")
SILU = ("silu", "swish")
# example configs shipped with the package (the public sizes of three model families)
SHIPPED = Path(__file__).resolve().parent / "model_configs"


class ModelConfigError(UserError):
    """A config.json that cannot give a model's sizes: the message names the file and why."""


@dataclass(frozen=True)
class ModelFacts:
    """The sizes the tasks' shapes read, and the parts a task may not have in this model."""

    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int | None  # per expert in a mixture of experts; None: not in the config
    activation: str  # the MLP's; SiLU means a gated (SwiGLU) MLP, as the Llama family's
    rms_norm: bool  # False: the config names a LayerNorm epsilon and no RMSNorm one
    rope: float  # the share of each head RoPE rotates (0: no rotary embedding)
    experts: int = 1  # routed experts (1: a dense MLP)
    experts_per_token: int = 1

    @property
    def gated(self) -> bool:
        return self.activation in SILU


def shipped_configs() -> dict[str, Path]:
    """The example configs by name (``llama-3-8b``): a name stands for its path."""
    return {p.stem: p for p in sorted(SHIPPED.glob("*.json"))}


def read_model_config(path: str | Path) -> ModelFacts:
    """The facts of ``path`` (a file, or a shipped config's name); ModelConfigError (one
    line) for a file that is missing, not JSON, or lacks a size the shapes need."""
    shipped = shipped_configs()
    path = Path(path) if Path(path).exists() or str(path) not in shipped else shipped[str(path)]
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelConfigError(f"model config {path}: no such file (shipped examples: "
                               f"{', '.join(shipped)})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ModelConfigError(f"model config {path}: cannot read it ({err})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ModelConfigError(f"model config {path}: not JSON ({err.msg}, line "
                               f"{err.lineno})") from None
    if not isinstance(raw, dict):
        raise ModelConfigError(f"model config {path}: not a JSON object")
    return facts_of(raw, path.stem, str(path))


def facts_of(raw: dict[str, Any], name: str, where: str = "model config") -> ModelFacts:
    """The facts of a parsed config; the language model's own under ``text_config`` win."""
    text = raw.get("text_config")
    cfg = {**raw, **text} if isinstance(text, dict) else raw

    def size(keys: tuple[str, ...], required: bool = True) -> int | None:
        key = next((k for k in keys if cfg.get(k) is not None), None)
        if key is None:
            if required:
                raise ModelConfigError(f"{where}: no {keys[0]} (nor {', '.join(keys[1:])})")
            return None
        value = cfg[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ModelConfigError(f"{where}: {key} = {value!r}: not a positive integer")
        return value

    hidden, heads, vocab = size(HIDDEN), size(HEADS), size(VOCAB)
    assert hidden and heads and vocab  # required: size() raised otherwise
    head_dim = size(("head_dim",), required=False) or hidden // heads
    if cfg.get("head_dim") is None and hidden % heads:
        raise ModelConfigError(f"{where}: no head_dim, and hidden size {hidden} is not a "
                               f"multiple of {heads} heads")
    kv_heads = size(KV_HEADS, required=False) or heads
    intermediate = size(("moe_intermediate_size", *INTERMEDIATE), required=False)
    if intermediate is None and "n_embd" in cfg:  # GPT-2: n_inner null means 4 x hidden
        intermediate = 4 * hidden
    activation = str(next((cfg[k] for k in ACTIVATION if cfg.get(k)), "silu")).lower()
    rms = "rms_norm_eps" in cfg or not any(k in cfg for k in LAYER_NORM_EPS)
    has_rope = any(k in cfg for k in ROPE_KEYS) or cfg.get("model_type") in ROPE_FAMILIES
    share = next((cfg[k] for k in PARTIAL_ROPE if cfg.get(k) is not None), 1.0)
    experts = size(EXPERTS, required=False) or 1
    return ModelFacts(name=name, hidden=hidden, heads=heads, kv_heads=kv_heads,
                      head_dim=head_dim, vocab=vocab, intermediate=intermediate,
                      activation=activation, rms_norm=rms,
                      rope=float(share) if has_rope else 0.0, experts=experts,
                      experts_per_token=size(("num_experts_per_tok",), required=False) or 1)
