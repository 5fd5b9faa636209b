"""Serving-side effects that decide whether sharing survives: routing across replicas, RL rollouts."""
