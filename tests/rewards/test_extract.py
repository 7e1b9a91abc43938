from __future__ import annotations

from dojo.rewards.extract import extract_answer, extract_code, parse_number


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
