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
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


class TinyModelSpec(BaseModel):
    """Shape of the tiny model. The defaults make ~1 M parameters; tests use smaller ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hidden_size: int = Field(128, ge=8, description="Width of the residual stream.")
    intermediate_size: int = Field(512, ge=8, description="Width of the MLP.")
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
