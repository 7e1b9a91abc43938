"""A tiny Qwen2-architecture causal LM with a character-level tokenizer, built locally.

Nothing is downloaded: the vocabulary is the 256 byte-level symbols (one token per byte, so one
per ASCII character) plus the chat-template tokens, and the weights are random (seeded). The
tokenizer is byte-level in the way Qwen2's is, because ``AutoTokenizer`` loads any ``qwen2`` model
directory with Qwen2's byte-level pre-tokenizer and decoder: a plain character vocabulary would
lose every space and newline on reload. It exists so that policies, servers and trainers can be exercised
end to end on a CPU in seconds (tests, ``make demo``).
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")
# ChatML with Hermes-style tool calls (what Qwen renders): tools are listed in the system turn (by
# name and parameters only, short enough for a byte-level model), an
# assistant's calls are ``<tool_call>`` JSON blocks, and a tool's result comes back as a user turn in
# ``<tool_response>``. Earlier messages render the same whatever follows (trainers rely on that).
CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages and messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}\n\n{% endif %}"
    "# Tools\n{% for t in tools %}{% set f = t['function'] if 'function' in t else t %}"
    "{{ f['name'] }}({{ ((f.get('parameters') or {}).get('properties') or {}).keys() | join(', ') }})\n"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' and tools and loop.first %}"
    "{% elif m['role'] == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m['content'] }}\n</tool_response><|im_end|>\n"
    "{% elif m['role'] == 'assistant' and m.get('tool_calls') %}<|im_start|>assistant\n{{ m['content'] or '' }}"
    "{% for c in m['tool_calls'] %}<tool_call>\n{\"name\": \"{{ c['function']['name'] }}\", \"arguments\": "
    "{% if c['function']['arguments'] is string %}{{ c['function']['arguments'] }}"
    "{% else %}{{ c['function']['arguments'] | tojson }}{% endif %}}\n</tool_call>{% endfor %}<|im_end|>\n"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# How ``tokenizer.parse_response`` reads a reply back: ``<tool_call>`` blocks, then text to ``<|im_end|>``
# (the layout transformers documents for Qwen-style templates).
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}


_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


class TinyModelSpec(BaseModel):
    """Shape of the tiny model. The defaults make ~0.26 M parameters, the shape ``make demo`` trains:
    against the earlier 128-wide default (~1 M), a warm-start step costs 0.4x as much and the default
    run learns as much (five seeds, docs/benchmarks.md, 2026-12-04); tests use smaller ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hidden_size: int = Field(64, ge=8, description="Width of the residual stream.")
    intermediate_size: int = Field(256, ge=8, description="Width of the MLP.")
    num_layers: int = Field(4, ge=1, le=64, description="Transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads (must divide hidden_size).")
    num_kv_heads: int = Field(2, ge=1, description="Key/value heads (must divide num_heads).")
    max_positions: int = Field(2048, ge=16, description="Longest sequence the model accepts.")
    seed: int = Field(0, description="Seed of the random initial weights.")


def char_vocabulary() -> list[str]:
    """Special tokens first, then the 256 byte-level symbols (printable ASCII first)."""
    from tokenizers import pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    ascii_first = sorted(alphabet, key=lambda c: (c not in string.printable, ord(c)))
    return [*SPECIAL_TOKENS, *ascii_first]


def build_tokenizer() -> Any:
    """A ``PreTrainedTokenizerFast`` with one token per byte (no merges) and a ChatML template."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(char_vocabulary())}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.normalizer = normalizers.NFC()
    # Qwen2's own pre-tokenizer, which AutoTokenizer installs on reload anyway: a split, then bytes.
    split = pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated", invert=False)
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def build_tiny_model(out_dir: str | Path, spec: TinyModelSpec | None = None) -> Path:
    """Write a tiny model and its tokenizer to ``out_dir`` (loadable with ``AutoModelForCausalLM``)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    spec = spec or TinyModelSpec()
    if spec.hidden_size % spec.num_heads or spec.num_heads % spec.num_kv_heads:
        raise ValueError("num_heads must divide hidden_size and num_kv_heads must divide num_heads")
    tokenizer = build_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng():
        torch.manual_seed(spec.seed)
        model = Qwen2ForCausalLM(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
