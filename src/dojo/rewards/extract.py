"""Getting the gradable part out of a completion: the code, or the one final answer."""

from __future__ import annotations

import re
from collections.abc import Iterator

_FENCE_OPEN = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n")
_FENCE_CLOSE = re.compile(r"```")
_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_ANSWER_LINE = re.compile(r"(?:final answer|answer)\s*(?:is|:)\s*(.+)$", re.IGNORECASE | re.MULTILINE)

LANGUAGE_TAGS = {
    "python": ("python", "py", "python3"),
    "bash": ("bash", "sh", "shell"),
    "c": ("c",),
    "cpp": ("cpp", "c++", "cxx"),
    "javascript": ("javascript", "js", "node"),
}


def utf8_text(text: str) -> str:
    """``text``, its lone surrogates (which no UTF-8 can hold) replaced: one raised
    ``UnicodeEncodeError`` out of a grade when written to a run or measured in bytes."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode()
    return text


def delimited(
    text: str, opener: re.Pattern[str], closer: re.Pattern[str], opener_end: int | None = None
) -> Iterator[tuple[re.Match[str], str]]:
    """Each ``opener`` match and the text from it to the next ``closer``: what
    ``re.finditer(opener + "(.*?)" + closer, re.DOTALL)`` finds, in linear time. The lazy pattern
    tries every opener against the rest of the text, so a completion of openers and no closer cost
    the square of its length (16,000 ``<answer>``: 20 s of the grader's event loop). Openers are
    looked for before ``opener_end`` only (where none can end past it)."""
    pos, stop = 0, len(text) if opener_end is None else opener_end
    while (start := opener.search(text, pos, stop)) is not None:
        end = closer.search(text, start.end())
        if end is None:  # (no later opener has a closer after it either)
            return
        yield start, text[start.end() : end.start()]
        pos = end.end()


def fenced_blocks(completion: str) -> list[tuple[str, str]]:
    """Every fenced block of ``completion``: (its tag, its body)."""
    last_line_end = completion.rfind("\n") + 1  # (an opening fence ends its line: "`" * 16,000 took 0.4 s)
    return [(m.group(1), body) for m, body in delimited(completion, _FENCE_OPEN, _FENCE_CLOSE, last_line_end)]


def extract_code(completion: str, language: str = "python") -> str:
    """The last fenced block in ``language`` (or untagged); the whole text when there is no fence."""
    tags = LANGUAGE_TAGS.get(language, (language,))
    blocks = fenced_blocks(completion)
    matching = [body for tag, body in blocks if tag.lower() in tags]
    if matching:
        return matching[-1]
    untagged = [body for tag, body in blocks if not tag]
    if untagged:
        return untagged[-1]
    if blocks:
        return blocks[-1][1]
    if "```" in completion:  # an opened fence never closed (cut off by max tokens)
        after = completion.split("```", 1)[1]
        return after.split("\n", 1)[1] if "\n" in after else ""
    return completion


class AnswerExtraction:
    """The result of looking for one final answer: ``answer`` or a ``problem`` saying why not."""

    def __init__(self, answer: str | None, problem: str | None = None) -> None:
        self.answer = answer
        self.problem = problem


def extract_answer(completion: str, max_chars: int = 256) -> AnswerExtraction:
    """Exactly one final answer: an ``<answer>`` tag, else one ``\\boxed{}``, else the last
    "Answer: ..." line, else a short bare completion. More than one tagged answer, or an answer
    longer than ``max_chars``, is refused (answer stuffing)."""
    tags = [a.strip() for _, a in delimited(completion, _ANSWER_OPEN, _ANSWER_CLOSE)]
    if len(set(tags)) > 1:
        return AnswerExtraction(None, "multiple_answers")
    if tags:
        answer = tags[0]
    else:
        boxed = [b.strip() for b in _BOXED.findall(completion)]
        if len(set(boxed)) > 1:
            return AnswerExtraction(None, "multiple_answers")
        if boxed:
            answer = boxed[0]
        else:
            lines = _ANSWER_LINE.findall(completion)
            if lines:
                answer = lines[-1].strip()
            elif completion.strip() and "\n" not in completion.strip():
                answer = completion.strip()
            else:
                return AnswerExtraction(None, "no_answer")
    if len(answer) > max_chars:
        return AnswerExtraction(None, "answer_too_long")
    if not answer:
        return AnswerExtraction(None, "no_answer")
    return AnswerExtraction(answer)


def normalise_answer(text: str) -> str:
    """Whitespace collapsed, surrounding quotes/period removed: what exact matching compares."""
    text = " ".join(text.split())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1]
    return text.rstrip(".").strip()


_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")


def parse_number(text: str) -> float | None:
    """A number written plainly, with thousands separators, as a fraction a/b, or a percentage."""
    t = normalise_answer(text).replace(",", "").replace("$", "").strip()
    percent = t.endswith("%")
    t = t.rstrip("%").strip()
    value: float | None = None
    if _NUMBER.match(t):
        value = float(t)
    elif t.count("/") == 1:
        num, den = (p.strip() for p in t.split("/"))
        if _NUMBER.match(num) and _NUMBER.match(den) and float(den) != 0:
            value = float(num) / float(den)
    if value is not None and percent:
        value /= 100
    return value
