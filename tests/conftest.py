"""Test start-up: quiet TensorFlow, torch imported before TensorFlow, JAX in float64.

Frameworks are imported here once so every test module can use them; torch must come
before TensorFlow (the other order can crash the process when both load native kernels).
"""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

#: XLA flags for the tests' JAX on CPU: their programs are tiny and eager JAX compiles every
#: primitive for every new shape, so compile time dominates the suite; XLA's classic loop
#: emitters without LLVM optimization compile each ~2.4x faster than the default fusion
#: emitters (tests/test_cross_backend.py: 361 s -> 217 s; test_example.py and
#: test_docstrings.py: 81-94 s -> 49-53 s). Numbers stay IEEE (no fast math either way);
#: XLA_FLAGS=--xla_cpu_use_fusion_emitters=true runs the tests with the default emitters.
FAST_COMPILE_FLAGS = {"xla_cpu_use_fusion_emitters": "false", "xla_backend_optimization_level": "0"}


def _fast_xla_compiles() -> None:
    """Add FAST_COMPILE_FLAGS to XLA_FLAGS, for the CPU platform only, leaving any flag the
    user set; a jaxlib that no longer knows a flag would abort the process at its first
    computation, so a child process tries them first (about a second) and they are dropped
    if it fails."""
    if os.environ["JAX_PLATFORMS"] != "cpu":
        return
    given = os.environ.get("XLA_FLAGS", "")
    added = " ".join(f"--{name}={value}" for name, value in FAST_COMPILE_FLAGS.items()
                     if name not in given)
    if not added:
        return
    flags = f"{given} {added}".strip()
    probe = subprocess.run(
        [sys.executable, "-c", "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"],
        env={**os.environ, "XLA_FLAGS": flags}, capture_output=True, timeout=300, check=False)
    if probe.returncode == 0:
        os.environ["XLA_FLAGS"] = flags


_fast_xla_compiles()

import torch  # noqa: E402,I001  (first: see the module docstring)
import tensorflow as tf  # noqa: E402
import jax  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
tf.config.experimental.enable_tensor_float_32_execution(False)

# Few, deterministic examples: 4 locally ("default"), 3 in CI ("ci", chosen when CI=true, so
# the suite stays inside its time budget with 21 losses x 5 backends in the cross-backend
# harness). HYPOTHESIS_PROFILE=thorough runs 500 random examples per property test.
_SMALL = {"deadline": None, "derandomize": True, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("default", max_examples=4, **_SMALL)
settings.register_profile("ci", max_examples=3, **_SMALL)
settings.register_profile(
    "thorough", max_examples=500, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE",
                                    "ci" if os.environ.get("CI") == "true" else "default"))
