def resolve_policy_model_name(cfg):
    return None
