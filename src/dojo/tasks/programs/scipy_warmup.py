"""The scientific environment's warm-up of scipy (``dojo.tasks.analysis.ANALYSIS_WARMUP``, after
``data_warmup``): the zygote of a ``dojo-analysis`` slot runs this once, so each run's first call
of a solver (an integral, a root, an ODE, a linear system, a regression) finds built what it builds
lazily. Runs inside the sandbox; imports what the environment provides.
"""

import numpy as np
from scipy import integrate, linalg, optimize, stats

numbers = (
    integrate.quad(lambda t: t * t, 0, 1),
    optimize.brentq(lambda t: t * t - 2, 0, 2),
    integrate.solve_ivp(lambda t, y: -y, (0, 1), [1.0], rtol=1e-8),
    linalg.solve(np.eye(2), np.ones(2)),
    np.linalg.eigvalsh(np.eye(2)),
    stats.linregress([0.0, 1.0, 2.0], [1.0, 2.0, 3.5]),
)
