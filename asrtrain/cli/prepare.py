"""``asrtrain prepare``: the data stages, each in its own module."""

from __future__ import annotations

import click

from asrtrain.cli.lazy import LazyGroup

PREPARE_COMMANDS = {
    "synth": "asrtrain.cli.prepare_synth:synth",
    "features": "asrtrain.cli.prepare_features:features",
    "archive": "asrtrain.cli.prepare_archive:archive",
    "ivectors": "asrtrain.cli.prepare_ivectors:ivectors",
    "fmllr": "asrtrain.cli.prepare_fmllr:fmllr",
    "adapt-job": "asrtrain.cli.prepare_adapt_job:adapt_job",
    "lang": "asrtrain.cli.prepare_lang:lang",
    "align": "asrtrain.cli.prepare_align:align",
    "align-worker": "asrtrain.cli.prepare_align:align_worker",
    "sizes": "asrtrain.cli.prepare_sizes:sizes",
    "gmm-graph": "asrtrain.cli.prepare_gmm_graph:gmm_graph",
    "fmllr-feats": "asrtrain.cli.prepare_fmllr_feats:fmllr_feats",
    "perturb": "asrtrain.cli.prepare_perturb:perturb",
    "subset": "asrtrain.cli.prepare_subset:subset",
    "check-dirs": "asrtrain.cli.prepare_check_dirs:check_dirs",
    "tree": "asrtrain.cli.prepare_tree:tree",
    "realign": "asrtrain.cli.prepare_realign:realign",
    "den-graph": "asrtrain.cli.prepare_den_graph:den_graph",
}


@click.group(cls=LazyGroup, lazy_subcommands=PREPARE_COMMANDS)
def prepare() -> None:
    """Prepare data: synthesize a corpus, features, training archives, the decoding graph."""
