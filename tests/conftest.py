"""Test-wide settings: 8 virtual CPU devices so mesh tests run on one machine.

XLA reads the flag when jax initializes its backend, so it is set before any test imports jax.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
