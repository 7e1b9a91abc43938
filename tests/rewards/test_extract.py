from __future__ import annotations

import re

import pytest

from dojo.rewards.calls import api_answer
from dojo.rewards.extract import delimited, extract_answer, extract_code, fenced_blocks, parse_number
from dojo.rewards.graders import candidate_code
from dojo.rewards.judge_injection import scan_judged_text
from dojo.rewards.repo import parse_edits
from dojo.rewards.report import report_of
from tests.agent.scripted import double_task


def test_code_block_in_the_language_wins() -> None:
    text = "first\n```bash\necho hi\n```\nthen\n```python\nprint(1)\n```\n```python\nprint(2)\n```"
    assert extract_code(text, "python") == "print(2)\n"
    assert extract_code(text, "bash") == "echo hi\n"
    assert extract_code("return x + 1", "python") == "return x + 1"
    assert extract_code("```python\ndef f():\n    return 1", "python") == "def f():\n    return 1"


def test_one_final_answer_or_none() -> None:
    assert extract_answer("thinking...\n<answer> 42 </answer>").answer == "42"
    assert extract_answer("so \\boxed{7}").answer == "7"
    assert extract_answer("work\nThe final answer is 12").answer == "12"
    assert extract_answer("<answer>1</answer><answer>2</answer>").problem == "multiple_answers"
    assert extract_answer("<answer>" + "1 " * 500 + "</answer>").problem == "answer_too_long"
    assert extract_answer("many\nlines\nno answer").problem == "no_answer"


def test_numbers_in_their_usual_spellings() -> None:
    assert parse_number("1,234") == 1234
    assert parse_number("3/4") == 0.75
    assert parse_number("50%") == 0.5
    assert parse_number("-2.5e3") == -2500
    assert parse_number("twelve") is None


# The lazy patterns these parsers replaced: the blocks found must be the same.
LAZY_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)```", re.DOTALL)
LAZY_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
SAMPLES = [
    "```python\nprint(1)\n```",
    "a\n```py title\nx\n``` b ```js\ny```\n```\nz\n```",
    "```python\nnever closed",
    "``` ```\n```\n",
    "<answer>1</answer> <ANSWER>2</Answer><answer>3",
    "<answer><answer>x</answer></answer>",
    "```\n<answer>4</answer>\n```\n```bash\n```",
]


def test_blocks_are_those_the_lazy_patterns_found() -> None:
    for text in SAMPLES:
        assert fenced_blocks(text) == LAZY_FENCE.findall(text), text
        assert [a for _, a in delimited(text, re.compile("<answer>", re.I), re.compile("</answer>", re.I))] == (
            LAZY_TAG.findall(text)
        ), text


@pytest.mark.timeout(30)
def test_openers_without_closers_are_read_in_linear_time() -> None:
    """Each of these held the grader's event loop for seconds to minutes (16,000 spaces before a
    repo edit: 15 s; 128,000 characters of ``<answer>``: 20 s); read in linear time, all of them
    together take well under a second."""
    floods = ["<answer>" * 100_000, "`" * 400_000, " " * 400_000, "\t " * 200_000]
    floods += [
        '<file path="a">\n' * 50_000,
        "a.py\n<<<<<<< SEARCH\n" * 50_000,
        "a.py\n<<<<<<< SEARCH\n=======\n" * 30_000,
    ]
    floods += ["```json\n" * 50_000, "<tool_call>{}</tool_call>" + "<tool_call>" * 50_000]
    task = double_task()
    for text in ["\n" * 200_000, " \n" * 100_000, "system" + " " * 200_000]:  # (16,000 newlines: 6.9 s, 15 s)
        assert candidate_code(task, text).endswith(text) and scan_judged_text(text) == []  # (the stub prepended)
    for text in floods:
        assert extract_answer(text).answer is None
        extract_code(text)
        assert parse_edits(text) == []
        assert report_of(text)[0] is None  # (18 s for 16,000 <answer>)
        api_answer(text)
