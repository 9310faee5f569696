"""apertus_jax: a JAX/Flax reproduction of the Apertus pretraining recipe and the Boldt data study.

Subpackages mirror the architecture: ``models`` (the Apertus transformer), ``optim`` (AdEMAMix, WSD),
``data`` (Grain pipelines, Goldfish, packing), ``train`` (the sharded trainer), ``prep`` (data
preparation on datatrove), ``eval`` (evaluation), ``tokenizers`` (tokenizers and fairness metrics).
"""

__version__ = "0.1.0"
