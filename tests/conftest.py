"""Shared helpers: tiny fairseq translation tasks and models built through fairseq's own parsers."""

import os

import pytest
import torch

import fairseq_rope  # the installed plugin (pip install -e .); registers the model
from fairseq import options, tasks

USER_DIR = os.path.dirname(fairseq_rope.__file__)

VOCAB = [f"w{i}" for i in range(40)]

TINY = [
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
    "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
    "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
    "--dropout", "0", "--attention-dropout", "0", "--share-all-embeddings",
]


@pytest.fixture(scope="session")
def dict_dir(tmp_path_factory):
    """A data directory with only dictionaries: enough for fairseq to set up a translation task."""
    path = tmp_path_factory.mktemp("dicts")
    for lang in ("src", "tgt"):
        with open(path / f"dict.{lang}.txt", "w") as f:
            f.writelines(f"{word} {100 - i}\n" for i, word in enumerate(VOCAB))
    return str(path)


@pytest.fixture(scope="session")
def build():
    """build(dict_dir, arch, *flags, seed=0) -> (model, task), parsed exactly as fairseq-train would."""

    def _build(data_dir, arch="rope_transformer", *flags, seed=0, tiny=True):
        parser = options.get_training_parser()
        args = options.parse_args_and_arch(
            parser,
            [data_dir, "--arch", arch, "--source-lang", "src", "--target-lang", "tgt", "--user-dir", USER_DIR,
             *(TINY if tiny else []), *flags],
        )
        task = tasks.setup_task(args)
        torch.manual_seed(seed)
        model = task.build_model(args)
        model.eval()
        return model, task

    return _build


def random_tokens(task, lengths, seed=0, left_pad=True):
    """A padded batch (B x T) of random sentences ending in EOS, and their lengths."""
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    T = max(lengths)
    batch = torch.full((len(lengths), T), d.pad(), dtype=torch.long)
    for i, n in enumerate(lengths):
        sentence = torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])])
        if left_pad:
            batch[i, T - n:] = sentence
        else:
            batch[i, :n] = sentence
    return batch, torch.tensor(lengths)
