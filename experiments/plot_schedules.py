"""Plot the learning rate, AdEMAMix alpha and beta3 of an Apertus run against tokens consumed.

    python -m experiments.plot_schedules --out=DIR [--preset=apertus-8b]

Writes `DIR/<preset without dash>_schedules.png` (e.g. `apertus8b_schedules.png`) and prints its path; the
figure is `apertus_jax.optim.schedule_plot`'s. An unknown preset ends with one line on stderr and exit
status 2 (nothing written).
"""

from absl import flags

from apertus_jax.optim.schedule_plot import write_schedule_plot
from experiments import cli

_OUT = flags.DEFINE_string("out", None, "Directory for the PNG (created if missing).")
_PRESET = flags.DEFINE_string("preset", "apertus-8b", "apertus-8b or apertus-70b.")


def main(argv) -> None:
    del argv
    cli.required(out=_OUT.value)
    print(write_schedule_plot(_PRESET.value, _OUT.value))


if __name__ == "__main__":
    cli.execute(main)
