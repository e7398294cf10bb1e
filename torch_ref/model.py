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
keyword (a torch_ref.config.ModelConfig; `GPT.from_config` builds a model from one) is resolved
once into a `lineage.ModelVariants` (torch_ref/lineage/) of plain functions and values that every
module takes (this module reads no switch), and `apply_dtype_policy` gives a built model #8/#9's
autocast or #15's bf16 model. The variants with parameters create them under this module's
names; each record's own state-dict names are mapped by `torch_ref.run.convert.to_model_names`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torch_ref import lineage  # the lineage's variants, chosen once per model
from torch_ref.attention import attend
from torch_ref.config import BLOCK_SIZE, EOT_ID, ModelConfig, next_multiple
from torch_ref.fp8 import GRAD_SCALE, FP8Backend, lm_head_fp8
from torch_ref.layers import CastedLinear, init_bound, norm
from torch_ref.loss import soft_cap
from torch_ref.rotary import Rotary

AttentionImpl = Literal["auto", "flex", "sdpa"]
ModuleT = TypeVar("ModuleT", bound=nn.Module)
_RECORD = ModelConfig()  # the record's per-layer patterns (value embeddings, windows, layer 7)

QKV_LAYOUTS = ("merged", "separate")
SEPARATE_QKV_NAMES = ("q_w", "k_w", "v_w")  # the slices of qkv_w, in order


class CausalSelfAttention(nn.Module):
    """QKV attention with QK-norm, rotary, value mixing and a zero-init projection.

    qkv_layout "merged" (the record's): one qkv_w (3, D, D); "separate": q_w, k_w, v_w, each
    (D, D), whose stack is qkv_w (same init numbers) and three matmuls instead of one.
    `run.convert.load_record_state_dict` loads either layout's state dict into either.
    `config` (default: the record's) gives the attention scale; `variants` (default: resolved
    from `config`) the lineage's value mixing and its scalars (`lambdas` (2,), #9's `lamb` (), or
    none), the init bound, the rotary's precision and the RMSNorm eps."""

    def __init__(self, dim: int, num_heads: int, cos: Tensor, sin: Tensor, qkv_layout: str = "merged",
                 config: ModelConfig = _RECORD, variants: lineage.ModelVariants | None = None):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"model_dim {dim} is not divisible by num_heads {num_heads}")
        if qkv_layout not in QKV_LAYOUTS:
            raise ValueError(f"qkv_layout must be 'merged' or 'separate', got {qkv_layout!r}")
        self.num_heads = num_heads
        self.qkv_layout = qkv_layout
        self.config = config
        self.variants = variants = variants or lineage.model_variants(config)
        self.compute_dtype: torch.dtype | None = None  # autocast: bf16 copies of the fp32 input
        bound = init_bound(dim, variants.init_kind)
        # (3, D, D): query, key, value matrices in (out, in) layout, orthogonalised separately by Muon.
        qkv_w = torch.empty(3, dim, dim).uniform_(-bound, bound)
        if qkv_layout == "merged":
            self.qkv_w = nn.Parameter(qkv_w)
        else:
            self.q_w, self.k_w, self.v_w = (nn.Parameter(w.clone()) for w in qkv_w)
        variants.value_mixing.init_params(self)
        self.rotary = Rotary(cos, sin, in_fp32=variants.rotary.in_fp32)
        self.c_proj = CastedLinear(dim, dim, variants.init_kind)
        self.c_proj.weight.detach().zero_()  # zero init (after consuming RNG, as the record)

    def forward(self, x: Tensor, ve: Tensor | None, mask) -> Tensor:
        """x (1, T, D) normed input, ve (T, D) or None -> (1, T, D) in the matmul dtype."""
        return self.run(x, ve, mask)[0]

    def run(self, x: Tensor, ve: Tensor | None, mask, v_first: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """(output (1, T, D), #9's v_first: layer 0's raw value projection (1, T, H, Dh) once made,
        else as given)."""
        if self.compute_dtype is not None:
            x = x.to(self.compute_dtype)
        batch, seq_len, dim = x.shape
        v_first = self.variants.value_mixing.first_value(self, x, v_first)
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
        the value mixing (the lineage's), QK-norm and rotary on q and k."""
        eps = self.variants.norm_eps
        batch, seq_len, _ = x.shape
        if self.qkv_layout == "merged":
            qkv = F.linear(x, self.qkv_w.flatten(end_dim=1).type_as(x))
            q, k, v = qkv.view(batch, seq_len, 3 * self.num_heads, -1).chunk(3, dim=-2)
        else:
            q, k, v = (F.linear(x, w.type_as(x)).view(batch, seq_len, self.num_heads, -1)
                       for w in (self.q_w, self.k_w, self.v_w))
        v = self.variants.value_mixing.mix(self, v, ve, v_first)
        return self.rotary(norm(q, eps)), self.rotary(norm(k, eps)), v


class MLP(nn.Module):
    """D -> 4D -> relu^2 -> D, output projection zero-initialised."""

    def __init__(self, dim: int, init_kind: str = "record"):
        super().__init__()
        self.c_fc = CastedLinear(dim, 4 * dim, init_kind)
        self.c_proj = CastedLinear(4 * dim, dim, init_kind)
        self.c_proj.weight.detach().zero_()

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    """x <- l0*x + l1*x0 (the lineage's block input); x += attn(norm(x)) (if any); x += mlp(norm(x)).
    `variants`: the model's (default: resolved from `config`)."""

    def __init__(self, dim: int, num_heads: int, has_attention: bool, cos: Tensor, sin: Tensor,
                 qkv_layout: str = "merged", config: ModelConfig = _RECORD,
                 variants: lineage.ModelVariants | None = None):
        super().__init__()
        self.config = config
        self.variants = variants = variants or lineage.model_variants(config)
        self.attn = CausalSelfAttention(dim, num_heads, cos, sin, qkv_layout, config, variants) if has_attention else None
        self.mlp = MLP(dim, variants.init_kind)
        variants.block_input.init_params(self)

    def forward(self, x: Tensor, ve: Tensor | None, x0: Tensor, mask) -> Tensor:
        return self.run(x, ve, x0, mask)[0]

    def run(self, x: Tensor, ve: Tensor | None, x0: Tensor, mask,
            v_first: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """(output, #9's v_first once an attention layer made it (#9's value residual), else as given)."""
        eps = self.variants.norm_eps
        x = self.variants.block_input.mix(self, x, x0)
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


class GPT(nn.Module):
    """The record's model and its lineage. All parameters fp32 at construction (see
    `cast_embeddings_to_bf16`, `apply_dtype_policy`).

    Keyword options (defaults = the record): `attention` backend, `fp8_head` (training mode uses the
    FP8 lm_head; the fp32 policy turns it off), `fp8_backend`, `fp8_grad_scale` (the record's 2^29
    suits a loss averaged over 65536 tokens; scale it by T / 65536 for fewer, see fp8.py), `rotary_max_len`, `eot_id`, and the
    per-layer patterns `value_embed_slots`, `long_window_layers`, `attention_free_layers`, and
    `qkv_layout` ("merged" as the record, or "separate": see CausalSelfAttention). `config`: a
    torch_ref ModelConfig whose lineage variants (resolved once: `lineage.model_variants`), attention scale and
    soft-cap apply; dims and the options above come from the arguments (`GPT.from_config` takes all from one config).
    """

    skip_weights: nn.Parameter  # one per decoder layer, when the lineage has U-net skips (lineage/skips.py creates it)

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
        config: ModelConfig = _RECORD,
    ):
        super().__init__()
        if attention not in ("auto", "flex", "sdpa"):
            raise ValueError(f"attention must be 'auto', 'flex' or 'sdpa', got {attention!r}")
        self.variants = variants = lineage.model_variants(config)
        self.skip_plan = variants.skips.plan(num_layers)  # refuses an odd U-net
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
        self.config = config
        attention_free = frozenset(attention_free_layers)
        # Only the head is padded (50257 -> 50304) in the record; #8-#18 pad the embeddings too.
        table_rows = next_multiple(vocab_size, 128) if variants.padded_embeddings else vocab_size

        self.embed = nn.Embedding(table_rows, model_dim)
        self.value_embeds = ValueEmbedding(table_rows, model_dim, tuple(value_embed_slots),
                                           "chunks" if variants.value_embed_chunks else "tables")
        # One pair of tables shared by every layer (identical in the record, which builds 11 copies).
        cos, sin = variants.rotary.tables(model_dim // num_heads, rotary_max_len)
        self.blocks = nn.ModuleList(
            [Block(model_dim, num_heads, i not in attention_free, cos, sin, qkv_layout, config, variants)
             for i in range(num_layers)]
        )
        self.num_encoder_layers = num_layers // 2
        self.num_decoder_layers = num_layers - self.num_encoder_layers
        variants.skips.init_params(self, num_layers)
        self.lm_head = CastedLinear(model_dim, next_multiple(vocab_size, 128), variants.init_kind)
        self.lm_head.weight.detach().zero_()

    @classmethod
    def from_config(cls, config: ModelConfig, **options) -> GPT:
        """GPT(config's dims, patterns and switches, **options) in fp32; apply_dtype_policy next."""
        return cls(
            config.vocab_size, config.num_layers, config.num_heads, config.model_dim,
            rotary_max_len=config.rope_max_len, eot_id=config.eot_id, value_embed_slots=config.value_embed_slots,
            long_window_layers=config.long_window_layers, attention_free_layers=config.attention_free_layers,
            qkv_layout=config.qkv_layout, config=config, **options,
        )

    # --- masks -------------------------------------------------------------------------------
    def _use_flex(self, device: torch.device) -> bool:
        return self.attention == "flex" or (self.attention == "auto" and device.type == "cuda")

    def attention_masks(self, input_seq: Tensor, sliding_window_num_blocks: int | Tensor) -> tuple:
        """(long, short) masks for W_long and W_long // 2: BlockMasks (flex) or (T, T) bool tensors (SDPA).

        By the lineage's mask (torch_ref/lineage/windows.py): #15's takes the window in tokens and
        gives one mask for both; #8/#9's plain causal attention gives CAUSAL for both (the window
        is unused). The window: an int, or a 0-d tensor as in the record (no recompiles)."""
        return self.variants.masks(input_seq, sliding_window_num_blocks, self.eot_id, self._use_flex(input_seq.device))

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
        eps = self.variants.norm_eps
        long_mask, short_mask = self.attention_masks(input_seq, sliding_window_num_blocks)
        x = x0 = norm(self.embed(input_seq)[None], eps)
        value_embeds = self.value_embeds(input_seq)
        skips: list[Tensor] = []
        v_first = None
        for i, (block, skip) in enumerate(zip(cast(Iterable[Block], self.blocks), self.skip_plan, strict=True)):
            if skip.add_weight is not None:  # decoder: U-net skip from the mirrored encoder layer
                x = x + self.skip_weights[skip.add_weight] * skips.pop()
            mask = long_mask if i in self.long_window_layers else short_mask
            # v_first: #9's layer-0 raw value projection, mixed into every later layer's value
            x, v_first = block.run(x, value_embeds[i], x0, mask, v_first)
            if skip.store:
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
        cfg, cap = self.config, self.variants.cap
        return soft_cap(logits, cap.kind, cfg.logit_cap, cfg.logit_cap_temperature, cap.rounding)

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


def cast_embeddings_to_bf16(model: ModuleT) -> ModuleT:
    """The record's precision policy: every nn.Embedding to bf16 (round to nearest even), in place."""
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            module.bfloat16()
    return model
