"""Stand-in for verl.workers.rollout.llm_server: LLMServerClient.generate's
signature, answered by a scripted policy (tests/conftest.py's)."""

from typing import Any, Dict, List, Optional


class LLMServerClient:
    def __init__(self, config=None, load_balancer_handle=None, **kwargs):
        self.config = config

    async def generate(self, request_id, *, prompt_ids: List[int], sampling_params: Dict[str, Any],
                       image_data: Optional[List[Any]] = None, video_data: Optional[List[Any]] = None,
                       audio_data: Optional[List[Any]] = None, mm_processor_kwargs: Optional[Dict[str, Any]] = None,
                       **kwargs: Any):
        raise NotImplementedError("the tests' ScriptedServerManager answers")
