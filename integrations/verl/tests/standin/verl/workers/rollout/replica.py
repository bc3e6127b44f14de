"""Stand-in for verl.workers.rollout.replica: TokenOutput, what the server
manager's generate returns (a pydantic model in verl; here its fields)."""

from typing import Any, Dict, List, Optional


class TokenOutput:
    token_ids: List[int]
    log_probs: Optional[List[float]] = None
    routed_experts: Optional[Any] = None
    stop_reason: Optional[str] = None
    num_preempted: Optional[int] = None
    extra_fields: Dict[str, Any] = {}

    def __init__(self, *, token_ids, log_probs=None, routed_experts=None, stop_reason=None, num_preempted=None, extra_fields=None):
        self.token_ids = list(token_ids)
        self.log_probs = log_probs
        self.routed_experts = routed_experts
        self.stop_reason = stop_reason
        self.num_preempted = num_preempted
        self.extra_fields = dict(extra_fields or {})
