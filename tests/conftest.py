"""Test start-up: quiet TensorFlow, torch imported before TensorFlow, JAX in float64.

Frameworks are imported here once so every test module can use them; torch must come
before TensorFlow (the other order can crash the process when both load native kernels).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

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
