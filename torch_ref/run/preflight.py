"""Everything a torch_ref run checks before its first step: the run's config, devices, output
paths, the checkpoints it starts from, the geometry and the data.

`python -m torch_ref.train` calls `start_run` once, before it spawns any rank, so that a bad
flag, a short or foreign shard, or an unwritable folder costs seconds, not a finished run
whose final save then fails. Each check raises ValueError (or the data module's own errors)
naming the problem. The same concept as jaxgpt.run.preflight (torch_ref imports nothing from
jaxgpt); the checks both make alike are runkit's (runkit.preflight, runkit.profiling).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

import torch_ref.config as cfg
from runkit.preflight import check_shard_digests
from runkit.profiling import check_window
from torch_ref import lineage
from torch_ref.data import batches_available, check_holds_one_batch, list_shards, read_shard, read_shard_header
from torch_ref.run import checkpoint as ckpt
from torch_ref.run import convert
from torch_ref.run.claim import check_outputs
from torch_ref.run.cli import RunOptions, torchrun_world_size
from torch_ref.run.convert import check_record_shapes, model_config_from_state_dict
from torch_ref.run.saved_state import resume_problem


def run_preset(preset: cfg.Preset, options: RunOptions, init_state: dict[str, Tensor] | None,
               resumed: dict[str, Any] | None, resume_path: Path | None) -> cfg.Preset:
    """The config the run trains: model dims read off the --init-from state, the saved
    checkpoint cadence kept on --resume (unless given again); a resumed run whose config differs
    from the saved one is refused, listing the fields."""
    if init_state is not None:
        head_dim = options.head_dim or preset.model.head_dim
        try:  # the dims, then every shape (on the meta device: nothing allocated before it fits)
            model = model_config_from_state_dict(preset.model, init_state, head_dim)
            check_record_shapes(model, init_state)
        except ValueError as error:
            raise ValueError(f"--init-from checkpoint {options.init_from}: {error}") from None
        preset = dataclasses.replace(preset, model=model)
    if resumed is not None:
        if (problem := resume_problem(resumed)) is not None:
            raise ValueError(f"{resume_path} {problem}" + ("; start from it with --init-from instead of --resume"
                                                          if "weights only" in problem else ""))
        preset = ckpt.keep_saved_cadence(preset, resumed["config"], options.overridden)
        assert resume_path is not None  # read_resume returns a checkpoint with its file
        ckpt.refuse_config_change(resumed["config"], ckpt.config_dict(preset), resume_path)
    return preset


def check_run(preset: cfg.Preset, options: RunOptions, start_step: int = 0,
              position: tuple[int, int] = (0, 0), served: int = 0) -> None:
    """Fail early, naming the problem, on inputs the loop could only trip over later. `preset`
    is the run's own (model dims from --init-from, cadence from --resume applied)."""
    train = preset.train
    world = train.devices
    assert world is not None  # a run names its device count (parse_args: --devices, torchrun's WORLD_SIZE, else 1)
    if train.batch_tokens % (world * train.seq_len):
        raise ValueError(
            f"--batch-tokens {train.batch_tokens} is not divisible by devices * seq_len = {world} * {train.seq_len}"
        )
    if train.val_tokens % (world * train.seq_len):
        raise ValueError(f"--val-tokens {train.val_tokens} is not divisible by devices * seq_len = {world} * {train.seq_len}")
    train_shards = list_shards(train.train_files)  # raises NoShardsError naming the pattern
    val_shards = list_shards(train.val_files) if train.val_tokens else []
    # A changed byte is another token, read silently: each shard is hashed once per file identity.
    reachable = train_shards if train.cycle_data else train_shards[position[0]:]
    for note in check_shard_digests(reachable + val_shards, full=options.verify_shards):
        if int(os.environ.get("RANK", 0)) == 0:
            print(note, file=sys.stderr)
    # Every shard the run can reach serves one batch on its own: a short one fails here, not
    # when the stream reaches it after minutes of training.
    for shard in train_shards if train.cycle_data else train_shards[position[0]:]:
        check_holds_one_batch(shard, read_shard_header(shard), train.batch_tokens)
    for shard in val_shards:
        check_holds_one_batch(shard, read_shard_header(shard), world * train.seq_len)
    stream = lineage.stream_variants(train)
    available = batches_available(train_shards, train.batch_tokens, position, *stream.shard_rule(), served)
    # With #8/#9's repeated first batch, steps 0 and 1 share one batch of the stream.
    needed = train.steps - start_step - stream.repeated_batches(start_step, train.steps)
    if not train.cycle_data and available < needed:
        raise ValueError(f"{train.train_files!r} holds {available} batches of {train.batch_tokens} tokens; "
                         f"{train.steps} steps need {needed}" + (f" from step {start_step}" if start_step else ""))
    if train.val_tokens:
        val_batch = world * train.seq_len
        available = batches_available(val_shards, val_batch)
        if available < train.val_tokens // val_batch:
            raise ValueError(f"{train.val_files!r} holds {available} batches of {val_batch} tokens; "
                             f"--val-tokens {train.val_tokens} needs {train.val_tokens // val_batch}")
    check_token_ids(train_shards + val_shards, preset.model.vocab_size)
    if options.device == "cuda" and world > torch.cuda.device_count() and torchrun_world_size() is None:
        raise ValueError(f"--devices {world} but only {torch.cuda.device_count()} CUDA devices are visible")
    check_outputs(preset, options)


def check_token_ids(shards: Sequence[Path], vocab_size: int) -> None:
    """Every token id of every shard is below `vocab_size` (one max over each memmap), else a
    ValueError naming the shard, its largest id and the vocabulary (not an IndexError deep in
    the embedding)."""
    for shard in shards:
        tokens = read_shard(shard)
        largest = int(tokens.max()) if len(tokens) else -1
        if largest >= vocab_size:
            raise ValueError(f"{shard}: token id {largest} is outside the model's vocabulary of {vocab_size} "
                             "(were these shards made with another tokenizer?)")


def start_run(preset: cfg.Preset, options: RunOptions) -> None:
    """Read the --init-from and --resume checkpoints, refuse a changed config, then run every
    check of `check_run` on the config the run trains (a note when it writes no checkpoint).
    `options` carries the run id (cli.with_run_id)."""
    init_state = convert.load_checkpoint_state(options.init_from) if options.init_from else None
    resumed, resume_path = ckpt.read_resume(options)
    run_config = run_preset(preset, options, init_state, resumed, resume_path)  # refuses a damaged --resume file
    start_step, position, served = 0, (0, 0), 0
    if resumed is not None:
        start_step = int(resumed.get("step", 0))
        saved_position = resumed.get("data_position", {})
        position = (int(saved_position.get("shard_index", 0)), int(saved_position.get("pos", 0)))
        served = int(saved_position.get("batches", 0))
        assert resume_path is not None and options.resume is not None  # read_resume read --resume's file
        for leftover in ckpt.leftover_tmp_files(resume_path.parent) if Path(options.resume).is_dir() else ():
            print(f"warning: ignoring {leftover}: an unfinished save of a run that was killed (never restored; "
                  "delete it to reclaim the space)", file=sys.stderr)
    del init_state, resumed
    check_run(run_config, options, start_step, position, served)
    check_window(options.profile, start_step, run_config.train.steps)
    if (ckpt.checkpoint_directory(run_config, options) is None and run_config.train.steps > start_step
            and int(os.environ.get("RANK", 0)) == 0):
        print("note: this run writes no checkpoint (pass --checkpoint-every K or --save-checkpoint to keep its state)",
              file=sys.stderr)
