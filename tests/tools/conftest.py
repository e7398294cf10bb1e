"""Fixtures shared by the tools package's tests."""

import pytest

# The settings the record's script keeps in its Hyperparameters class and the loader line the
# patches change, written here (the record's own code is never committed).
RECORD_STAND_IN = '''import sys
from pathlib import Path

class Hyperparameters:
    train_files = "somewhere/train_*.bin"  # a note
    val_files = "somewhere/val_*.bin"
    val_tokens = 10 * 1024
    batch_size = 8*64*1024 # another note
    num_iterations = 1393
    val_loss_every = 125

def shards(pattern):
    local_batch_size = Hyperparameters.batch_size // 8
    files = sorted(Path.cwd().glob(pattern))
    file_iter = iter(files)
    return file_iter
'''


@pytest.fixture
def stand_in() -> str:
    """A stand-in for the record's training script: what jaxgpt_tools.upstream_record patches."""
    return RECORD_STAND_IN
