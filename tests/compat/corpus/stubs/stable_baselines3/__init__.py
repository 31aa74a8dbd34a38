"""Stand-in for stable_baselines3: only the replay buffer the corpus's RL programs import."""

__version__ = "2.0.0"
