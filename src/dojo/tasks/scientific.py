"""``family:scientific``: numerical problems with known or high-precision results: integration, ODEs,
linear algebra, root finding and statistics. The model writes a program (numpy and scipy are
preloaded) that writes ``answer.json``; each field is compared outside the sandbox with the relative
and absolute tolerances the task declares and the prompt states (``analysis`` form).

The truths are computed here by the generator, trusted code on its own numbers: closed forms where
there are (the logistic equation, a polynomial's integral), else scipy at settings far tighter than
the tolerance asked (``quad`` to 1e-13, ``solve_ivp`` DOP853 at rtol 1e-12, ``brentq`` to 1e-15).
The data a problem needs beyond a few numbers (a matrix, a sample) is a CSV file in the work dir.

Levels (difficulty 0..1 in four steps): one quantity; two; three; and a mixed problem of four
quantities across kinds. Tolerances are 1e-6 relative (1e-8 absolute for roots), so a method's
default settings are not always enough (``solve_ivp``'s default rtol is 1e-3): reading the
tolerance is part of the task.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dojo.tasks import analysis as common
from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.model import Task, TaskMetadata, Workspace


@dataclass(frozen=True)
class Part:
    """One quantity: its field, what the prompt asks, the code computing it, its tolerances."""

    field: str
    asks: str
    code: str
    rel: float = 1e-6
    abs_: float = 1e-9


Problem = tuple[list[Part], dict[str, str]]  # the parts, and data files (path -> CSV text)


def _integral(rng: random.Random) -> Problem:
    a, b = 0.0, round(rng.uniform(1.0, 4.0), 2)
    k, c = rng.randint(1, 5), round(rng.uniform(0.2, 2.0), 2)
    kind = rng.choice(["gauss", "osc", "poly"])
    if kind == "gauss":
        expr, code = f"exp(-{c} * x**2) * cos({k} * x)", f"lambda x: np.exp(-{c} * x**2) * np.cos({k} * x)"
    elif kind == "osc":
        expr, code = f"sin({k} * x) / (1 + {c} * x**2)", f"lambda x: np.sin({k} * x) / (1 + {c} * x**2)"
    else:
        coefs = [rng.randint(-5, 5) or 1 for _ in range(4)]
        expr = " + ".join(f"({co}) * x**{p}" for p, co in enumerate(coefs))
        exact = sum(co * (b ** (p + 1) - a ** (p + 1)) / (p + 1) for p, co in enumerate(coefs))
        return [
            Part("integral", f"the integral of f(x) = {expr} over [{a}, {b}]", f"answer['integral'] = {exact!r}")
        ], {}
    body = f"answer['integral'] = float(quad({code}, {a}, {b}, epsabs=1e-13, epsrel=1e-13, limit=500)[0])"
    return [Part("integral", f"the integral of f(x) = {expr} over [{a}, {b}]", body)], {}


def _ode(rng: random.Random) -> Problem:
    if rng.random() < 0.5:  # logistic: a closed form
        r, cap, y0, t = round(rng.uniform(0.3, 2.0), 2), rng.randint(10, 100), rng.randint(1, 5), rng.randint(2, 8)
        asks = f"y({t}) for y' = {r} * y * (1 - y / {cap}), y(0) = {y0}"
        code = f"answer['y_end'] = float({cap} / (1 + ({cap} - {y0}) / {y0} * np.exp(-{r} * {t})))"
        return [Part("y_end", asks, code)], {}
    damping, omega, t = round(rng.uniform(0.05, 0.5), 2), round(rng.uniform(1.0, 4.0), 2), rng.randint(3, 10)
    asks = (f"x({t}) and v({t}) for the damped oscillator x'' + {damping} * x' + {omega}**2 * x = 0, "
            "x(0) = 1, v(0) = x'(0) = 0")  # fmt: skip
    code = (
        f"sol = solve_ivp(lambda t, s: [s[1], -{damping} * s[1] - {omega}**2 * s[0]], (0, {t}), [1.0, 0.0], "
        "method='DOP853', rtol=1e-12, atol=1e-12)\n"
        "answer['x_end'] = float(sol.y[0, -1])\nanswer['v_end'] = float(sol.y[1, -1])"
    )
    return [Part("x_end", asks, code, abs_=1e-8), Part("v_end", f"(the same oscillator's) v({t})", "", abs_=1e-8)], {}


def _linear_algebra(rng: random.Random) -> Problem:
    n = rng.randint(3, 6)
    while True:
        rows = [[rng.randint(-9, 9) for _ in range(n)] for _ in range(n)]
        sym = [[rows[i][j] + rows[j][i] for j in range(n)] for i in range(n)]  # symmetric: real eigenvalues
        b = [rng.randint(-9, 9) for _ in range(n)]
        import numpy as np

        if abs(np.linalg.det(np.array(sym, dtype=float))) > 1.0:
            break
    files = {
        "data/A.csv": "\n".join(",".join(str(v) for v in row) for row in sym) + "\n",
        "data/b.csv": "\n".join(str(v) for v in b) + "\n",
    }
    load = "A = np.loadtxt('data/A.csv', delimiter=',', ndmin=2)\nb = np.loadtxt('data/b.csv', ndmin=1)\n"
    return [
        Part("det", "the determinant of A (data/A.csv, a symmetric matrix, no header)",
             load + "answer['det'] = float(np.linalg.det(A))"),
        Part("max_eigenvalue", "the largest eigenvalue of A",
             "answer['max_eigenvalue'] = float(np.linalg.eigvalsh(A)[-1])"),
        Part("x", "the solution x of A x = b (data/b.csv: one number a line), as a list",
             "answer['x'] = [float(v) for v in np.linalg.solve(A, b)]", abs_=1e-8),
    ], files  # fmt: skip


def _root(rng: random.Random) -> Problem:
    c, d = rng.randint(2, 9), rng.randint(1, 9)
    lo, hi = 0.0, 10.0  # x^3 - c x - d: one positive root, past sqrt(c/3)
    asks = f"the positive root of f(x) = x**3 - {c} * x - {d}"
    code = f"answer['root'] = float(brentq(lambda x: x**3 - {c} * x - {d}, {lo}, {hi}, xtol=1e-15, rtol=1e-15))"
    k = round(rng.uniform(1.5, 4.0), 2)
    asks2 = f"the solution x in [0, 1] of cos(x) = {k} * x"
    code2 = f"answer['fixed_point'] = float(brentq(lambda x: np.cos(x) - {k} * x, 0.0, 1.0, xtol=1e-15, rtol=1e-15))"
    return [Part("root", asks, code, abs_=1e-8), Part("fixed_point", asks2, code2, abs_=1e-8)], {}


def _statistics(rng: random.Random) -> Problem:
    n = rng.randint(20, 60)
    slope, icept, noise = round(rng.uniform(-3, 3), 2) or 1.0, round(rng.uniform(-10, 10), 2), rng.uniform(0.5, 3)
    xs = [round(rng.uniform(0, 20), 3) for _ in range(n)]
    ys = [round(icept + slope * x + rng.gauss(0, noise), 3) for x in xs]
    files = {"data/sample.csv": "x,y\n" + "\n".join(f"{x},{y}" for x, y in zip(xs, ys, strict=True)) + "\n"}
    load = "s = pd.read_csv('data/sample.csv')\n"
    return [
        Part("std_y", "the sample standard deviation (ddof=1) of y in data/sample.csv (columns x, y)",
             load + "answer['std_y'] = float(s['y'].std(ddof=1))"),
        Part("correlation", "the Pearson correlation of x and y", "answer['correlation'] = float(s['x'].corr(s['y']))"),
        Part("slope", "the least-squares slope of y on x", "answer['slope'] = float(np.polyfit(s['x'], s['y'], 1)[0])"),
        Part("ci_half_width", "the half-width of the 95% t confidence interval of the mean of y",
             "answer['ci_half_width'] = float(stats.t.ppf(0.975, len(s) - 1) * s['y'].std(ddof=1) / np.sqrt(len(s)))"),
    ], files  # fmt: skip


KINDS: dict[str, Callable[[random.Random], Problem]] = {
    "integration": _integral,
    "ode": _ode,
    "linear_algebra": _linear_algebra,
    "root_finding": _root,
    "statistics": _statistics,
}
PRELUDE = (
    "import json\nimport numpy as np\nimport pandas as pd\nfrom scipy import stats\nfrom scipy.integrate import "
    "quad, solve_ivp\nfrom scipy.optimize import brentq\n"
)


def _scope() -> dict[str, Any]:
    import numpy as np
    import pandas as pd
    from scipy import stats
    from scipy.integrate import quad, solve_ivp
    from scipy.optimize import brentq

    return {"np": np, "pd": pd, "stats": stats, "quad": quad, "solve_ivp": solve_ivp, "brentq": brentq}


class ScientificFamily:
    """See the module doc."""

    name = "scientific"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, 4)
        for _ in range(20):  # (a draw with a zero answer is drawn again: a file of zeros must earn nothing)
            kinds = rng.sample(sorted(KINDS), 2) if level == 3 else [rng.choice(sorted(KINDS))]
            parts: list[Part] = []
            files: dict[str, str] = {}
            for kind in kinds:
                found, data = KINDS[kind](rng)
                parts += found[: 2 if level == 3 else level + 1]
                files.update(data)
            body = "\n".join(p.code for p in parts if p.code)
            answer = common.computed_answer(body, {**_scope(), **_file_loader(files)}, "scientific")
            if not any(common.zero_like(v) for v in answer.values()):
                break
        fields = [(p.field, f"{p.asks} (within {p.rel:g} relative or {p.abs_:g} absolute)") for p in parts]
        prompt = "Compute, numerically:\n" + common.answer_instructions(fields)
        reference = PRELUDE + "answer = {}\n" + body + f"\njson.dump(answer, open({common.ANSWER_FILE!r}, 'w'))\n"
        return Task(
            id="scientific",
            domain="science",
            form="analysis",
            prompt=prompt,
            tests=[common.field_test(p.field, answer[p.field], rel=p.rel, abs_=p.abs_) for p in parts],
            reference=f"```python\n{reference}```",
            workspace=Workspace(files=files) if files else None,
            environment=common.environment_ref(common.ANALYSIS_ENVIRONMENT),
            metadata=TaskMetadata(
                source="family:scientific", difficulty=round(difficulty, 3), tags=[f"level{level + 1}", *kinds]
            ),
        )


class _ReadingTexts:
    """A module whose file reader (``np.loadtxt``, ``pd.read_csv``) takes the generator's own texts by
    path, so that its truths are computed on the exact bytes the run gets, without writing files."""

    def __init__(self, module: Any, reader: str, files: dict[str, str]) -> None:
        self._module, self._reader, self._files = module, reader, files

    def __getattr__(self, name: str) -> Any:
        if name != self._reader:
            return getattr(self._module, name)
        read = getattr(self._module, name)
        return lambda path, **kwargs: read(io.StringIO(self._files[path]), **kwargs)


def _file_loader(files: dict[str, str]) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    return {"np": _ReadingTexts(np, "loadtxt", files), "pd": _ReadingTexts(pd, "read_csv", files)}


register_family(ScientificFamily())
