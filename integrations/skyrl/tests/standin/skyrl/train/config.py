"""Stand-in for SkyRLTrainConfig: nested settings with SkyRL's defaults for
the keys the integration reads, set by `a.b.c=value` overrides."""

import ast
from types import SimpleNamespace


def _defaults():
    return {
        "data": {"train_data": [], "val_data": []},
        "environment": {"env_class": "gsm8k", "skyrl_gym": {"max_env_workers": 32}},
        "generator": {"batched": False, "max_turns": 1, "max_input_length": 3072,
                      "vision_language_generator": False, "chat_template_kwargs": {}},
        "trainer": {"max_prompt_length": 3072, "fully_async": {"enabled": False}},
    }


def _ns(d):
    return SimpleNamespace(**{k: _ns(v) if isinstance(v, dict) and k != "chat_template_kwargs" else v for k, v in d.items()})


class SkyRLTrainConfig:
    @staticmethod
    def from_cli_overrides(args):
        d = _defaults()
        for arg in args:
            key, _, raw = arg.partition("=")
            *path, last = key.split(".")
            node = d
            for p in path:
                node = node.setdefault(p, {})
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                value = {"true": True, "false": False}.get(raw, raw)
            node[last] = value
        return _ns(d)
