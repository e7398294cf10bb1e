"""The training command line (`python -m jaxgpt.train --help`): flags -> (Preset, RunOptions).

Every flag is declared here by name. A config flag overrides one field of the chosen preset
(`--preset`); a flag left out keeps the preset's value. Choices come from the config's
`Literal` types. Per-layer tuples (value-embedding slots, long-window and attention-free
layers) have no flags: presets and `--init-from` set them. The flag types torch_ref's command
line uses too and the run-id check are runkit's (runkit.cli, runkit.names). Imports no jax.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from jaxgpt import config as cfg
from jaxgpt import presets
from jaxgpt.run import compile_cache
from runkit import names
from runkit.cli import parse_bool, parse_profile_window

PROG = "python -m jaxgpt.train"
# A process of a multi-process run whose heartbeat is silent this long is lost (jaxgpt.run.peers,
# which beats every 2 s: the bound's floor leaves a live process three beats).
PEER_TIMEOUT_S = 20.0
MIN_PEER_TIMEOUT_S = 6.0


def print_error(message: object) -> None:
    """A runtime error's one line on stderr, `PROG: error: MESSAGE`, the form argparse gives a
    usage error (every command of the project writes its errors so)."""
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunOptions:
    """What a run does besides its config: where it starts from and what it writes."""

    init_from: str | None = None  # record-format torch checkpoint to start from
    resume: str | None = None  # checkpoint directory to continue from (and keep saving into)
    export_torch: str | None = None  # write the final params as {"model": state_dict} here
    run_id: str | None = None  # None: a fresh uuid4
    progress: bool = True  # tqdm bar when stdout is a terminal
    save_checkpoint: bool = False  # save the final state even when checkpoint_every is 0
    coordinator: str | None = None  # multi-host: jax.distributed coordinator "host:port"
    num_processes: int | None = None
    process_id: int | None = None
    head_dim: int | None = None  # --init-from: heads = model_dim / head_dim (None: the preset's)
    debug: bool = False  # show tracebacks instead of one-line errors
    sync: bool = False  # wait for every step before dispatching the next (debugging; the record's loop shape)
    allow_nonfinite_loss: bool = False  # train on through a NaN / inf loss instead of stopping with exit 1
    profile: tuple[int, int] | None = None  # trace steps START..STOP (train-line numbers) with jax.profiler
    compile_cache: str | None = None  # JAX's persistent compilation cache folder (None: none)
    tensorboard: str | None = None  # also write the metrics as TensorBoard events into <tensorboard>/<run_id>
    peer_timeout_s: float = PEER_TIMEOUT_S  # multi-process: a process silent this long is lost (run.peers)
    verify_shards: bool = False  # hash every shard against meta.json, even those hashed before unchanged
    overridden: tuple[str, ...] = ()  # "section.field" of every config flag given


def or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse`, except that "none" gives None (the field's "not set" value)."""

    def parse_or_none(text: str) -> Any:
        return None if text.lower() == "none" else parse(text)

    parse_or_none.__name__ = parse.__name__  # argparse names the type in its error message
    return parse_or_none


def parse_peer_timeout(text: str) -> float:
    """--peer-timeout's seconds: at least MIN_PEER_TIMEOUT_S (a live process must never look silent)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not seconds >= MIN_PEER_TIMEOUT_S:  # NaN too
        raise argparse.ArgumentTypeError(f"{text} s is below {MIN_PEER_TIMEOUT_S:g} s, three of the heartbeat's 2-s beats")
    return seconds


def _add_field(group: Any, section: str, name: str, parse: Callable[[str], Any] | None, help_text: str, *,
               flag: str | None = None, aliases: Sequence[str] = (), choices: Sequence[str] | None = None) -> None:
    """A flag `--name-with-dashes` (or `flag`, plus `aliases`) that overrides `section`.`name` of the preset."""
    group.add_argument(
        flag or "--" + name.replace("_", "-"), *aliases, dest=f"{section}.{name}", type=parse, default=None,
        choices=choices, help=help_text,
        metavar=None if choices else "{true,false}" if parse is parse_bool else name.split("_")[-1].upper(),
    )


def _add_run_flags(group: Any) -> None:
    add = functools.partial(_add_field, group, "train")
    add("train_files", str, "glob of training shards (sorted; read in order)")
    add("val_files", str, "glob of validation shards (the first --val-tokens tokens are used)")
    add("steps", int, "training steps N; the LR decay (last 40%%) and window warmup 1728*s/N follow N")
    add("seq_len", int, "tokens per packed sequence T (a multiple of 128)")
    add("batch_tokens", int, "global batch in tokens per step (a multiple of seq_len * devices)")
    add("val_every", int, "validate at step 0, every K steps and after the last step; 0: after the last step only "
        "(the record's val_loss_every 0, 'only at the end')")
    add("val_tokens", int, "validation tokens per evaluation (a multiple of batch_tokens)")
    add("window_max_tokens", int, "attention window at the last step in tokens (1728 in the record)")
    add("devices", or_none(int), "use the first D devices (none: all)")
    add("seed", int, "parameter init seed (ignored with --init-from)")
    add("out_dir", str, "where logs/, metrics and checkpoints go")
    add("checkpoint_every", int, "save a checkpoint every K steps and at the end (0: never, see --save-checkpoint)")
    add("keep_checkpoints", int, "keep only the newest K checkpoints")
    group.add_argument("--cycle-data", dest="train.cycle_data", action="store_const", const=True, default=None,
                       help="start again at the first training shard when the shards run out")


def _add_lineage_train_flags(group: Any) -> None:
    add = functools.partial(_add_field, group, "train")
    add("window_schedule", str, "the window each step passes: blocks_ceil (Sub3Min), blocks_floor (#18), tokens (#15), "
        "none (#8/#9)", choices=get_args(cfg.WindowSchedule))
    add("repeat_first_batch", parse_bool, "train steps 0 and 1 on the first batch (#8/#9's loader quirk)")
    add("shard_switch", str, "when a rank leaves a shard: global (Sub3Min, #18), per_rank (#15), per_rank_inclusive "
        "(#8/#9)", choices=get_args(cfg.ShardSwitch))
    add("data_ranks", int, "record ranks whose offsets the per-rank shard switch tests (8 in the records)")


def _add_model_flags(group: Any) -> None:
    add = functools.partial(_add_field, group, "model")
    add("dtype_policy", str, "record: bf16 + FP8 head as the record; fp32: all-fp32 policy for parity",
        flag="--dtype", choices=get_args(cfg.DTypePolicy))
    add("attention_backend", str, "attention implementation (pallas: the block-sparse Triton kernel, interpreted on "
        "a CPU; mosaic: the same on Hopper through Mosaic GPU, bf16; auto: pallas on a GPU, blocked elsewhere)",
        aliases=("--attention",), choices=get_args(cfg.AttentionBackend))
    add("remat", str, "rematerialise each block in the backward pass", choices=get_args(cfg.RematPolicy))
    add("qkv_layout", str, "merged: one (3, D, D) qkv_w per block (the record's); separate: q_w, k_w, v_w",
        choices=get_args(cfg.QKVLayout))
    add("vocab_size", int, "vocabulary size (the head is padded to a multiple of 128)")
    add("num_layers", int, "transformer blocks (even: the U-net pairs them)")
    add("num_heads", int, "attention heads")
    add("model_dim", int, "model width D")
    add("block_size", int, "mask block in tokens")
    add("eot_id", int, "end-of-text token id (documents start with it)")
    add("attn_scale", or_none(float), "attention scale (Sub3Min's fixed 0.12; none: head_dim**-0.5)")
    add("logit_cap", float, "soft-cap of the logits")
    add("logit_cap_temperature", float, "soft-cap temperature")
    add("rope_max_len", int, "length of the rotary table")
    add("mlp_ratio", int, "MLP hidden width / model width")
    add("max_window_blocks", int, "largest attention window in blocks the compiled step supports")
    add("loss_chunk_tokens", or_none(int), "cross-entropy over this many tokens at a time (none: all)")
    add("fp8_grad_scale", float, "FP8 head gradient scale for a mean over 65,536 tokens per device")


def _add_lineage_model_flags(group: Any) -> None:
    add = functools.partial(_add_field, group, "model")
    add("rms_norm_eps", str, "RMSNorm eps: fp32 (2^-23, today's PyTorch) or as_run (2^-7 on bf16 inputs, the "
        "records' PyTorch builds)", choices=get_args(cfg.RMSNormEps))
    add("embed_rows", str, "embedding table rows: vocab (50257) or padded (50304, #8-#18)", choices=get_args(cfg.EmbedRows))
    add("linear_init", str, "linear init bound: record (sqrt(3)/2/sqrt(in)) or torch_default (1/sqrt(in), #8-#18)",
        choices=get_args(cfg.LinearInit))
    add("block_lambdas", parse_bool, "x <- l0 x + l1 x0 before each block (#9 on)")
    add("unet_skips", parse_bool, "U-net skip weights between encoder and decoder layers (#11 on)")
    add("value_embed_layout", str, "value embeddings as separate tables or chunks of one table (#15)",
        choices=get_args(cfg.ValueEmbedLayout))
    add("attn_value_lambdas", parse_bool, "attention value lambdas v = l0 v + l1 ve (#15 on)")
    add("value_residual", parse_bool, "#9's value residual v = (1 - lamb) v + lamb v_layer0")
    add("attention_mask", str, "document_blocks (Sub3Min, #18), document_tokens (#15), causal (#8/#9)",
        choices=get_args(cfg.AttentionMask))
    add("rotary", str, "rotary tables and precision (half_truncated: Sub3Min, #18; full: #8/#9; full_bf16_freq: #15)",
        choices=get_args(cfg.Rotary))
    add("as_written_roundings", parse_bool, "the records' own bf16 roundings (the full rotary tables) in every dtype "
        "policy; false: a study without them")
    add("soft_cap", str, "logit soft-cap: sigmoid (Sub3Min), tanh (#9-#18, cap --logit-cap), none (#8)",
        choices=get_args(cfg.SoftCap))
    add("soft_cap_rounding", str, "tanh cap on bf16 logits rounded once (compiled) or per op (eager)",
        choices=get_args(cfg.SoftCapRounding))
    add("fp8_head", parse_bool, "FP8 lm_head in training under a bf16 policy (#19 on)")


def _add_optim_flags(group: Any) -> None:
    add = functools.partial(_add_field, group, "optim")
    add("muon_lr", float, "Muon learning rate")
    add("muon_momentum_start", float, "Muon momentum at step 0")
    add("muon_momentum_end", float, "Muon momentum after the warmup")
    add("muon_momentum_warmup_steps", int, "steps of the Muon momentum warmup")
    add("ns_steps", int, "Newton-Schulz iterations")
    add("ns_dtype", str, "Newton-Schulz precision (bf16 as the record)", choices=get_args(cfg.NSDType))
    add("head_lr", float, "Adam learning rate of the lm_head")
    add("embed_lr", float, "Adam learning rate of the embeddings")
    add("scalar_lr", float, "Adam learning rate of the scalars")
    add("adam_b1", float, "Adam beta1")
    add("adam_b2", float, "Adam beta2")
    add("adam_eps", float, "Adam epsilon")
    add("cooldown_frac", float, "fraction of the steps over which the LR decays at the end")
    add("final_lr_frac", float, "LR multiplier at the last step")
    add("bf16_embeddings", or_none(parse_bool), "bf16 embedding tables and moments (none: follow --dtype)")
    add("muon_momentum_form", str, "Muon momentum: ema (lerps, #15 on) or sgd (buf = m buf + g, #8/#9)",
        choices=get_args(cfg.MuonMomentumForm))
    add("ns_iteration", str, "Newton-Schulz step: poly (bA + cA^2, #11 on) or chain (AX, #8/#9)",
        choices=get_args(cfg.NSIteration))
    add("cooldown_whole_steps", parse_bool, "LR cooldown of round(cooldown_frac * steps) whole steps (#8-#15)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Train the Sub3Min GPT with JAX on a data-parallel device mesh (the record's optimizers, "
        "schedules, validation and log lines). Config flags override the chosen preset's values.",
    )
    parser.add_argument("--preset", choices=sorted(presets.PRESETS), default="record",
                        help="starting config (default: record, alias sub3min); the lineage: "
                        + ", ".join(f"{name} (#{number} {record})" for name, (number, record, _) in presets.LINEAGE_PRESETS.items()))
    parser.add_argument("--init-from", metavar="CKPT.pt",
                        help="start from this record-format torch checkpoint {'model': state_dict}; model dims are inferred from it")
    parser.add_argument("--resume", metavar="DIR",
                        help="continue the run whose checkpoints are in DIR (same config required); new checkpoints go there too")
    parser.add_argument("--export-torch", metavar="PATH", help="after training, write the params as a record-format torch checkpoint")
    parser.add_argument("--save-checkpoint", action="store_true", help="save the final state even when --checkpoint-every is 0")
    parser.add_argument("--head-dim", type=int,
                        help="with --init-from: head width used to infer the number of heads (default: the preset's)")
    parser.add_argument("--run-id", type=names.argparse_name("--run-id"), metavar="NAME",
                        help="name of this run's log files and checkpoint folder, a plain name (default: a random uuid)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (it is only shown on a terminal anyway)")
    parser.add_argument("--debug", action="store_true", help="on an error, show the full traceback instead of one line")
    parser.add_argument("--sync", action="store_true", help="wait for each step and log it before dispatching the next "
                        "(debugging; same losses and log lines, the device idles between steps)")
    parser.add_argument("--allow-nonfinite-loss", action="store_true",
                        help="train on through a NaN or infinite loss (by default the run stops within two steps "
                        "of one, exit 1, and saves nothing after it)")
    parser.add_argument("--verify-shards", action="store_true", help="hash every shard the run reads against the "
                        "SHA-256 its folder's meta.json records (by default a shard is hashed once per file identity: "
                        "path, inode, size, mtime, ctime)")
    parser.add_argument("--profile", metavar="START:STOP", type=parse_profile_window,
                        help="trace the steps whose train lines read step:START .. step:STOP with jax.profiler "
                        "into OUT_DIR/profile/RUN_ID (TensorBoard/XProf, Perfetto; scripts/trace_kernels.py ranks its kernels)")
    parser.add_argument("--compile-cache", metavar="DIR",
                        help=f"JAX's persistent compilation cache: a second identical run skips compiling (default: "
                        f"${compile_cache.ENV_VAR}, else ${compile_cache.JAX_ENV_VAR}, else "
                        f"{compile_cache.default_folder()}; {compile_cache.OFF}: off)")
    parser.add_argument("--tensorboard", metavar="DIR", help="also write the metrics JSONL's numbers as TensorBoard "
                        "events into DIR/RUN_ID (tensorboard --logdir DIR shows every run there)")
    _add_run_flags(parser.add_argument_group("run (overrides the preset)"))
    _add_model_flags(parser.add_argument_group("model (overrides the preset)"))
    _add_optim_flags(parser.add_argument_group("optimizer and schedules (overrides the preset)"))
    _add_lineage_model_flags(parser.add_argument_group("lineage switches: model (docs/spec/LINEAGE.md section 7)"))
    _add_lineage_train_flags(parser.add_argument_group("lineage switches: window schedule and data"))
    hosts = parser.add_argument_group("several hosts (jax.distributed)")
    hosts.add_argument("--coordinator", metavar="HOST:PORT", help="coordinator address; also read from JAX_COORDINATOR_ADDRESS")
    hosts.add_argument("--num-processes", type=int, help="number of processes (hosts)")
    hosts.add_argument("--process-id", type=int, help="index of this process")
    hosts.add_argument("--peer-timeout", type=parse_peer_timeout, default=PEER_TIMEOUT_S, metavar="SECONDS",
                       help="a process whose heartbeat is silent this long is lost: the others stop, naming it and "
                            f"the newest checkpoint (default {PEER_TIMEOUT_S:g}; at least {MIN_PEER_TIMEOUT_S:g})")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[cfg.Preset, RunOptions]:
    """Parse the command line into a validated Preset and the RunOptions.

    Raises ValueError (naming the field) for an invalid combination of values."""
    args = build_parser().parse_args(argv)
    overrides: dict[str, dict[str, Any]] = {"model": {}, "optim": {}, "train": {}}
    overridden = set()
    for dest, value in vars(args).items():
        if "." in dest and value is not None:
            section, name = dest.split(".", 1)
            overrides[section][name] = value
            overridden.add(dest)
    preset = presets.get_preset(args.preset)
    preset = cfg.Preset(
        model=cfg.with_fields(preset.model, **overrides["model"]),
        optim=cfg.with_fields(preset.optim, **overrides["optim"]),
        train=cfg.with_fields(preset.train, **overrides["train"]),
    )
    options = RunOptions(
        init_from=args.init_from, resume=args.resume, export_torch=args.export_torch, run_id=args.run_id,
        progress=not args.no_progress, save_checkpoint=args.save_checkpoint, coordinator=args.coordinator,
        num_processes=args.num_processes, process_id=args.process_id, head_dim=args.head_dim,
        debug=args.debug, sync=args.sync, allow_nonfinite_loss=args.allow_nonfinite_loss, profile=args.profile,
        compile_cache=compile_cache.resolve(args.compile_cache), tensorboard=args.tensorboard,
        peer_timeout_s=args.peer_timeout, verify_shards=args.verify_shards, overridden=tuple(sorted(overridden)),
    )
    return preset, options
