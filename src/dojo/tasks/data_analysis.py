"""``family:data_analysis``: seeded sales datasets (CSV and Parquet, up to three tables) with planted
structure, and questions whose answers the generator computes; the model writes a pandas program
that writes ``answer.json``, graded field by field with tolerances outside the sandbox
(``analysis`` form, ``dojo.rewards.analysis``).

The data: ``customers`` (id, region, segment), ``products`` (id, category, unit cost) and ``orders``
(id, customer, product, date, quantity, unit price, discount) over the twelve months of a year, with
a planted trend (more orders month after month), planted outliers (a few orders of 150-400 units
among 1-20) and missing discounts (a missing discount means none). Each question is a snippet of
pandas code of ours: the generator runs it here on the tables as read back from the very bytes the
run gets (trusted code on trusted data), and the reference program is the same snippets after
loading the files, so the two agree by construction; the audit checks it in the sandbox.

Levels (difficulty 0..1 in four steps): one aggregate over one CSV table; a group-by and a planted
feature (months, outliers, missing values); a join of two tables, one of them Parquet; a report of
five fields over three tables (join, share, margin, trend slope, outliers). Every number is asked
with a tolerance of 1e-6 (relative or absolute); no answer is 0 or empty, so an answer file of
zeros earns nothing.
"""

from __future__ import annotations

import base64
import io
import random
from dataclasses import dataclass
from typing import Any

from dojo.tasks.analysis import (
    ANSWER_FILE,
    DATA_ENVIRONMENT,
    answer_instructions,
    computed_answer,
    environment_ref,
    field_test,
    zero_like,
)
from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.model import Task, TaskMetadata, Workspace

REGIONS = ("north", "south", "east", "west", "central")
SEGMENTS = ("retail", "business", "public")
CATEGORIES = ("tools", "garden", "kitchen", "toys", "books", "sports", "office")
YEARS = (2021, 2022, 2023, 2024)
REVENUE = 'orders["revenue"] = orders["quantity"] * orders["unit_price"] * (1 - orders["discount"].fillna(0))'
MONTH = 'orders["month"] = orders["date"].str[:7]'
COLUMNS = {
    "customers": "customer_id, region, segment",
    "products": "product_id, category, unit_cost",
    "orders": "order_id, customer_id, product_id, date (YYYY-MM-DD), quantity, unit_price, discount (empty: none)",
}


@dataclass(frozen=True)
class Question:
    """One field of the answer: what the prompt says, the code that computes it, how it is compared."""

    field: str
    asks: str
    code: str  # sets answer[field]; may use the setup lines REVENUE and MONTH
    unordered: bool = False
    needs: tuple[str, ...] = ("orders",)


def _questions(rng: random.Random, products: list[str], months: list[str], category: str) -> dict[str, Question]:
    product, month = rng.choice(products), rng.choice(months)
    return {
        "total_revenue": Question(
            "total_revenue",
            "the total revenue of all orders (revenue of an order = quantity * unit_price * (1 - discount))",
            'answer["total_revenue"] = float(orders["revenue"].sum())',
        ),
        "missing_discount": Question(
            "missing_discount",
            "how many orders have no discount recorded",
            'answer["missing_discount"] = int(orders["discount"].isna().sum())',
        ),
        "mean_unit_price": Question(
            "mean_unit_price",
            f"the mean unit_price of the orders of product {product}",
            f'answer["mean_unit_price"] = float(orders.loc[orders["product_id"] == "{product}", "unit_price"].mean())',
        ),
        "month_quantity": Question(
            "month_quantity",
            f"the total quantity ordered in {month}",
            f'answer["month_quantity"] = int(orders.loc[orders["month"] == "{month}", "quantity"].sum())',
        ),
        "revenue_by_month": Question(
            "revenue_by_month",
            'an object mapping each month ("YYYY-MM") to the revenue of its orders',
            'answer["revenue_by_month"] = {k: float(v) for k, v in orders.groupby("month")["revenue"].sum().items()}',
        ),
        "outliers": Question(
            "outliers",
            "the order_ids (a list, any order) of orders whose quantity is more than 3 standard deviations "
            "(sample standard deviation) above the mean quantity of all orders",
            'q = orders["quantity"]\n'
            'answer["outliers"] = sorted(orders.loc[q > q.mean() + 3 * q.std(), "order_id"].tolist())',
            unordered=True,
        ),
        "mean_discount": Question(
            "mean_discount",
            "the mean discount of the orders that have one recorded",
            'answer["mean_discount"] = float(orders["discount"].mean())',
        ),
        "busiest_product": Question(
            "busiest_product",
            "the product_id with the largest total quantity ordered",
            'answer["busiest_product"] = str(orders.groupby("product_id")["quantity"].sum().idxmax())',
        ),
        "revenue_by_region": Question(
            "revenue_by_region",
            "an object mapping each customer region to the revenue of its customers' orders",
            'by_region = orders.merge(customers, on="customer_id").groupby("region")["revenue"].sum()\n'
            'answer["revenue_by_region"] = {k: float(v) for k, v in by_region.items()}',
            needs=("orders", "customers"),
        ),
        "top_customers": Question(
            "top_customers",
            "the 3 customer_ids with the highest revenue, highest first",
            'spend = orders.groupby("customer_id")["revenue"].sum().sort_values(ascending=False)\n'
            'answer["top_customers"] = [str(c) for c in spend.index[:3]]',
        ),
        "category_share": Question(
            "category_share",
            f"the share (0 to 1) of the total revenue that comes from products of category {category}",
            'joined = orders.merge(products, on="product_id")\n'
            f'answer["category_share"] = float(joined.loc[joined["category"] == "{category}", "revenue"].sum() '
            '/ joined["revenue"].sum())',
            needs=("orders", "products"),
        ),
        "top_category": Question(
            "top_category",
            "the product category with the highest revenue",
            'answer["top_category"] = str(orders.merge(products, on="product_id").groupby("category")["revenue"]'
            ".sum().idxmax())",
            needs=("orders", "products"),
        ),
        "margin": Question(
            "margin",
            "the total margin: revenue minus quantity * unit_cost (the product's cost), summed over all orders",
            'joined = orders.merge(products, on="product_id")\n'
            'answer["margin"] = float((joined["revenue"] - joined["quantity"] * joined["unit_cost"]).sum())',
            needs=("orders", "products"),
        ),
        "trend": Question(
            "trend",
            "the least-squares slope of the monthly revenue against the month's number (1 to 12), as "
            "numpy.polyfit(months, revenue, 1)[0] gives it",
            'monthly = orders.groupby("month")["revenue"].sum().sort_index()\n'
            'answer["trend"] = float(np.polyfit(np.arange(1, len(monthly) + 1), monthly.to_numpy(), 1)[0])',
        ),
    }


LEVELS: tuple[tuple[tuple[str, ...], int], ...] = (  # (questions to draw from, how many)
    (("total_revenue", "missing_discount", "mean_unit_price", "month_quantity"), 1),
    (("revenue_by_month", "outliers", "mean_discount", "busiest_product"), 2),
    (("revenue_by_region", "top_customers", "category_share", "top_category"), 3),
    (("revenue_by_region", "category_share", "margin", "trend", "outliers", "top_customers"), 5),
)


def _tables(rng: random.Random, level: int) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    gen = np.random.default_rng(rng.getrandbits(64))
    year = rng.choice(YEARS)
    n_customers, n_products = rng.randint(12, 40), rng.randint(6, 12)
    customers = pd.DataFrame({
        "customer_id": [f"C{i:03d}" for i in range(1, n_customers + 1)],
        "region": gen.choice(REGIONS[: rng.randint(3, 5)], n_customers),
        "segment": gen.choice(SEGMENTS, n_customers),
    })  # fmt: skip
    categories = rng.sample(CATEGORIES, rng.randint(3, 5))
    products = pd.DataFrame({
        "product_id": [f"P{i:02d}" for i in range(1, n_products + 1)],
        "category": [categories[i % len(categories)] for i in range(n_products)],
        "unit_cost": np.round(gen.uniform(2, 40, n_products), 2),
    })  # fmt: skip
    per_month = [max(3, int(rng.randint(6, 12) + rng.uniform(0.5, 3) * m)) for m in range(12)]  # a planted trend
    months = np.repeat(np.arange(1, 13), per_month)
    n = len(months)
    days = gen.integers(1, 29, n)
    cost = products.set_index("product_id")["unit_cost"]
    product_ids = gen.choice(products["product_id"], n)
    quantity = gen.integers(1, 21, n)
    outliers = gen.choice(n, rng.randint(2, 3), replace=False)
    quantity[outliers] = gen.integers(150, 401, len(outliers))  # planted outliers
    discount = np.round(gen.choice([0.0, 0.05, 0.1, 0.15, 0.2, 0.3], n), 2).astype(float)
    missing = gen.choice(n, max(3, n // 12), replace=False)
    discount[missing] = np.nan  # planted missing values
    orders = pd.DataFrame({
        "order_id": [f"O{i:04d}" for i in range(1, n + 1)],
        "customer_id": gen.choice(customers["customer_id"], n),
        "product_id": product_ids,
        "date": [f"{year}-{m:02d}-{d:02d}" for m, d in zip(months, days, strict=True)],
        "quantity": quantity,
        "unit_price": np.round(cost.loc[product_ids].to_numpy() * gen.uniform(1.1, 1.9, n), 2),
        "discount": discount,
    })  # fmt: skip
    return {"customers": customers, "products": products, "orders": orders, "year": year, "categories": categories}


def _encode(frame: Any, parquet: bool) -> str:
    if parquet:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return base64.b64encode(buffer.getvalue()).decode()
    return str(frame.to_csv(index=False))


def _decode(text: str, parquet: bool) -> Any:
    import pandas as pd

    return pd.read_parquet(io.BytesIO(base64.b64decode(text))) if parquet else pd.read_csv(io.StringIO(text))


class DataAnalysisFamily:
    """See the module doc."""

    name = "data_analysis"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        import numpy as np
        import pandas as pd

        level = difficulty_level(difficulty, len(LEVELS))
        for _ in range(20):  # (a draw whose answer holds a 0 or an empty list is drawn again)
            data = _tables(rng, level)
            products = sorted(data["products"]["product_id"])
            months = [f"{data['year']}-{m:02d}" for m in range(1, 13)]
            pool, count = LEVELS[level]
            catalogue = _questions(rng, products, months, rng.choice(data["categories"]))
            questions = [catalogue[name] for name in sorted(rng.sample(pool, count), key=pool.index)]
            needed = sorted({t for q in questions for t in q.needs}, key=("orders", "customers", "products").index)
            if level == 3:
                needed = ["orders", "customers", "products"]
            parquet = {t for t in needed if level >= 2 and (t == "orders" or (level == 3 and t == "products"))}
            files: dict[str, str] = {}
            frames: dict[str, Any] = {}
            loads = []
            for table in needed:
                path = f"data/{table}.{'parquet' if table in parquet else 'csv'}"
                files[path] = _encode(data[table], table in parquet)
                frames[table] = _decode(files[path], table in parquet)  # what the run will read
                reader = "read_parquet" if table in parquet else "read_csv"
                loads.append(f'{table} = pd.{reader}("{path}")')
            body = "\n".join([REVENUE, MONTH, *(q.code for q in questions)])
            answer = computed_answer(body, {"pd": pd, "np": np, **frames}, "data_analysis")
            if not any(zero_like(v) for v in answer.values()):
                break
        lines = ["import json", "import numpy as np", "import pandas as pd", *loads, "answer = {}", body]
        reference = "\n".join([*lines, f'json.dump(answer, open("{ANSWER_FILE}", "w"))'])
        described = "\n".join(f"- {path}: {COLUMNS[path.split('/')[1].split('.')[0]]}" for path in files)
        prompt = (
            f"The files below hold a shop's sales data for {data['year']}:\n{described}\n"
            "A missing discount means no discount. The revenue of an order is quantity * unit_price * "
            "(1 - discount).\n\n"
            + answer_instructions([(q.field, q.asks) for q in questions])
            + "\nNumbers are compared within 1e-6 (relative or absolute); names exactly."
        )
        tests = [field_test(q.field, answer[q.field], unordered=q.unordered) for q in questions]
        return Task(
            id="data_analysis",
            domain="data",
            form="analysis",
            prompt=prompt,
            tests=tests,
            reference=f"```python\n{reference}\n```",
            workspace=Workspace(files=files, binary=sorted(p for p in files if p.endswith(".parquet"))),
            environment=environment_ref(DATA_ENVIRONMENT),
            metadata=TaskMetadata(
                source="family:data_analysis",
                difficulty=round(difficulty, 3),
                tags=[f"level{level + 1}", *(q.field for q in questions), *(["parquet"] if parquet else [])],
            ),
        )


register_family(DataAnalysisFamily())
