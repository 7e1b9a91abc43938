"""dojo: an engine for agent reinforcement-learning post-training of language models."""

__version__ = "0.1.0"
