"""What AgentEnvGenerator adds to SkyRL's env extras."""

# The key under which AgentEnvGenerator tells the env about the rollout it
# plays (its deadline and attempt); a plain SkyRLGymGenerator leaves it out.
ROLLOUT_KEY = "agentenv_rollout"
