"""cascade-plan: does shared-prefix (cascade) attention pay for my model, GPU and batch shape?"""

__version__ = "0.1.0"
