"""Simic: the reinforcement learning that trains Tamiyo's policy. Several environments (a host and its slots each)
train side by side (``vectorized``, ``env``, ``batched``), their rewards (``reward``) fill a rollout (``rollout``),
and PPO updates the policy from it (``ppo``, ``agent``); the config of a run (``config``)."""
