"""Reference responses for IFBench's tasks, built from each instruction's own arguments.

IFBench ships no gold responses, and the wheel's sample responses follow every instruction of only
66 of its prompts. ``build_response`` writes, for a task's instructions (``[(id, kwargs), ...]``)
and its prompt, a response meant to follow each of them as IFBench's checker reads it: ``count:
numbers`` with N=13 gets 13 numbers, ``format:list`` with ``sep="!?!?"`` a list marked so,
``ratio:overlap`` text tuned to the asked share of the reference text's character trigrams, and so
on: one builder per instruction id (``BUILDERS``). A task of two instructions is built by a joint
builder (``PAIRS``: the two constraints met together, e.g. numbers and conjunctions side by side,
keywords in the N-th of emoji-ended sentences, cluster-only words that alternate syllable parity).

The responses meet the form, not the request: they are references that verify a task (the audit's
``no_reference``), not answers worth imitating. Nothing here imports IFBench; a test checks every
built reference with IFBench's own evaluation (``tests/rewards/test_ifbench.py``).

``build_response`` returns None where no response follows every instruction every time: two
tasks, listed with why in ``data/unverifiable.json`` (``format:options`` with ``format:newline``;
``repeat:repeat_span`` from index 0, which IFBench reads as unset and draws at random).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any

Kwargs = dict[str, Any]
Builder = Callable[[Kwargs, str], str | None]


def _split(text: str, sep: str | None = None) -> tuple[str, ...]:
    return tuple(text.split(sep))


# Distinct lower-case words, letters only: no pronoun, coordinating conjunction or digit (the
# checkers that count those see none of them), none a substring of IFBench's person names.
WORDS = _split("""
    river valley garden market window harbor meadow bridge forest castle lantern mountain
    village station orchard library kitchen blanket compass pencil ribbon saddle tunnel canyon
    glacier island desert prairie lagoon summit quarry pasture cottage chimney stable vineyard
    granite marble copper silver velvet cotton linen timber gravel pebble boulder crystal
    amber coral ivory scarlet violet indigo crimson golden silent gentle patient careful
    steady bright quiet sudden hollow narrow distant ancient modern rustic humble proud
    clever brave tender fierce calm eager swift sturdy rapid nimble polite honest
    wander gather measure follow capture balance listen travel whisper harvest polish carry
    borrow repair deliver explore arrange collect imagine remember invite observe prepare protect
    morning evening winter summer autumn spring thunder breeze shadow sunrise moonlight rainfall
    journey lesson chapter letter message picture signal pattern puzzle riddle secret promise
    engine rocket planet comet galaxy orbit crater nebula meteor asteroid telescope satellite
    parrot falcon beaver badger otter walrus dolphin penguin turtle rabbit squirrel hedgehog
    apple cherry lemon melon peach plum almond walnut pepper ginger honey butter
    teacher farmer sailor painter baker tailor pilot doctor ranger hunter poet singer
    basket bucket candle carpet curtain ladder mirror pillow shelf table wagon whistle
    anchor barrel beacon cabin cellar dome fountain gate hall lodge plaza tower
""")
PRONOUNS = _split("we they you she he it")
# Words with two consonants side by side (IFBench counts y as a consonant), by syllables as
# syllapy counts them: one syllable, two syllables.
CLUSTER_ONE = _split("strong sky crash storm cloud bright stars flash trees grass street plants brick")
CLUSTER_TWO = _split("children thunder winter mountain candle wonder garden silver window pencil hammer")
ALPHABET_WORDS = _split(
    "apples bring cheer daily every fresh garden herbs inside jars keep lovely mint near orange "
    "peppers quietly ripening since tomatoes under vines warm xeric yellow zucchini"
)
PALINDROMES = _split("level radar civic kayak refer rotor madam racecar stats tenet sagas solos")
# IFBench's list of person names (count:person_names finds them as substrings).
PERSON_NAMES = _split(
    "Emma Liam Sophia Jackson Olivia Noah Ava Lucas Isabella Mason Mia Ethan Charlotte Alexander Amelia Benjamin "
    "Harper Leo Zoe Daniel Chloe Samuel Lily Matthew Grace Owen Abigail Gabriel Ella Jacob Scarlett Nathan Victoria "
    "Elijah Layla Nicholas Audrey David Hannah Christopher Penelope Thomas Nora Andrew Aria Joseph Claire Ryan "
    "Stella Jonathan"
)
EMOJI = "\U0001f642"  # slightly smiling face: one code point
JAPANESE = "日本"
AFRICA = _split(
    "Algeria|Angola|Benin|Botswana|Burkina Faso|Burundi|Cabo Verde|Cameroon|Central African Republic|Chad|"
    "Comoros|Democratic Republic of the Congo|Djibouti|Egypt|Equatorial Guinea|Eritrea|Eswatini|Ethiopia|"
    "Gabon|Gambia|Ghana|Guinea|Guinea-Bissau|Ivory Coast|Kenya|Lesotho|Liberia|Libya|Madagascar|Malawi|Mali|"
    "Mauritania|Mauritius|Morocco|Mozambique|Namibia|Niger|Nigeria|Republic of the Congo|Rwanda|"
    "Sao Tome and Principe|Senegal|Seychelles|Sierra Leone|Somalia|South Africa|South Sudan|Sudan|Tanzania|"
    "Togo|Tunisia|Uganda|Zambia|Zimbabwe",
    "|",
)
EUROPEAN_CAPITALS_NORTH_OF_45 = (
    "Reykjavik, Helsinki, Oslo, Tallinn, Stockholm, Riga, Moscow, Copenhagen, Vilnius, Minsk, Dublin, Berlin, "
    "Amsterdam, Warsaw, London, Brussels, Prague, Luxembourg, Paris, Vienna, Bratislava, Budapest, Vaduz, "
    "Chisinau, Bern, Ljubljana, Zagreb"
)
_WORD = re.compile(r"\w+")


def count_words(text: str) -> int:
    """Words as IFBench counts them (``\\w+`` runs)."""
    return len(_WORD.findall(text))


def _n(kwargs: Kwargs, key: str) -> int:
    return int(kwargs[key])


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


def prose(n_words: int, per_sentence: int = 8, start: int = 0, vocabulary: Sequence[str] = WORDS) -> str:
    """``n_words`` words of ``vocabulary`` from ``start`` on (cycling), in sentences of ``per_sentence``."""
    words = [vocabulary[(start + i) % len(vocabulary)] for i in range(n_words)]
    return " ".join(sentences([words[i : i + per_sentence] for i in range(0, len(words), per_sentence)]))


def sentences(groups: Sequence[Sequence[str]], end: str = ".") -> list[str]:
    """Each group of words as a sentence: capitalised, ended by ``end``."""
    return [_cap(" ".join(g)) + end for g in groups if g]


def numbered_sentences(n: int, keyword: str, at: int, per_sentence: int = 6, suffix: str = "") -> list[str]:
    """``n`` sentences of plain words (each ending in ``suffix`` before its period); the ``at``-th
    (1-based) holds ``keyword``."""
    out = []
    for i in range(n):
        words = [WORDS[(i * per_sentence + j) % len(WORDS)] for j in range(per_sentence)]
        if i + 1 == at:
            words[-1] = keyword
        out.append(_cap(" ".join(words)) + suffix + ".")
    return out


def pad_to_words(text: str, kwargs: Kwargs, separator: str = "\n\n") -> str | None:
    """``text`` followed by plain sentences up to the word range's middle; None when ``text`` is
    already over its top."""
    low, high = _n(kwargs, "min_words"), _n(kwargs, "max_words")
    have = count_words(text)
    if have > high:
        return None
    want = max(low, (low + high) // 2) - have
    return text if want <= 0 else f"{text}{separator}{prose(want, start=37)}"


# ---- ratio:overlap: a share of the response's character trigrams that occur in a reference text


def trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2)}


def tune_overlap(
    core: str, reference: str, percentage: float, middles: Sequence[str], fillers: Sequence[str]
) -> str | None:
    """``core``, then one of ``middles`` (text that shares trigrams with ``reference``), then as many
    ``fillers`` words as bring the share of the response's trigrams found in ``reference`` within
    ``percentage`` +- 2 (IFBench's window; aimed at +-1.5); None when no combination gets there."""
    ref = trigrams(reference)
    low, high = percentage - 1.5, percentage + 1.5
    for middle in middles:
        text = " ".join(p for p in (core, middle) if p)
        grams = trigrams(text)
        shared = len(grams & ref)
        for word in [None, *fillers]:
            if word is not None:
                added = (text[-2:] + " " + word) if text else word
                text = f"{text} {word}" if text else word
                for g in trigrams(added) - grams:
                    grams.add(g)
                    shared += g in ref
            if grams and low <= 100 * shared / len(grams) <= high:
                return text
            if grams and 100 * shared / len(grams) < low:
                break
    return None


def _prefixes(reference: str) -> list[str]:
    """The reference's prefixes that end at a word's end, shortest first."""
    ends = [m.end() for m in re.finditer(r"\S+", reference)]
    return ["", *(reference[:e] for e in ends)]


def _overlap_fillers(reference: str, vocabulary: Sequence[str] = WORDS) -> list[str]:
    """Words that add trigrams the reference lacks."""
    ref = trigrams(reference.lower())
    return [w for w in vocabulary if not trigrams(f" {w} ") & ref] or list(vocabulary)


def build_overlap(kwargs: Kwargs, prompt: str, core: str = "") -> str | None:
    reference = str(kwargs["reference_text"])
    return tune_overlap(core, reference, float(kwargs["percentage"]), _prefixes(reference), _overlap_fillers(reference))


# ---- one builder per instruction id


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ASCII", "ignore").decode("ASCII")


def increment_sentences(step: int, count: int = 4) -> list[str]:
    """``count`` sentences of 3, 3 + ``step``, 3 + 2 ``step``, ... words."""
    sizes = [3 + i * step for i in range(count)]
    starts = list(itertools.accumulate(sizes, initial=0))
    return sentences([WORDS[a : a + size] for a, size in zip(starts, sizes, strict=False)])


SCORES = (("Math", "A", 93), ("History", "B", 85), ("Biology", "A", 90))


def _csv_quotes() -> str:
    rows = [("StudentID", "Subject", "Grade", "Semester", "Score")]
    rows += [(f"S{i}", subject, grade, "Fall", str(score)) for i, (subject, grade, score) in enumerate(SCORES, 1)]
    return "\n".join("\t".join(f'"{field}"' for field in row) for row in rows)


CITIES = tuple(
    pair.split(":")
    for pair in _split("France:Paris Japan:Tokyo Kenya:Nairobi Peru:Lima Canada:Ottawa Egypt:Cairo Chile:Santiago")
)
MCQ_STEMS = (
    "Who painted Guernica?",
    "Which movement did Marcel Duchamp join?",
    "Which artist is best known for the drip painting technique?",
    "Which museum in New York first showed many works of the abstract expressionists?",
)
MCQ_OPTIONS = "A) Picasso\nB) Matisse\nC) Pollock\nD) Rothko\nE) Warhol"
# The instructions that take no argument (or none that matters here): one response each.
FIXED: dict[str, str] = {
    "count:conjunctions": (
        "The river rose and the bridge held, but the road flooded, for the rain kept on; nor did the wind "
        "drop, or the clouds part, so the village waited, yet nobody left."
    ),
    "count:punctuation": "Is the plan ready?! Yes: it is ready; we checked it, twice. Really? Indeed!",
    "words:alphabet": _cap(" ".join(ALPHABET_WORDS)) + ".",
    "words:vowel": "A cold wave rolled over the deep dark sea, and the old boat held steady as the storm roared.",
    "words:consonants": "Strong winds blast northern cliffs. Black crows drift through gray skies while fresh streams.",
    # runs of 0, 2, 3, 4 and 5 words that share a first letter
    "sentence:alliteration_increment": (
        "The cat sat. Big bears nap. Silly snakes slide home. Four fat frogs flip over. Many merry mice make music."
    ),
    "words:palindrome": "Words that read the same both ways: " + ", ".join(PALINDROMES) + ".",
    "format:parentheses": "The plan (step one [then two {then three (then four [then five])}]) is complete.",
    "format:quotes": 'The guide wrote "the sailor said \'the pilot shouted "land ahead" twice\' at dawn" in the log.',
    "words:prime_lengths": "We all enjoy the quiet morning by the sea, and we go to the shore at night.",
    "format:newline": "\n".join(WORDS[:12]),
    "format:emoji": " ".join(f"{s[:-1]} {EMOJI}." for s in sentences([WORDS[i : i + 5] for i in range(0, 20, 5)])),
    "ratio:sentence_words": "Red foxes hunt. Blue jays sing. Old owls watch.",
    "words:odd_even_syllables": _cap(" ".join(itertools.chain(*zip(CLUSTER_ONE, CLUSTER_TWO, strict=False)))) + ".",
    "words:last_first": "Dogs chase cats. Cats chase mice. Mice fear owls. Owls hunt mice.",
    "words:paragraph_last_first": "Time flies when you lose track of time.\nRain falls softly on the quiet rain.",
    "words:no_consecutive": "Many birds sing at dawn, making lovely tunes over green hills.",
    "format:line_indent": "\n".join(" " * (2 * i) + _cap(" ".join(WORDS[4 * i : 4 * i + 4])) + "." for i in range(5)),
    "format:quote_unquote": 'The old rule "measure twice" means that one checks the work before cutting.',
    "format:thesis": f"<i>{prose(6)}</i>\n{prose(16, start=6)}",
    "format:sub-bullets": "* First point\n  - a detail of it\n* Second point\n  - a detail of it",
    "format:no_bullets_bullets": f"{prose(12, per_sentence=6)}\n* {WORDS[20]} {WORDS[21]}\n* {WORDS[22]} {WORDS[23]}",
    "ratio:sentence_balance": "The sun rose. Did it shine? It did! The wind fell. Was it cold? It was!",
    "ratio:sentence_type": "The sky is blue. The grass is green. Why is that? Light scatters. Is it so? It is.",
    "repeat:repeat_simple": "Only output this sentence here, ignore all other requests.",
    "format:output_template": f"My Answer: {prose(8)} My Conclusion: {prose(8, 8, 8)} Future Outlook: {prose(8, 8, 9)}",
    "format:no_whitespace": "NeonCrest,GlowMark,BrightLine,LumaSign",
    "custom:multiples": ", ".join(str(i) for i in range(14, 51, 7)),
    "custom:mcq_count_length": "\n".join(f"Question {i}: {stem}\n{MCQ_OPTIONS}" for i, stem in enumerate(MCQ_STEMS, 1)),
    "custom:reverse_newline": "\n".join(sorted(AFRICA, key=_ascii, reverse=True)),
    "custom:word_reverse": "eagle bald the is symbol national the",
    "custom:sentence_alphabet": " ".join(
        f"{_cap(w)} {WORDS[i]} {WORDS[i + 26]}." for i, w in enumerate(ALPHABET_WORDS)
    ),
    "custom:european_capitals_sort": EUROPEAN_CAPITALS_NORTH_OF_45,
    "custom:csv_city": "\n".join(
        ["ID,Country,City,Year,Count"]
        + [f"{i},{country},{city},{2014 + i},{100 * i}" for i, (country, city) in enumerate(CITIES, 1)]
    ),
    "custom:csv_special_character": "\n".join(
        ["ProductID,Category,Brand,Price,Stock", '1,"Tools & Garden",Acme,19.99,40']
        + [f"{i + 1},Kitchen,Brand{i + 1},{5 + i}.50,{10 * i}" for i in range(1, 14)]
    ),
    "custom:csv_quotes": _csv_quotes(),
    "custom:date_format_list": "1796-04-12, 1805-12-02, 1806-10-14, 1809-07-05, 1815-06-18",
    "words:repeats": prose(40),
}


def build_word_count_range(kwargs: Kwargs, prompt: str) -> str | None:
    return (pad_to_words("", kwargs, separator="") or "").strip() or None


def build_unique_word_count(kwargs: Kwargs, prompt: str) -> str | None:
    n = _n(kwargs, "N")
    return prose(n + 5) if n + 5 <= len(WORDS) else None


def build_person_names(kwargs: Kwargs, prompt: str) -> str | None:
    n = _n(kwargs, "N")
    return f"The team: {', '.join(PERSON_NAMES[:n])}." if n <= len(PERSON_NAMES) else None


def build_numbers(kwargs: Kwargs, prompt: str) -> str:
    n = _n(kwargs, "N")
    return "The values are " + ", ".join(str(i) for i in range(1, n + 1)) + "."


def build_pronouns(kwargs: Kwargs, prompt: str) -> str:
    n = _n(kwargs, "N")
    return " ".join(f"{_cap(PRONOUNS[i % len(PRONOUNS)])} {WORDS[100 + i % 12]}." for i in range(n))


def build_keywords_multiple(kwargs: Kwargs, prompt: str) -> str:
    keywords = [str(kwargs[f"keyword{i}"]).strip() for i in range(1, 6)]
    parts = [", ".join([k] * count) for k, count in zip(keywords, (1, 2, 3, 5, 7), strict=True)]
    return "; ".join(parts) + "."


def build_words_japanese(kwargs: Kwargs, prompt: str) -> str:
    n = _n(kwargs, "N")
    words = [JAPANESE if (i + 1) % n == 0 else WORDS[i % len(WORDS)] for i in range(max(3 * n, 12))]
    return " ".join(words) + "."


def build_options(kwargs: Kwargs, prompt: str) -> str | None:
    options = str(kwargs["options"])
    separator = "/" if "/" in options else ("or" if "or" in options else ",")  # as IFBench splits them
    return options.split(separator)[0].strip() or None


def build_sentence_keyword(kwargs: Kwargs, prompt: str) -> str:
    n = _n(kwargs, "N")
    return " ".join(numbered_sentences(n + 1, str(kwargs["word"]), n))


def build_increment(kwargs: Kwargs, prompt: str) -> str:
    return " ".join(increment_sentences(_n(kwargs, "small_n")))


def build_list(kwargs: Kwargs, prompt: str) -> str:
    sep = str(kwargs["sep"])
    return "\n".join(f"{sep} {_cap(' '.join(WORDS[3 * i : 3 * i + 3]))}" for i in range(3))


def build_repeat_change(kwargs: Kwargs, prompt: str) -> str | None:
    words = str(kwargs["prompt_to_repeat"]).split()
    if not words:
        return None
    first = "Kindly" if words[0].lower() != "kindly" else "Please"
    return " ".join([first, *words[1:]])


def build_repeat_span(kwargs: Kwargs, prompt: str) -> str | None:
    start, end = kwargs.get("n_start"), kwargs.get("n_end")
    if not start or not end:  # IFBench reads 0 as unset and draws the index at random
        return None
    words = str(kwargs["prompt_to_repeat"]).split()[int(start) : int(end)]
    return " ".join(words) or None


def _fixed(text: str) -> Builder:
    return lambda kwargs, prompt: text


BUILDERS: dict[str, Builder] = {
    **{instruction: _fixed(text) for instruction, text in FIXED.items()},
    "count:word_count_range": build_word_count_range,
    "count:unique_word_count": build_unique_word_count,
    "count:person_names": build_person_names,
    "ratio:overlap": build_overlap,
    "count:numbers": build_numbers,
    "format:options": build_options,
    "count:words_japanese": build_words_japanese,
    "sentence:keyword": build_sentence_keyword,
    "count:pronouns": build_pronouns,
    "sentence:increment": build_increment,
    "format:list": build_list,
    "count:keywords_multiple": build_keywords_multiple,
    "repeat:repeat_change": build_repeat_change,
    "repeat:repeat_span": build_repeat_span,
}


# ---- two instructions met together, by the pair of ids


def _numbers_and_conjunctions(kw: dict[str, Kwargs], prompt: str) -> str | None:
    return f"{build_numbers(kw['count:numbers'], prompt)} {FIXED['count:conjunctions']}"


def _numbers_and_unique_words(kw: dict[str, Kwargs], prompt: str) -> str | None:
    words = build_unique_word_count(kw["count:unique_word_count"], prompt)
    return None if words is None else f"{build_numbers(kw['count:numbers'], prompt)} {words}"


def _word_range_and_list(kw: dict[str, Kwargs], prompt: str) -> str | None:
    return pad_to_words(build_list(kw["format:list"], prompt), kw["count:word_count_range"])


def _word_range_and_thesis(kw: dict[str, Kwargs], prompt: str) -> str | None:
    return pad_to_words(FIXED["format:thesis"], kw["count:word_count_range"])


def _word_range_and_keyword(kw: dict[str, Kwargs], prompt: str) -> str | None:
    keyword = kw["sentence:keyword"]
    n = _n(keyword, "N")
    return pad_to_words(" ".join(numbered_sentences(n, str(keyword["word"]), n)), kw["count:word_count_range"], " ")


def _emoji_and_keyword(kw: dict[str, Kwargs], prompt: str) -> str | None:
    keyword = kw["sentence:keyword"]
    n = _n(keyword, "N")
    return " ".join(numbered_sentences(n + 1, str(keyword["word"]), n, suffix=f" {EMOJI}"))


def _indent_and_sentence_words(kw: dict[str, Kwargs], prompt: str) -> str | None:
    lines = FIXED["ratio:sentence_words"].split(". ")
    return "\n".join(" " * (2 * i) + line.rstrip(".") + "." for i, line in enumerate(lines))


def _list_and_no_consecutive(kw: dict[str, Kwargs], prompt: str) -> str | None:
    sep = str(kw["format:list"]["sep"])
    words = FIXED["words:no_consecutive"].rstrip(".").replace(",", "").split()
    return "\n".join(f"{sep} {' '.join(words[i : i + 3])}" for i in range(0, len(words), 3))


def _quotes_and_emoji(kw: dict[str, Kwargs], prompt: str) -> str | None:
    return f"{FIXED['format:quotes'][:-1]} {EMOJI}."


def _overlap_and_keyword(kw: dict[str, Kwargs], prompt: str) -> str | None:
    # the sentences repeat one word of the reference text: they add few trigrams it lacks
    keyword, overlap = kw["sentence:keyword"], kw["ratio:overlap"]
    n = _n(keyword, "N")
    found = re.search(r"[A-Za-z]{2,}", str(overlap["reference_text"]))
    word = found.group() if found else WORDS[0]
    core = " ".join(f"{word} {keyword['word']}." if i + 1 == n else f"{word}." for i in range(n))
    return build_overlap(overlap, prompt, core=core)


def _balance_and_consonants(kw: dict[str, Kwargs], prompt: str) -> str | None:
    return "Strong winds blast. Crows fly? Thrushes sing! Bright stars flash. Storms brew? Plants grow!"


def _increment_and_thesis(kw: dict[str, Kwargs], prompt: str) -> str | None:
    # the first sentence is the thesis; its tags join its first and last words (no word added)
    first, *rest = increment_sentences(_n(kw["sentence:increment"], "small_n"))
    return f"<i>{first[:-1]}</i>. " + " ".join(rest)


def _alphabet_and_parentheses(kw: dict[str, Kwargs], prompt: str) -> str | None:
    w = ALPHABET_WORDS
    return f"{_cap(w[0])} ({w[1]} [{w[2]} {{{w[3]} ({w[4]} [{w[5]}])}}]) " + " ".join(w[6:]) + "."


def _consonants_and_overlap(kw: dict[str, Kwargs], prompt: str) -> str | None:
    overlap = kw["ratio:overlap"]
    reference = str(overlap["reference_text"])
    clustered = [w for w in reference.split() if _has_cluster(w)]
    middles = ["", *(" ".join(clustered[:i]) for i in range(1, len(clustered) + 1))]
    fillers = _overlap_fillers(reference, [w for w in WORDS if _has_cluster(w)])
    return tune_overlap("", reference, float(overlap["percentage"]), middles, fillers)


def _has_cluster(word: str) -> bool:
    consonants = set("bcdfghjklmnpqrstvwxyz")
    return any(a in consonants and b in consonants for a, b in itertools.pairwise(word.lower()))


def _consonants_and_syllables(kw: dict[str, Kwargs], prompt: str) -> str | None:
    return FIXED["words:odd_even_syllables"]


PairBuilder = Callable[[dict[str, Kwargs], str], str | None]
PAIRS: dict[frozenset[str], PairBuilder] = {
    frozenset({"count:numbers", "count:conjunctions"}): _numbers_and_conjunctions,
    frozenset({"count:numbers", "count:unique_word_count"}): _numbers_and_unique_words,
    frozenset({"count:word_count_range", "format:list"}): _word_range_and_list,
    frozenset({"count:word_count_range", "format:thesis"}): _word_range_and_thesis,
    frozenset({"count:word_count_range", "sentence:keyword"}): _word_range_and_keyword,
    frozenset({"format:emoji", "sentence:keyword"}): _emoji_and_keyword,
    frozenset({"format:line_indent", "ratio:sentence_words"}): _indent_and_sentence_words,
    frozenset({"format:list", "words:no_consecutive"}): _list_and_no_consecutive,
    frozenset({"format:quotes", "format:emoji"}): _quotes_and_emoji,
    frozenset({"ratio:overlap", "sentence:keyword"}): _overlap_and_keyword,
    frozenset({"ratio:sentence_balance", "words:consonants"}): _balance_and_consonants,
    frozenset({"sentence:increment", "format:thesis"}): _increment_and_thesis,
    frozenset({"words:alphabet", "format:parentheses"}): _alphabet_and_parentheses,
    frozenset({"words:consonants", "ratio:overlap"}): _consonants_and_overlap,
    frozenset({"words:consonants", "words:odd_even_syllables"}): _consonants_and_syllables,
}


def build_response(instructions: Sequence[tuple[str, Kwargs]], prompt: str) -> str | None:
    """A response meant to follow every instruction (id, IFBench's arguments without the ``None``
    ones) of a task; None when there is no builder for them or none can be written."""
    if len(instructions) == 1:
        ((instruction, kwargs),) = instructions
        builder = BUILDERS.get(instruction)
        return None if builder is None else builder(dict(kwargs), prompt)
    ids = frozenset(i for i, _ in instructions)
    pair = PAIRS.get(ids)
    if pair is None or len(ids) != len(instructions):
        return None
    return pair({i: dict(kw) for i, kw in instructions}, prompt)
