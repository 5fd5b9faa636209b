"""From probe measurements to fitted cost parameters, and their validation."""
