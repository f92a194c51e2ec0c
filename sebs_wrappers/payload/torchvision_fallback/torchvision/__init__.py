"""A minimal stand-in for torchvision: what SeBS 411.image-recognition uses, in plain torch.

Loaded only when the real torchvision cannot be imported beside the installed torch. Parameter
names follow torchvision's ResNet, so one state dict loads into either.
"""

__version__ = "0.0+owinvoker"
