"""Stand-in: verl.utils.tokenizer."""
