"""The Sub3Min record's GPT in PyTorch (RECORD.md section 2), kept recognisable to a reader of the record.

Same constructor, parameter names, registration order, shapes, init (and RNG consumption order) as
the record. `GPT(...)` builds every parameter in fp32; `cast_embeddings_to_bf16(model)` then applies
the record's precision policy (bf16 embedding tables, hence bf16 activations, fp32 weights cast to
bf16 at use). Left in fp32, the same model runs all-fp32 (the parity policy).

Attention backends (constructor option `attention`):
- "flex": compiled flex_attention with the record's BlockMask (what the record runs on CUDA);
- "sdpa": scaled_dot_product_attention with an explicit (T, T) boolean mask equal to the BlockMask's
  allowed set (the CPU path: eager flex_attention ignores the window and has no CPU backward);
- "auto": "flex" on CUDA, "sdpa" elsewhere, decided per call from the input's device.
The SDPA mask is dense: two (T, T) bool masks per call (2 x 4 GiB at the record's T = 65536), so
full-length CPU runs need that memory; the block lists themselves are the same in both paths.

The record's FP8 gradient scale 2^29 suits a loss averaged over 65536 tokens; with shorter
sequences pass `fp8_grad_scale` (see fp8.py), or the e5m2 gradient overflows to inf.

The speedrun's lineage (docs/spec/LINEAGE.md) runs through the same classes: the `config`
keyword (a torch_ref.config.ModelConfig) carries its switches (`GPT.from_config` builds a model
from one), and `apply_dtype_policy` gives a built model #8/#9's autocast or #15's bf16 model.
Parameter names stay this module's; each record's own state-dict names are mapped by
`to_model_names`.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Literal, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torch_ref.config import BLOCK_SIZE, EOT_ID, ModelConfig, next_multiple
from torch_ref.config import replace as replace_config
from torch_ref import masks as masks_lib
from torch_ref.fp8 import GRAD_SCALE, FP8Backend, lm_head_fp8

__all__ = [
    "RMS_EPS",
    "ATTN_SCALE",
    "AttentionImpl",
    "norm",
    "rotary_tables",
    "CastedLinear",
    "Rotary",
    "CausalSelfAttention",
    "MLP",
    "Block",
    "ValueEmbedding",
    "GPT",
    "soft_cap",
    "apply_dtype_policy",
    "cast_embeddings_to_bf16",
    "load_record_state_dict",
]

# The record calls rms_norm without eps; in today's PyTorch that means fp32's machine epsilon
# (2^-23) for fp32 and bf16 inputs alike (RECORD.md 2.4), so it is spelled out here.
RMS_EPS = torch.finfo(torch.float32).eps
# The records' PyTorch builds took bf16's epsilon for bf16 inputs (LINEAGE.md 2.1, inferred from
# the PR that changed it): rms_norm_eps "as_run".
RMS_EPS_BF16_AS_RUN = 2.0**-7
ATTN_SCALE = 0.12  # fixed attention scale of the record, not head_dim ** -0.5
LOGIT_CAP = 30.0
LOGIT_CAP_TEMPERATURE = 7.5
CAUSAL = "causal"  # the mask of attention_mask "causal" (#8/#9): SDPA's is_causal, no document mask

AttentionImpl = Literal["auto", "flex", "sdpa"]
_RECORD = ModelConfig()  # the record's per-layer patterns (value embeddings, windows, layer 7)


def norm_eps(dtype: torch.dtype, rms_norm_eps: str = "fp32") -> float:
    """RMSNorm's eps for inputs of `dtype`: 2^-23, except 2^-7 for bf16 under "as_run"."""
    return RMS_EPS_BF16_AS_RUN if rms_norm_eps == "as_run" and dtype == torch.bfloat16 else RMS_EPS


def norm(x: Tensor, rms_norm_eps: str = "fp32") -> Tensor:
    """Parameter-free RMSNorm over the last axis (computed in fp32); keeps x's dtype. eps 2^-23, or
    2^-7 on bf16 inputs under rms_norm_eps "as_run"."""
    return F.rms_norm(x, (x.size(-1),), eps=norm_eps(x.dtype, rms_norm_eps))


def rotary_tables(head_dim: int, max_len: int, device: torch.device | str | None = None,
                  kind: str = "half_truncated") -> tuple[Tensor, Tensor]:
    """Rotary tables: (cos, sin), each (max_len, head_dim // 2) fp32.

    "half_truncated" (Sub3Min, #18): head_dim // 4 angular frequencies (1/1024) ** linspace(0, 1)
      followed by head_dim // 4 zeros (those dims pass through unrotated); theta = outer(t, freq) in fp32.
    "full" (#8/#9): 1 / 10000 ** (2j / head_dim) in fp32, theta in fp32.
    "full_bf16_freq" (#15): (1 / 10000) ** (2j / head_dim) rounded to bf16 (its model-wide
      .bfloat16()), theta from exact positions in fp32: the compiled reading (LINEAGE.md 5.3, inferred).
    "full_bf16_freq_eager": the eager reading of the same code: outer(int64 t, bf16 freq) is a
      bf16 product of bf16-rounded positions, and cos/sin of it are bf16.
    The "full" kinds are cast to the activation dtype at use (the records' bf16 tables).
    """
    if head_dim % 4:
        raise ValueError(f"head_dim must be a multiple of 4 for the rotary tables, got {head_dim}")
    positions = torch.arange(max_len, dtype=torch.float32, device=device)
    if kind == "half_truncated":
        quarter = head_dim // 4
        freq = (1 / 1024) ** torch.linspace(0, 1, steps=quarter, dtype=torch.float32, device=device)
        freq = torch.cat([freq, torch.zeros(quarter, dtype=torch.float32, device=device)])
    elif kind == "full":
        freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    elif kind in ("full_bf16_freq", "full_bf16_freq_eager"):
        freq = ((1 / 10000) ** (torch.arange(0, head_dim, 2, device=device) / head_dim)).bfloat16()
        if kind == "full_bf16_freq_eager":
            theta = torch.outer(torch.arange(max_len, device=device), freq)  # int64 x bf16 -> bf16
            return theta.cos().float(), theta.sin().float()
        freq = freq.float()
    else:
        raise ValueError(f"unknown rotary kind {kind!r}")
    theta = torch.outer(positions, freq)
    return theta.cos(), theta.sin()


def linear_init_bound(fan_in: int, linear_init: str = "record") -> float:
    """U(-b, b) bound of a linear weight: the record's sqrt(3) * 0.5 / sqrt(fan_in), or nn.Linear's
    1 / sqrt(fan_in) ("torch_default", #8-#18)."""
    return fan_in**-0.5 if linear_init == "torch_default" else 3**0.5 * 0.5 * fan_in**-0.5


class CastedLinear(nn.Linear):
    """Bias-free linear layer whose fp32 weight is cast to the input's dtype at every call
    (or, with `compute_dtype` set, input and weight to that dtype: #8/#9's autocast).

    Init: U(-b, b) with b = sqrt(3) * 0.5 / sqrt(in_features) (the record's std 0.5 / sqrt(in)),
    or nn.Linear's 1 / sqrt(in_features) with linear_init "torch_default".
    """

    def __init__(self, in_features: int, out_features: int, linear_init: str = "record"):
        self.linear_init = linear_init
        self.compute_dtype: torch.dtype | None = None
        super().__init__(in_features, out_features, bias=False)

    def reset_parameters(self) -> None:
        bound = linear_init_bound(self.in_features, self.linear_init)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        if self.compute_dtype is not None:
            x = x.to(self.compute_dtype)
        return F.linear(x, self.weight.type_as(x))


class Rotary(nn.Module):
    """Applies the record's rotary embedding to (B, T, H, Dh) tensors; tables are non-persistent buffers.

    in_fp32: x upcast to fp32 and the result cast back (Sub3Min, #18); False: the tables are cast
    to x's dtype and the rotation runs in it (#8-#15)."""

    def __init__(self, cos: Tensor, sin: Tensor, in_fp32: bool = True):
        super().__init__()
        self.cos = nn.Buffer(cos, persistent=False)
        self.sin = nn.Buffer(sin, persistent=False)
        self.in_fp32 = in_fp32

    def forward(self, x_BTHD: Tensor) -> Tensor:
        seq_len = x_BTHD.size(-3)
        if seq_len > self.cos.size(0):
            raise ValueError(f"sequence of {seq_len} tokens exceeds the rotary table length {self.cos.size(0)}")
        work = torch.float32 if self.in_fp32 else x_BTHD.dtype
        cos = self.cos[None, :seq_len, None, :].to(work)
        sin = self.sin[None, :seq_len, None, :].to(work)
        x1, x2 = x_BTHD.to(work).chunk(2, dim=-1)  # half split: dim j pairs with dim j + Dh/2
        # The record's sign: a rotation by -theta in the usual rotate-half convention.
        y1 = x1 * cos + x2 * sin
        y2 = x2 * cos - x1 * sin
        return torch.cat([y1, y2], dim=-1).type_as(x_BTHD)


@functools.cache
def _compiled_flex_attention():
    # Compiled once per process: eager flex_attention would ignore the block lists (CPU_NOTES.md).
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


def attend(q: Tensor, k: Tensor, v: Tensor, mask, scale: float = ATTN_SCALE) -> Tensor:
    """q, k, v (1, H, T, Dh) -> (1, H, T, Dh); mask is a BlockMask (flex), a (T, T) bool tensor
    (SDPA) or CAUSAL (SDPA's is_causal, #8/#9's cuDNN call)."""
    if isinstance(mask, str) and mask == CAUSAL:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    if isinstance(mask, Tensor):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return _compiled_flex_attention()(q, k, v, block_mask=mask, scale=scale)


QKV_LAYOUTS = ("merged", "separate")
SEPARATE_QKV_NAMES = ("q_w", "k_w", "v_w")  # the slices of qkv_w, in order


class CausalSelfAttention(nn.Module):
    """QKV attention with QK-norm, rotary, value mixing and a zero-init projection.

    qkv_layout "merged" (the record's): one qkv_w (3, D, D); "separate": q_w, k_w, v_w, each
    (D, D), whose stack is qkv_w (same init numbers) and three matmuls instead of one.
    `load_record_state_dict` loads either layout's state dict into either (`to_qkv_layout`).
    `config` (default: the record's) carries the lineage switches: `lambdas` (2,) when
    attn_value_lambdas, #9's `lamb` () when value_residual, the init bound, the rotary's
    precision, the attention scale and the RMSNorm eps."""

    def __init__(self, dim: int, num_heads: int, cos: Tensor, sin: Tensor, qkv_layout: str = "merged",
                 config: ModelConfig = _RECORD):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"model_dim {dim} is not divisible by num_heads {num_heads}")
        if qkv_layout not in QKV_LAYOUTS:
            raise ValueError(f"qkv_layout must be 'merged' or 'separate', got {qkv_layout!r}")
        self.num_heads = num_heads
        self.qkv_layout = qkv_layout
        self.config = config
        self.compute_dtype: torch.dtype | None = None  # autocast: bf16 copies of the fp32 input
        bound = linear_init_bound(dim, config.linear_init)
        # (3, D, D): query, key, value matrices in (out, in) layout, orthogonalised separately by Muon.
        qkv_w = torch.empty(3, dim, dim).uniform_(-bound, bound)
        if qkv_layout == "merged":
            self.qkv_w = nn.Parameter(qkv_w)
        else:
            self.q_w, self.k_w, self.v_w = (nn.Parameter(w.clone()) for w in qkv_w)
        if config.attn_value_lambdas:
            self.lambdas = nn.Parameter(torch.tensor([0.5, 0.5]))
        if config.value_residual:
            self.lamb = nn.Parameter(torch.tensor(0.5))
        self.rotary = Rotary(cos, sin, in_fp32=config.rotary == "half_truncated")
        self.c_proj = CastedLinear(dim, dim, config.linear_init)
        self.c_proj.weight.detach().zero_()  # zero init (after consuming RNG, as the record)

    def forward(self, x: Tensor, ve: Tensor | None, mask) -> Tensor:
        """x (1, T, D) normed input, ve (T, D) or None -> (1, T, D) in the matmul dtype."""
        return self.run(x, ve, mask)[0]

    def run(self, x: Tensor, ve: Tensor | None, mask, v_first: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """(output (1, T, D), #9's v_first: layer 0's raw value projection (1, T, H, Dh), computed
        here when None and the config has value_residual, else passed through)."""
        if self.compute_dtype is not None:
            x = x.to(self.compute_dtype)
        batch, seq_len, dim = x.shape
        if self.config.value_residual and v_first is None:  # layer 0: its own raw value is v_first
            v_first = self.value_projection(x)
        q, k, v = self.project(x, ve, v_first)
        y = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, self.config.attention_scale)
        y = y.transpose(1, 2).reshape(batch, seq_len, dim)
        return self.c_proj(y), v_first

    def value_projection(self, x: Tensor) -> Tensor:
        """The raw value projection (B, T, H, Dh) in x's dtype: `project`'s value matmul once more
        (the same op in the separate layout, so the same numbers)."""
        weight = self.qkv_w[2] if self.qkv_layout == "merged" else self.v_w
        return F.linear(x, weight.type_as(x)).view(*x.shape[:2], self.num_heads, -1)

    def project(self, x: Tensor, ve: Tensor | None, v_first: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(q, k, v), each (B, T, H, Dh) in x's dtype: QKV matmul (one merged or three separate),
        value mixing (with the value embedding, or #9's value residual with v_first), QK-norm and
        rotary on q and k."""
        cfg = self.config
        batch, seq_len, _ = x.shape
        if self.qkv_layout == "merged":
            qkv = F.linear(x, self.qkv_w.flatten(end_dim=1).type_as(x))
            q, k, v = qkv.view(batch, seq_len, 3 * self.num_heads, -1).chunk(3, dim=-2)
        else:
            q, k, v = (F.linear(x, w.type_as(x)).view(batch, seq_len, self.num_heads, -1)
                       for w in (self.q_w, self.k_w, self.v_w))
        if cfg.value_residual:
            v_first = v if v_first is None else v_first
            v = (1 - self.lamb) * v + self.lamb * v_first.view_as(v)
        if cfg.attn_value_lambdas:
            if ve is None:
                v = self.lambdas[0] * v  # lambdas[1] unused here: its gradient stays 0
            else:
                v = self.lambdas[0] * v + self.lambdas[1] * ve.view_as(v)
        return self.rotary(norm(q, cfg.rms_norm_eps)), self.rotary(norm(k, cfg.rms_norm_eps)), v


class MLP(nn.Module):
    """D -> 4D -> relu^2 -> D, output projection zero-initialised."""

    def __init__(self, dim: int, linear_init: str = "record"):
        super().__init__()
        self.c_fc = CastedLinear(dim, 4 * dim, linear_init)
        self.c_proj = CastedLinear(4 * dim, dim, linear_init)
        self.c_proj.weight.detach().zero_()

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    """x <- l0*x + l1*x0 (block_lambdas); x += attn(norm(x)) (if any); x += mlp(norm(x))."""

    def __init__(self, dim: int, num_heads: int, has_attention: bool, cos: Tensor, sin: Tensor,
                 qkv_layout: str = "merged", config: ModelConfig = _RECORD):
        super().__init__()
        self.config = config
        self.attn = CausalSelfAttention(dim, num_heads, cos, sin, qkv_layout, config) if has_attention else None
        self.mlp = MLP(dim, config.linear_init)
        if config.block_lambdas:
            self.lambdas = nn.Parameter(torch.tensor([1.0, 0.0]))

    def forward(self, x: Tensor, ve: Tensor | None, x0: Tensor, mask) -> Tensor:
        return self.run(x, ve, x0, mask)[0]

    def run(self, x: Tensor, ve: Tensor | None, x0: Tensor, mask,
            v_first: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """(output, #9's v_first once an attention layer made it (value_residual), else as given)."""
        eps = self.config.rms_norm_eps
        if self.config.block_lambdas:
            x = self.lambdas[0] * x + self.lambdas[1] * x0
        if self.attn is not None:
            y, v_first = self.attn.run(norm(x, eps), ve, mask, v_first)
            x = x + y
        return x + self.mlp(norm(x, eps)), v_first


class ValueEmbedding(nn.Module):
    """Token value embeddings handed out per layer by `slots`: `len(set of slots)` tables of
    (V, D) ("tables"), or one (V, k D) table whose D-wide chunks they are ("chunks", #15)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, slots: tuple[int | None, ...], layout: str = "tables"):
        super().__init__()
        count = 1 + max((s for s in slots if s is not None), default=-1)
        self.slots = slots
        self.count = count
        if layout == "chunks" and count:
            self.embed = nn.ModuleList([nn.Embedding(num_embeddings, count * embedding_dim)])
        else:
            self.embed = nn.ModuleList([nn.Embedding(num_embeddings, embedding_dim) for _ in range(count)])
        self.chunks = layout == "chunks"

    def forward(self, input_seq: Tensor) -> list[Tensor | None]:
        """(T,) -> one (T, D) table lookup or None per layer (012 ... 012 in the record)."""
        if self.chunks:
            tables = list(self.embed[0](input_seq).chunk(self.count, dim=-1)) if self.count else []
        else:
            tables = [table(input_seq) for table in self.embed]
        return [None if slot is None else tables[slot] for slot in self.slots]


def soft_cap(logits: Tensor, kind: str = "sigmoid", cap: float = LOGIT_CAP,
             temperature: float = LOGIT_CAP_TEMPERATURE, rounding: str = "once") -> Tensor:
    """Soft-capped logits in fp32, any shape. "sigmoid" (Sub3Min): cap * sigmoid(z / temperature)
    in fp32, 30 * sigmoid(z / 7.5) = 15 tanh(z / 15) + 15 by default. "tanh" (#9-#18):
    cap * tanh(z / cap) on the logits' dtype: "once" computes it in fp32 and rounds once (the
    compiled chain, LINEAGE.md 8.4, inferred), "per_op" runs it eagerly in that dtype. "none" (#8)."""
    if kind == "sigmoid":
        return cap * torch.sigmoid(logits.float() / temperature)
    if kind == "none":
        return logits.float()
    if kind != "tanh":
        raise ValueError(f"unknown soft-cap kind {kind!r}")
    if rounding == "per_op":
        return (cap * torch.tanh(logits / cap)).float()
    return (cap * torch.tanh(logits.float() / cap)).to(logits.dtype).float()


class GPT(nn.Module):
    """The record's model and its lineage. All parameters fp32 at construction (see
    `cast_embeddings_to_bf16`, `apply_dtype_policy`).

    Keyword options (defaults = the record): `attention` backend, `fp8_head` (training mode uses the
    FP8 lm_head; the fp32 policy turns it off), `fp8_backend`, `fp8_grad_scale` (the record's 2^29
    suits a loss averaged over 65536 tokens; scale it by T / 65536 for fewer, see fp8.py), `rotary_max_len`, `eot_id`, and the
    per-layer patterns `value_embed_slots`, `long_window_layers`, `attention_free_layers`, and
    `qkv_layout` ("merged" as the record, or "separate": see CausalSelfAttention). `lineage`: a
    torch_ref ModelConfig whose lineage switches (and attention scale, soft-cap) apply; dims and
    the options above come from the arguments (`GPT.from_config` takes all from one config).
    """

    def __init__(
        self,
        vocab_size: int,
        num_layers: int,
        num_heads: int,
        model_dim: int,
        *,
        attention: AttentionImpl = "auto",
        fp8_head: bool = True,
        fp8_backend: FP8Backend = "auto",
        fp8_grad_scale: float = GRAD_SCALE,
        rotary_max_len: int = _RECORD.rope_max_len,
        eot_id: int = EOT_ID,
        value_embed_slots: tuple[int | None, ...] = _RECORD.value_embed_slots,
        long_window_layers: Iterable[int] = _RECORD.long_window_layers,
        attention_free_layers: Iterable[int] = _RECORD.attention_free_layers,
        qkv_layout: str = _RECORD.qkv_layout,
        lineage: ModelConfig = _RECORD,
    ):
        super().__init__()
        if attention not in ("auto", "flex", "sdpa"):
            raise ValueError(f"attention must be 'auto', 'flex' or 'sdpa', got {attention!r}")
        if num_layers % 2 and lineage.unet_skips:
            raise ValueError(f"the U-net pairs encoder and decoder layers; got odd num_layers {num_layers}")
        if len(value_embed_slots) != num_layers:
            raise ValueError(f"value_embed_slots has {len(value_embed_slots)} entries for {num_layers} layers")
        if model_dim % num_heads:
            raise ValueError(f"model_dim {model_dim} is not divisible by num_heads {num_heads}")
        self.attention = attention
        self.fp8_head = fp8_head
        self.fp8_backend = fp8_backend
        self.fp8_grad_scale = fp8_grad_scale
        self.eot_id = eot_id
        self.long_window_layers = frozenset(long_window_layers)
        self.lineage = lineage
        attention_free = frozenset(attention_free_layers)
        # Only the head is padded (50257 -> 50304) in the record; #8-#18 pad the embeddings too.
        embed_rows = next_multiple(vocab_size, 128) if lineage.embed_rows == "padded" else vocab_size

        self.embed = nn.Embedding(embed_rows, model_dim)
        self.value_embeds = ValueEmbedding(embed_rows, model_dim, tuple(value_embed_slots), lineage.value_embed_layout)
        # One pair of tables shared by every layer (identical in the record, which builds 11 copies).
        cos, sin = rotary_tables(model_dim // num_heads, rotary_max_len, kind=lineage.rotary)
        self.blocks = nn.ModuleList(
            [Block(model_dim, num_heads, i not in attention_free, cos, sin, qkv_layout, lineage) for i in range(num_layers)]
        )
        self.num_encoder_layers = num_layers // 2
        self.num_decoder_layers = num_layers - self.num_encoder_layers
        if lineage.unet_skips:
            self.skip_weights = nn.Parameter(torch.ones(self.num_decoder_layers))
        self.lm_head = CastedLinear(model_dim, next_multiple(vocab_size, 128), lineage.linear_init)
        self.lm_head.weight.detach().zero_()

    @classmethod
    def from_config(cls, config: ModelConfig, **options) -> GPT:
        """GPT(config's dims, patterns and switches, **options) in fp32; apply_dtype_policy next."""
        return cls(
            config.vocab_size, config.num_layers, config.num_heads, config.model_dim,
            rotary_max_len=config.rope_max_len, eot_id=config.eot_id, value_embed_slots=config.value_embed_slots,
            long_window_layers=config.long_window_layers, attention_free_layers=config.attention_free_layers,
            qkv_layout=config.qkv_layout, lineage=config, **options,
        )

    # --- masks -------------------------------------------------------------------------------
    def _use_flex(self, device: torch.device) -> bool:
        return self.attention == "flex" or (self.attention == "auto" and device.type == "cuda")

    def attention_masks(self, input_seq: Tensor, sliding_window_num_blocks: int | Tensor) -> tuple:
        """(long, short) masks for W_long and W_long // 2: BlockMasks (flex) or (T, T) bool tensors (SDPA).

        By the lineage's attention_mask: "document_tokens" (#15) takes the window in tokens and
        gives one mask for both; "causal" (#8/#9) gives CAUSAL for both (the window is unused)."""
        mask_kind = self.lineage.attention_mask
        if mask_kind == "causal":
            return CAUSAL, CAUSAL
        docs = masks_lib.document_ids(input_seq, self.eot_id, BLOCK_SIZE)
        w_long = sliding_window_num_blocks  # an int, or a 0-d tensor as in the record (no recompiles)
        if not isinstance(w_long, Tensor) and int(w_long) < 0:
            raise ValueError(f"sliding_window_num_blocks must be >= 0, got {w_long}")
        if mask_kind == "document_tokens":
            lists = masks_lib.token_window_block_lists(docs, w_long, BLOCK_SIZE)
            if self._use_flex(input_seq.device):
                mask = masks_lib.build_block_mask(lists, docs, BLOCK_SIZE, window_tokens=w_long)
            else:
                mask = masks_lib.allowed_mask_from_block_lists(lists, docs, BLOCK_SIZE, window_tokens=w_long)
            return mask, mask
        lists = masks_lib.block_lists(docs, BLOCK_SIZE)
        truncated = [masks_lib.truncate_to_window(lists, w) for w in (w_long, w_long // 2)]
        if self._use_flex(input_seq.device):
            return tuple(masks_lib.build_block_mask(t, docs, BLOCK_SIZE) for t in truncated)
        return tuple(masks_lib.allowed_mask_from_block_lists(t, docs, BLOCK_SIZE) for t in truncated)

    # --- forward -----------------------------------------------------------------------------
    def _check_inputs(self, input_seq: Tensor, target_seq: Tensor | None = None) -> None:
        if input_seq.ndim != 1:
            raise ValueError(f"input_seq must be 1-D (one packed sequence), got shape {tuple(input_seq.shape)}")
        if input_seq.is_floating_point() or input_seq.is_complex():
            raise ValueError(f"input_seq must hold integer token ids, got {input_seq.dtype}")
        if input_seq.numel() == 0 or input_seq.numel() % BLOCK_SIZE:
            raise ValueError(f"sequence length {input_seq.numel()} must be a positive multiple of {BLOCK_SIZE}")
        if target_seq is not None and target_seq.shape != input_seq.shape:
            raise ValueError(f"target_seq shape {tuple(target_seq.shape)} != input_seq shape {tuple(input_seq.shape)}")

    def final_hidden(self, input_seq: Tensor, sliding_window_num_blocks: int | Tensor) -> Tensor:
        """(T,) int tokens -> (1, T, D) final normed activations, in the embeddings' dtype."""
        self._check_inputs(input_seq)
        eps = self.lineage.rms_norm_eps
        unet = self.lineage.unet_skips
        long_mask, short_mask = self.attention_masks(input_seq, sliding_window_num_blocks)
        x = x0 = norm(self.embed(input_seq)[None], eps)
        value_embeds = self.value_embeds(input_seq)
        skips = []
        v_first = None
        for i, block in enumerate(self.blocks):
            if unet and i >= self.num_encoder_layers:  # decoder: U-net skip from the mirrored encoder layer
                x = x + self.skip_weights[i - self.num_encoder_layers] * skips.pop()
            mask = long_mask if i in self.long_window_layers else short_mask
            # v_first: #9's layer-0 raw value projection, mixed into every later layer's value
            x, v_first = block.run(x, value_embeds[i], x0, mask, v_first)
            if unet and i < self.num_encoder_layers:
                skips.append(x)
        return norm(x, eps)

    def head(self, x: Tensor) -> Tensor:
        """(..., D) -> (..., Vp) logits before the soft-cap: FP8 in training (if enabled), plain otherwise."""
        if self.training and self.fp8_head:
            return lm_head_fp8(x, self.lm_head.weight, self.fp8_backend, self.fp8_grad_scale)
        return self.lm_head(x)

    def logits(self, input_seq: Tensor, sliding_window_num_blocks: int | Tensor) -> Tensor:
        """(T,) int tokens -> (T, Vp) logits BEFORE the soft-cap, in the activations' dtype."""
        return self.head(self.final_hidden(input_seq, sliding_window_num_blocks))[0]

    def capped(self, logits: Tensor) -> Tensor:
        """The lineage's soft-cap of `logits` (any shape), fp32."""
        cfg = self.lineage
        return soft_cap(logits, cfg.soft_cap, cfg.logit_cap, cfg.logit_cap_temperature, cfg.soft_cap_rounding)

    def forward(self, input_seq: Tensor, target_seq: Tensor, sliding_window_num_blocks: int | Tensor) -> Tensor:
        """(T,) int inputs, (T,) int targets, the window (W_long blocks; sw tokens for #15) ->
        fp32 scalar: mean CE over all Vp classes."""
        self._check_inputs(input_seq, target_seq)
        capped = self.capped(self.logits(input_seq, sliding_window_num_blocks))
        return F.cross_entropy(capped, target_seq.long())


def apply_dtype_policy(model: GPT, policy: str) -> GPT:
    """A built (fp32) model under a dtype policy, in place: "record" (bf16 embedding tables),
    "bf16_model" (#15: the model rounded to bf16, embeddings and scalars kept bf16, weight
    matrices back in fp32 holding the rounded values; rotary tables stay fp32, cast at use),
    "autocast" (#8/#9: fp32 parameters, every matmul on bf16 copies), "fp32" (nothing)."""
    if policy == "record":
        return cast_embeddings_to_bf16(model)
    if policy == "bf16_model":
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, nn.Embedding):
                    module.bfloat16()
            for name, param in model.named_parameters():
                if param.ndim < 2:
                    param.data = param.data.bfloat16()
                elif not name.startswith(("embed.", "value_embeds.")):
                    param.copy_(param.bfloat16().float())
    elif policy == "autocast":
        for module in model.modules():
            if isinstance(module, (CastedLinear, CausalSelfAttention)):
                module.compute_dtype = torch.bfloat16
    elif policy != "fp32":
        raise ValueError(f"unknown dtype policy {policy!r}")
    return model


def cast_embeddings_to_bf16(model: nn.Module) -> nn.Module:
    """The record's precision policy: every nn.Embedding to bf16 (round to nearest even), in place."""
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            module.bfloat16()
    return model


_COMPILE_PREFIX = "_orig_mod."


def strip_compile_prefix(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Drop torch.compile's `_orig_mod.` key prefixes (the record saves its compiled model)."""
    out = {}
    for key, value in state_dict.items():
        while key.startswith(_COMPILE_PREFIX):
            key = key[len(_COMPILE_PREFIX):]
        out[key] = value
    return out


# The earlier records' own names (LINEAGE.md 3.1, 5.1, 6.1) -> torch_ref's: #8/#9/#15's
# `transformer.{wte,vte,h.i}`, #8-#18's c_q/c_k/c_v (qkv_layout "separate"); #15's persistent
# rotary buffer is recomputed from its config, so dropped.
_RECORD_RENAMES = (
    (r"^transformer\.wte\.", "embed."),
    (r"^transformer\.vte\.", "value_embeds.embed.0."),
    (r"^transformer\.h\.", "blocks."),
    (r"\.attn\.c_q\.weight$", ".attn.q_w"),
    (r"\.attn\.c_k\.weight$", ".attn.k_w"),
    (r"\.attn\.c_v\.weight$", ".attn.v_w"),
)


def to_model_names(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A state dict saved by any record of the lineage (`_orig_mod.` or not) under torch_ref's
    parameter names; Sub3Min's keys pass unchanged."""
    renamed: dict[str, Tensor] = {}
    for key, value in strip_compile_prefix(state_dict).items():
        if re.search(r"\.attn\.rotary\.inv_freq$", key):
            continue
        for pattern, replacement in _RECORD_RENAMES:
            key = re.sub(pattern, replacement, key)
        if key in renamed:
            raise ValueError(f"state dict has two keys for {key!r} (a record's name and torch_ref's)")
        renamed[key] = value
    return renamed


def to_qkv_layout(state_dict: Mapping[str, Tensor], layout: str) -> dict[str, Tensor]:
    """`state_dict` with every block's attention weights in `layout`: "merged" stacks
    `attn.q_w`, `attn.k_w`, `attn.v_w` (D, D) into `attn.qkv_w` (3, D, D), "separate" splits it.
    Values are moved, not changed; other keys pass through. Raises ValueError on an unknown
    layout or a block with only some of q_w, k_w, v_w."""
    if layout not in QKV_LAYOUTS:
        raise ValueError(f"qkv_layout must be 'merged' or 'separate', got {layout!r}")
    out: dict[str, Tensor] = {}
    for key, value in state_dict.items():
        prefix, _, name = key.rpartition(".")
        if name == "qkv_w" and layout == "separate":
            out.update({f"{prefix}.{part}": w for part, w in zip(SEPARATE_QKV_NAMES, value.unbind(0))})
        elif name in SEPARATE_QKV_NAMES and layout == "merged":
            parts = [f"{prefix}.{part}" for part in SEPARATE_QKV_NAMES]
            if not all(part in state_dict for part in parts):
                raise ValueError(f"{prefix} has separate QKV weights but not all of {list(SEPARATE_QKV_NAMES)}")
            if name == SEPARATE_QKV_NAMES[0]:
                out[f"{prefix}.qkv_w"] = torch.stack([state_dict[part] for part in parts])
        else:
            out[key] = value
    return out


def qkv_layout_of(model: nn.Module) -> str:
    """The qkv_layout of `model`'s attention layers ("merged" when it has none)."""
    layouts = {m.qkv_layout for m in model.modules() if isinstance(m, CausalSelfAttention)}
    return layouts.pop() if len(layouts) == 1 else "merged"


def load_record_state_dict(model: nn.Module, state_dict: Mapping[str, Tensor], *, shapes_only: bool = False) -> nn.Module:
    """Load a record-format state dict into `model`, in place (`shapes_only`: check, load nothing).

    Strips torch.compile's `_orig_mod.` prefixes, converts the QKV weights to the model's
    qkv_layout (`to_qkv_layout`) and casts each tensor to the dtype and device of the model's
    own tensor (bf16 <-> fp32). Raises ValueError listing missing, unexpected and mis-shaped keys.
    """
    own = model.state_dict()
    renamed = to_qkv_layout(to_model_names(state_dict), qkv_layout_of(model))
    missing = sorted(set(own) - set(renamed))
    unexpected = sorted(set(renamed) - set(own))
    misshaped = sorted(
        f"{k}: checkpoint {tuple(renamed[k].shape)} vs model {tuple(own[k].shape)}"
        for k in set(own) & set(renamed)
        if tuple(renamed[k].shape) != tuple(own[k].shape)
    )
    if missing or unexpected or misshaped:
        problems = []
        if missing:
            problems.append(f"missing keys: {missing}")
        if unexpected:
            problems.append(f"unexpected keys: {unexpected}")
        if misshaped:
            problems.append(f"mis-shaped keys: {misshaped}")
        raise ValueError("state dict does not match the model; " + "; ".join(problems))
    if shapes_only:
        return model
    converted = {k: v.detach().to(dtype=own[k].dtype, device=own[k].device) for k, v in renamed.items()}
    model.load_state_dict(converted, strict=True)
    return model


def model_config_from_state_dict(base: ModelConfig, state_dict: dict[str, Tensor], head_dim: int) -> ModelConfig:
    """`base` with vocab, width, depth, heads and attention-free layers read off a record state dict.

    D = embed.weight.shape[1], vocab = its rows, layers = the number of `blocks.i`, heads =
    D // head_dim; a block without `attn.qkv_w` (or `attn.q_w`...) is attention-free (layer 7 in
    the record); qkv_layout is the state dict's.
    """
    state_dict = to_model_names(state_dict)
    if "embed.weight" not in state_dict:
        raise ValueError("checkpoint state dict has no 'embed.weight'; not a record-format model")
    if state_dict["embed.weight"].dim() != 2:
        raise ValueError(f"embed.weight has shape {tuple(state_dict['embed.weight'].shape)}; expected (vocabulary, width)")
    rows, model_dim = state_dict["embed.weight"].shape
    # #8-#18 pad their embeddings as their head: the base's vocabulary when its padded rows fit.
    padded_rows = next_multiple(base.vocab_size, 128) if base.embed_rows == "padded" else base.vocab_size
    vocab_size = base.vocab_size if rows == padded_rows else rows
    block_names = {key.split(".")[1] for key in state_dict if key.startswith("blocks.")}
    if not all(name.isdigit() and name.isascii() for name in block_names):
        raise ValueError(f"checkpoint block names are not numbers: {sorted(block_names)[:5]}")
    layers = sorted({int(name) for name in block_names})
    if not layers or layers != list(range(len(layers))):
        raise ValueError(f"checkpoint blocks are not numbered 0..n-1: {layers}")
    if model_dim % head_dim:
        raise ValueError(f"model_dim {model_dim} from the checkpoint is not divisible by --head-dim {head_dim}")
    has_attention = {i for i in layers for name in ("qkv_w", "q_w") if f"blocks.{i}.attn.{name}" in state_dict}
    attention_free = tuple(i for i in layers if i not in has_attention)
    separate = any(f"blocks.{i}.attn.q_w" in state_dict for i in layers)
    return replace_config(
        base,
        qkv_layout="separate" if separate else "merged" if has_attention else base.qkv_layout,
        vocab_size=int(vocab_size),
        model_dim=int(model_dim),
        num_layers=len(layers),
        num_heads=int(model_dim) // head_dim,
        attention_free_layers=attention_free,
    )


def state_dict_problem(state_dict: object) -> str | None:
    """What makes a loaded 'model' item unusable as a state dict, or None (jaxgpt.convert's rule):
    str keys to floating-point tensors, each backed by as many bytes as it holds (a tensor expanded
    from a small storage would claim an absurd size that a copy then allocates)."""
    if not isinstance(state_dict, dict):
        return f"is a {type(state_dict).__name__}, not a dict"
    for key, value in state_dict.items():
        if not isinstance(key, str):
            return f"has a key that is not a name: {key!r:.80}"
        if not isinstance(value, Tensor):
            return f"holds a {type(value).__name__} at {key!r:.80}, not a tensor"
        if not value.is_floating_point():
            return f"holds {key!r:.80} of dtype {value.dtype}, not a floating-point tensor"
        if value.numel() * value.element_size() > value.untyped_storage().nbytes():
            return (f"holds {key!r:.80} of shape {tuple(value.shape)} over a storage of "
                    f"{value.untyped_storage().nbytes()} bytes (an expanded tensor)")
    return None


def check_record_shapes(config: ModelConfig, state_dict: Mapping[str, Tensor]) -> None:
    """ValueError listing the missing, unexpected and mis-shaped keys of `state_dict` for
    GPT.from_config(config), found on the meta device: nothing is allocated before a state dict
    is known to fit (its dims could otherwise ask for any size)."""
    with torch.device("meta"):
        load_record_state_dict(GPT.from_config(config), state_dict, shapes_only=True)
