"""apertus_jax: the Apertus pretraining recipe and the Boldt data study in JAX/Flax."""

from setuptools import find_packages, setup

# Two supported stacks, each pinned to what its tests passed on (docs/stacks.md): Python 3.11 gets the last JAX
# that installs there (jax 0.11 needs Python >= 3.12), Python 3.12 and 3.13 today's. The rest of the pins are the
# same on both.
STACKS = {
    "python_version < '3.12'": {"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8"},
    "python_version >= '3.12'": {"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "flax": "0.12.12"},
}


def pinned(names: tuple[str, ...]) -> list[str]:
    """`name==version; marker` of `names` for each stack."""
    return [f"{name}=={STACKS[marker][name]}; {marker}" for marker in STACKS for name in names]


CORE = [
    *pinned(("jax", "jaxlib", "flax")),
    "optax==0.2.8",
    "orbax-checkpoint==0.12.8",
    "grain==0.2.18",
    "tensorstore==0.1.86",
    "array-record==0.8.6",
    "sentencepiece==0.2.3",
    "mistral-common==1.13.1",
    "tiktoken>=0.12",
    "regex>=2024.0",
    "tokenizers>=0.22",
    "safetensors>=0.6",
    "absl-py>=2.1",
    "ml-collections>=1.0",
    "numpy>=2.0",
    # ml_dtypes 0.7.0 registers NumPy loops for its new dtypes in quadratic time (numpy's PyUFunc_AddLoop scans
    # the loops already there): importing it, hence jax, took 0.55 s against 6 ms for 0.6.0 on 2 cores, in every
    # process (each CLI run, test worker and subprocess).
    "ml-dtypes==0.6.0",
    "tensorboardX>=2.6",
    "matplotlib>=3.9",
]
# pytest 9.2 keeps a test's id where xdist 3.8 cannot append its group to it: `--dist loadgroup` (pytest.ini)
# would then ignore every group and build a module's shared fixture once per test (tests/test_suite.py).
TEST = ["pytest==9.1.1", "pytest-xdist==3.8.0"]
# The data folders, each shipped as a package of its own (setuptools warns at every install about data in a
# folder that is no listed package).
DATA_PACKAGES = {
    "apertus_jax.data.assets": ["*"],
    "apertus_jax.data.assets.licenses": ["*"],
    "apertus_jax.prep.assets": ["*"],
    "apertus_jax.posttrain.assets": ["*"],
    "apertus_jax.aot.gpu_target_configs": ["*.txtpb"],
}

setup(
    name="apertus_jax",
    version="0.1.0",
    description="JAX/Flax reproduction of the Apertus pretraining recipe and the Boldt data study",
    python_requires=">=3.11",
    packages=find_packages(include=["apertus_jax*", "experiments*", "configs*", "benchmarks*"])
    + list(DATA_PACKAGES),
    package_data=DATA_PACKAGES,
    include_package_data=True,
    entry_points={"console_scripts": ["apertus-lm-eval=experiments.lm_eval:main"]},
    install_requires=CORE,
    extras_require={
        # The test runner alone: the accelerators CI step (.ci/accelerators) needs no more.
        "test": TEST,
        # nbclient/nbformat/ipykernel: tests/test_notebooks.py executes notebooks/ headless.
        "dev": [
            *TEST,
            "hypothesis>=6.100",
            "ruff==0.17.6",
            "fast-robotstxt==1.1.0",
            "nbclient==0.11.0",
            "nbformat==5.11.1",
            "ipykernel==7.4.0",
        ],
        # Torch-based parity tests against transformers' ApertusForCausalLM (CPU torch from disk/PyPI).
        # (accelerate: lm-eval's `--model hf`, the reference of the lm-eval adapter tests.)
        "hf": ["torch==2.13.0", "transformers>=5.0", "accelerate==1.15.0"],
        # EleutherAI lm-evaluation-harness on our checkpoints (apertus_jax.trained.lm_eval, docs/lm_eval.md).
        "eval": ["lm-eval==0.4.13", "pyyaml>=6.0"],
        # Optional Weights & Biases metrics (--config.metrics.wandb_project=...).
        "wandb": ["wandb==0.31.0"],
        "prep": ["datatrove==0.10.1", "protego==0.7.0", "pyarrow>=15", "orjson>=3.9", "spacy==3.8.18"],
        # Compile-only TPU and GPU targets on a CPU machine (`experiments.memory_plan --target`,
        # docs/accelerators.md): libtpu and the CUDA PJRT plugin with cuDNN (about 2 GB), each stack its own
        # (docs/stacks.md): on the current one libtpu 0.0.51 (jax[tpu] 0.12.0.1 would pin
        # 0.0.50), and the CUDA 13 plugin, which compiles for Hopper and Blackwell.
        "accelerators": [
            "jax[tpu]==0.10.2; python_version < '3.12'",
            "libtpu==0.0.42.1; python_version < '3.12'",
            "jax-cuda12-plugin==0.10.2; python_version < '3.12'",
            "jax-cuda12-pjrt==0.10.2; python_version < '3.12'",
            "nvidia-cudnn-cu12==9.28.0.42; python_version < '3.12'",
            "libtpu==0.0.51; python_version >= '3.12'",
            "jax-cuda13-plugin==0.12.0.1; python_version >= '3.12'",
            "jax-cuda13-pjrt==0.12.0.1; python_version >= '3.12'",
            "nvidia-cudnn-cu13==9.27.0.42; python_version >= '3.12'",
        ],
        # MaxText beside apertus_jax on the current stack (Python 3.12: it needs jax >= 0.11.1), for
        # `benchmarks.maxtext_tpu`: both programs compiled by one libtpu.
        "maxtext": ["maxtext[tpu]==0.2.5; python_version >= '3.12'"],
        "seqio": [
            "seqio==0.0.20",
            "tensorflow==2.21.0",
            "tensorflow-text==2.21.1",
            "tensorflow-datasets==4.9.10",
        ],
    },
)
